"""The SSE response's side of the ASGI contract, against a scripted server: what it
writes between frames, and how it ends when the client leaves, stops reading, or the server
refuses a write. (The same behaviours over a real uvicorn and real sockets are in
``tests/integration/test_disconnect_policy.py``.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from outlast.http.frames import KEEPALIVE
from outlast.http.server import ABORT
from outlast.http.sse import EventStream

INTERVAL = 0.05


@dataclass
class Peer:
    """The server and client of one response: records writes; ``block_at`` makes that
    write hang, ``refuse_at`` makes it raise OSError (ASGI 2.4), ``leave_after`` sends
    ``http.disconnect`` after that many seconds."""

    block_at: int | None = None
    refuse_at: int | None = None
    leave_after: float | None = None
    sent: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # the loop's clock at each write
    aborted: bool = False

    async def send(self, message: dict[str, Any]) -> None:
        index = len(self.sent)
        if index == self.refuse_at:
            raise OSError("the client left")
        if index == self.block_at:
            await asyncio.Event().wait()  # a write that never goes out
        self.sent.append(message)
        self.times.append(asyncio.get_running_loop().time())

    async def receive(self) -> dict[str, Any]:
        if self.leave_after is None:
            await asyncio.Event().wait()
        await asyncio.sleep(self.leave_after or 0)
        return {"type": "http.disconnect"}

    def abort(self) -> None:
        self.aborted = True

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]

    def timed_bodies(self) -> list[tuple[float, bytes]]:
        return [(t, m["body"]) for t, m in zip(self.times, self.sent, strict=True)
                if m["type"] == "http.response.body"]


@dataclass
class Source:
    """Frames with pauses between them; records whether it was closed."""

    script: list[str | float]
    closed: bool = False

    async def frames(self) -> AsyncIterator[str]:
        try:
            for step in self.script:
                if isinstance(step, float):
                    await asyncio.sleep(step)
                else:
                    yield step
        finally:
            self.closed = True


async def serve(peer: Peer, source: Source) -> list[str]:
    gone: list[str] = []

    async def on_disconnect() -> None:
        gone.append("gone")

    response = EventStream(source.frames(), headers={}, keepalive_seconds=INTERVAL,
                           on_disconnect=on_disconnect)
    scope = {"type": "http", "method": "POST", "extensions": {ABORT: peer.abort}}
    await asyncio.wait_for(response(scope, peer.receive, peer.send), 5)
    return gone


async def test_a_finished_stream_ends_its_response_and_calls_no_handler() -> None:
    peer, source = Peer(), Source(["a\n\n", "b\n\n"])
    assert await serve(peer, source) == []
    assert peer.sent[0]["type"] == "http.response.start"
    assert peer.bodies() == [b"a\n\n", b"b\n\n", b""]
    assert peer.sent[-1]["more_body"] is False and source.closed


async def test_a_keepalive_goes_out_every_interval_busy_or_quiet() -> None:
    # spec §4: at least every interval, whatever else the stream carries.
    # Counted against the time each part really took (on a loaded machine the pauses
    # and the keepalive's timer both run late): never more often than every interval,
    # and at least one per two intervals, while frames go out five times an interval.
    busy = [x for _ in range(20) for x in ("x\n\n", INTERVAL / 5)]  # 4 intervals
    peer, source = Peer(), Source(["a\n\n", *busy, INTERVAL * 4.5, "b\n\n"])
    await serve(peer, source)
    timed = peer.timed_bodies()
    bodies = [body for _, body in timed]
    last_busy = len(bodies) - 1 - bodies[::-1].index(b"x\n\n")
    end = bodies.index(b"b\n\n")
    busy_part, quiet = bodies[:last_busy + 1], bodies[last_busy + 1:end]
    assert busy_part.count(b"x\n\n") == 20
    assert set(quiet) == {KEEPALIVE}, quiet
    for part, began, ended in ((busy_part, timed[0][0], timed[last_busy][0]),
                               (quiet, timed[last_busy][0], timed[end][0])):
        intervals = (ended - began) / INTERVAL
        assert intervals / 2 - 1 <= part.count(KEEPALIVE) <= intervals + 1, (
            part.count(KEEPALIVE), intervals)


async def test_a_client_that_leaves_ends_the_stream_and_runs_the_handler() -> None:
    peer, source = Peer(leave_after=INTERVAL), Source(["a\n\n", 60.0, "never\n\n"])
    assert await serve(peer, source) == ["gone"]
    assert b"never\n\n" not in peer.bodies() and source.closed
    assert not peer.aborted


async def test_a_stuck_write_aborts_the_connection_and_ends_the_stream() -> None:
    peer, source = Peer(block_at=2), Source(["a\n\n", "stuck\n\n", "b\n\n"])
    assert await serve(peer, source) == ["gone"]
    assert peer.aborted and source.closed
    assert peer.bodies() == [b"a\n\n"]


async def test_a_write_the_server_refuses_ends_the_stream_as_a_disconnect() -> None:
    peer, source = Peer(refuse_at=2), Source(["a\n\n", "b\n\n", "c\n\n"])
    assert await serve(peer, source) == ["gone"]  # returned: no error for the server
    assert peer.bodies() == [b"a\n\n"] and source.closed and not peer.aborted


async def test_a_refused_keepalive_ends_a_quiet_stream() -> None:
    peer, source = Peer(refuse_at=2), Source(["a\n\n", 60.0, "never\n\n"])
    assert await serve(peer, source) == ["gone"]
    assert peer.bodies() == [b"a\n\n"] and source.closed and not peer.aborted


async def test_a_store_outage_after_the_start_drops_the_connection_not_a_short_body() -> None:
    """Once the status is sent no 503 can say it: the connection is aborted, so the
    client sees an incomplete body, never a complete one that is short."""
    from outlast.errors import StoreUnavailable

    async def frames() -> AsyncIterator[str]:
        yield "a\n\n"
        raise StoreUnavailable("the store is out of reach")

    peer = Peer()
    response = EventStream(frames(), headers={}, keepalive_seconds=INTERVAL)
    scope = {"type": "http", "method": "GET", "extensions": {ABORT: peer.abort}}
    await asyncio.wait_for(response(scope, peer.receive, peer.send), 5)
    assert peer.aborted
    assert peer.bodies() == [b"a\n\n"]  # no final empty body: the response is not complete
