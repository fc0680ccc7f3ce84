"""uvicorn's h11 protocol with two guards against hostile load: a cap on open
connections and a deadline for each request head.

uvicorn bounds neither: its ``limit_concurrency`` answers 503 only once a whole
request head has arrived, so connections that never finish theirs are never
refused, and its keep-alive timer stops at the first byte, so a client typing one
byte a second holds a connection (and its buffers) for as long as it likes. A few
hundred such sockets would hold the server.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from outlast.http.errors import STATUS, error_body

ABORT = "outlast.abort"
"""The scope extension holding the connection's abort (an ASGI server extension)."""


class GuardedH11Protocol(H11Protocol):
    """One HTTP/1.1 connection, refused past ``max_connections`` and closed when a
    request head takes longer than ``head_timeout`` seconds. Build the class with
    :func:`guarded_protocol`."""

    max_connections: int = 2000
    head_timeout: float = 10.0
    _refusal: bytes = b""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            # Answer at once instead of queueing: a client at the cap learns it now.
            self.connections.discard(self)
            transport.write(self._refusal)
            transport.close()
            return
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            # The head is complete (or the connection is over): from here on the body
            # has its own deadline (http/request_limits.py) and a response, an SSE stream
            # included, may take as long as it takes.
            self._disarm_head_timer()

    def handle_events(self) -> None:
        super().handle_events()
        scope = getattr(self, "scope", None)
        if scope is not None:
            # How a response ends a connection it cannot finish (``outlast.http.sse``: a
            # client that stopped reading), which uvicorn then takes for the client's
            # disconnect rather than an app that forgot to complete its response.
            scope.setdefault("extensions", {})[ABORT] = self.transport.abort

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            # Kept alive: the next request's head gets the same deadline as the first.
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:
            # Part of a head arrived: say why before closing. (An idle kept-alive
            # connection is closed silently, as HTTP/1.1 allows.)
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()


def guarded_protocol(max_connections: int, head_timeout: float) -> type[GuardedH11Protocol]:
    """The protocol class to pass as uvicorn's ``http=``."""
    refusal = _raw_error("unavailable", f"the server is at its limit of {max_connections} "
                         "open connections; try again shortly")

    class Protocol(GuardedH11Protocol):
        pass

    Protocol.max_connections = max_connections
    Protocol.head_timeout = head_timeout
    Protocol._refusal = refusal
    return Protocol


def _raw_error(code: str, message: str) -> bytes:
    """A whole HTTP response carrying the spec §3 error body, for answers written
    before any request exists (so outside the ASGI app)."""
    body = json.dumps(error_body(code, message)).encode()
    status = STATUS[code]
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode() + body


_REASONS = {408: "Request Timeout", 503: "Service Unavailable"}
_REQUEST_TIMEOUT = _raw_error("request_timeout", "the request line and headers did not "
                              "arrive in time")
