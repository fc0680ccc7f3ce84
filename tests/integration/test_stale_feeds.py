"""A reader whose process missed commits still reads the whole log, and never hangs.

A process's feed of a run can fall behind the log: another process executed the run and
its commit notices were lost (a partition between this process and the database). A
reader then must go by the run's record, not the feed: ``follow=false`` answers exactly
the stored log, a following stream reaches the final event. Here the feed is made stale
the way a lost notice leaves it: it holds the first events as its live edge while the
log, written through the engine, holds the whole run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from outlast.agent import Agent, RunContext
from outlast.config import Settings
from outlast.engine.admission import RunOptions
from outlast.engine.runtime import Engine
from outlast.http.streams import RunStream
from outlast.store.base import FINAL, RunRecord
from outlast.store.sqlite import SQLiteStore
from tests.support.server import parse_sse


class Talker(Agent):
    """Says a few messages, token by token."""

    async def run(self, ctx: RunContext) -> Any:
        for n in range(4):
            mid = ctx.new_id("msg")
            await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                            "role": "assistant"})
            for token in ("one ", "two ", "three"):
                await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                                "delta": f"{n}:{token}"})
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        return None


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    e = Engine(Settings(data_dir=tmp_path, lease_ttl=5.0), SQLiteStore(tmp_path / "o.db"),
               {"talker": Talker()})
    await e.start()
    try:
        yield e
    finally:
        await e.stop()


def body(thread_id: str, run_id: str) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {}}


async def finished(engine: Engine, thread_id: str, run_id: str) -> RunRecord:
    admitted = await engine.admit("alice", "talker", body(thread_id, run_id), RunOptions())
    async with asyncio.timeout(30):
        while True:
            run = await engine.store.get_run_by_rid(admitted.run.rid)
            assert run is not None
            if run.status in FINAL:
                return run
            await asyncio.sleep(0.02)


async def read(stream: RunStream, *, follow: bool) -> list[int]:
    """The ids of the stream's frames, read to its end within 20 s (a hang fails)."""
    chunks: list[str] = []
    async with asyncio.timeout(20):
        async for chunk in stream.frames(0, follow=follow):
            chunks.append(chunk)
    return [f.id for f in parse_sse("".join(chunks)) if f.id is not None]


@pytest.mark.parametrize("legacy", [False, True], ids=["frames", "legacy"])
@pytest.mark.parametrize("follow", [False, True], ids=["snapshot", "follow"])
async def test_a_feed_behind_the_log_sends_the_reader_to_the_log(
        engine: Engine, follow: bool, legacy: bool) -> None:
    name = f"{'f' if follow else 's'}{'l' if legacy else 'n'}"
    run = await finished(engine, f"t-{name}", f"r-{name}")
    assert run.status == "succeeded" and run.last_seq > 10
    logged = [e.seq for e in await engine.store.read_events(run.rid, 0, 1000)]
    assert logged == list(range(1, run.last_seq + 1))
    # This process's feed saw the first three events as the live edge, and nothing after.
    feed = engine.hub.acquire(run.rid)
    try:
        first = await engine.store.read_events(run.rid, 0, 3)
        feed.advance(first, 3, False)
        record = await engine.run("alice", run.id)
        seen = await read(RunStream(engine, record, legacy=legacy), follow=follow)
        assert seen == logged  # exactly the stored log, never its first page as the whole
    finally:
        engine.hub.release(run.rid)


async def test_a_follower_of_a_stale_feed_of_a_running_run_reaches_its_end(
        engine: Engine) -> None:
    """A follower that starts while the feed is stale and the record is not yet final
    (it was read before the end) goes to the log at the hub's next sweep, and ends."""
    run = await finished(engine, "t-live", "r-live")
    feed = engine.hub.acquire(run.rid)
    try:
        feed.advance(await engine.store.read_events(run.rid, 0, 2), 2, False)
        # A record read while the run still ran: last_seq 2, status running.
        stale = replace(run, status="running", last_seq=2)
        seen = await read(RunStream(engine, stale, legacy=False), follow=True)
        assert seen == list(range(1, run.last_seq + 1))
        # The reader told the feed what the log holds: its other readers go there too.
        assert feed.final and feed.last_seq == run.last_seq
    finally:
        engine.hub.release(run.rid)
