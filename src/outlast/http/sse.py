"""SSE responses: a stream is the request's own task writing frames, one task waiting
for the client to leave, and one timer that writes keepalives and drops a client whose
writes have stalled.

A stream lives as long as its run, and a process holds thousands of them, so what each
costs matters more than for an ordinary response: sse-starlette, which ran our streams
before, gave each one four tasks in a task group, a cancel scope around every write and
a lock around every keepalive (the git history of docs/performance.md has the
measurements that replaced it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from outlast.errors import StoreUnavailable
from outlast.http.frames import KEEPALIVE
from outlast.http.server import ABORT

log = logging.getLogger("outlast.http")

# How the OpenAPI document describes a stream: before OpenAPI 3.2 (``itemSchema``), the
# ``schema`` of text/event-stream describes each event. ``data`` is one AG-UI event.
SSE_CONTENT: dict[str, Any] = {"text/event-stream": {"schema": {
    "type": "object",
    "properties": {"data": {"type": "string", "contentMediaType": "application/json"},
                   "id": {"type": "string", "pattern": "^[0-9]+$"},
                   "event": {"type": "string"}, "retry": {"type": "integer"}},
}}}


class EventStream(StreamingResponse):
    """An SSE response over frames spelled by ``outlast.http.frames``.

    Every ``keepalive_seconds`` a keepalive comment is written (spec §4: at least that
    often, whatever else the stream carries); a write that has not gone out after as
    long ends the stream (a client that vanished without
    closing its connection, or that reads too slowly to follow). ``on_disconnect`` runs
    when the stream ends before its frames did: the client left, or was dropped.
    """

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[str], *, headers: dict[str, str],
                 keepalive_seconds: float,
                 on_disconnect: Callable[[], Awaitable[None]] | None = None,
                 status_code: int = 200) -> None:  # FastAPI reads its default
        super().__init__(frames, status_code, headers={
            "Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no",
            **headers})
        self.frames = frames
        self.keepalive = keepalive_seconds
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code,
                 "headers": self.raw_headers}
        task = asyncio.current_task()
        assert task is not None
        watch = _Watch(task, send, self.keepalive,
                       (scope.get("extensions") or {}).get(ABORT))
        listener = asyncio.create_task(_listen(receive, watch))
        completed = False
        try:
            await watch.send(start)
            async for chunk in self.frames:
                await watch.send({"type": "http.response.body", "body": chunk.encode(),
                                  "more_body": True})
            await watch.send({"type": "http.response.body", "body": b"", "more_body": False})
            completed = True
        except asyncio.CancelledError:
            if watch.ended is None or task.uncancel() > 0:
                raise  # cancelled from outside (the server's shutdown): not ours to end
        except _Gone:
            pass
        except StoreUnavailable as exc:
            # The response has started: no status can say it. Dropping the connection
            # (not ending the body) tells the client that what it got is not the whole.
            log.warning("dropped an SSE stream: %s", exc.message)
            if watch.abort is not None:
                watch.abort()
            else:
                raise
        finally:
            watch.stop()  # before any await: nothing cancels this task from here on
            listener.cancel()
            await _close(self.frames)
            if not completed and self.on_disconnect is not None:
                await _quietly(self.on_disconnect)
        if watch.ended == "stalled":
            log.info("dropped an SSE client: nothing it was sent went out for %.0f s",
                     self.keepalive)


class _Watch:
    """The one timer of a stream. It fires about once per keepalive interval, whatever
    the stream's pace: each write only notes when it began, which the timer reads."""

    __slots__ = ("_handle", "_ping", "abort", "active", "ended", "interval", "loop",
                 "pinged_at", "send_", "sending", "task")

    def __init__(self, task: asyncio.Task[Any], send: Send, interval: float,
                 abort: Callable[[], None] | None) -> None:
        self.task = task
        self.abort = abort  # closes the connection (``outlast serve``'s protocol offers it)
        self.send_ = send
        self.interval = interval
        self.loop = asyncio.get_running_loop()
        self.sending: float | None = None  # when the write in progress began
        self.pinged_at = self.loop.time()
        self.ended: str | None = None  # "left" or "stalled" once this ends the stream
        self.active = True  # the stream's task is inside its writes, where a cancel lands
        self._ping: asyncio.Task[None] | None = None
        self._handle = self.loop.call_at(self.pinged_at + interval, self._fire)

    async def send(self, message: dict[str, Any]) -> None:
        self.sending = self.loop.time()
        try:
            await self.send_(message)
        except OSError as exc:
            # ASGI 2.4: a server may refuse a write to a client that left (uvicorn
            # drops it silently and tells the listener instead).
            raise _Gone from exc
        self.sending = None

    async def keepalive(self) -> None:
        try:
            await self.send({"type": "http.response.body", "body": KEEPALIVE,
                             "more_body": True})
        except _Gone:
            self.end("left")

    def end(self, why: str) -> None:
        """End the stream (from the listener or the timer). Both run only while the
        stream's task is suspended, so its cancel lands inside the writes' ``try``."""
        if self.ended is None and self.active:
            self.ended = why
            self.task.cancel()

    def stop(self) -> None:
        self.active = False
        self._handle.cancel()
        if self._ping is not None:
            self._ping.cancel()

    def _fire(self) -> None:
        now = self.loop.time()
        since = self.sending
        if since is not None:
            if now - since >= self.interval:
                if self.abort is not None:
                    # The write cannot finish: drop the connection, so that the server
                    # counts the response as ended by the client, not left incomplete.
                    # First, so that the server learns of it before the stream ends.
                    self.abort()
                self.end("stalled")
                return
            due = since + self.interval  # the keepalive waits for the write
        else:
            if now - self.pinged_at >= self.interval:
                self.pinged_at = now
                self._ping = self.loop.create_task(self.keepalive())
            due = self.pinged_at + self.interval
        self._handle = self.loop.call_at(due, self._fire)


class _Gone(Exception):
    """A write the server refused because the client left."""


async def _listen(receive: Receive, watch: _Watch) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    watch.end("left")


async def _close(frames: AsyncIterator[str]) -> None:
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        await aclose()


async def _quietly(handler: Callable[[], Awaitable[None]]) -> None:
    try:
        await handler()
    except Exception:
        log.exception("on-disconnect handler failed")

