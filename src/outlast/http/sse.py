"""SSE responses: sse-starlette runs the stream, keepalives and the disconnect
listener in one task group; a send timeout notices clients that vanished silently."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from sse_starlette import EventSourceResponse

from outlast.http.frames import keepalive

log = logging.getLogger("outlast.http")

# How the OpenAPI document describes a stream: before OpenAPI 3.2 (``itemSchema``), the
# ``schema`` of text/event-stream describes each event. ``data`` is one AG-UI event.
SSE_CONTENT: dict[str, Any] = {"text/event-stream": {"schema": {
    "type": "object",
    "properties": {"data": {"type": "string", "contentMediaType": "application/json"},
                   "id": {"type": "string", "pattern": "^[0-9]+$"},
                   "event": {"type": "string"}, "retry": {"type": "integer"}},
}}}


def stream_response(
    frames: AsyncIterator[str],
    *,
    headers: dict[str, str],
    keepalive_seconds: float,
    on_disconnect: Callable[[], Awaitable[None]] | None = None,
) -> EventSourceResponse:
    """An SSE response over frames spelled by ``outlast.http.frames``.

    ``on_disconnect`` runs when the client goes away before the stream ended
    by itself (G1: only requests that asked for ``on_disconnect=cancel`` pass one).
    """

    async def body() -> AsyncIterator[bytes]:
        completed = False
        try:
            async for chunk in frames:
                yield chunk.encode()
            completed = True
        finally:
            if not completed and on_disconnect is not None:
                # The stream's scope is being cancelled: shield the handler so it runs.
                with anyio.CancelScope(shield=True):
                    try:
                        await on_disconnect()
                    except Exception:
                        log.exception("on-disconnect handler failed")

    return EventSourceResponse(
        body(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
        ping=keepalive_seconds,
        ping_message_factory=keepalive,
        send_timeout=keepalive_seconds,
    )
