"""Leases end cleanly (SIGTERM) or are taken away (fencing): either way one process
writes a run at a time and nothing it wrote is lost or changed (G2, G8, G9).

The clean-shutdown test runs on SQLite; the fencing test needs two processes on one
store, which only PostgreSQL allows (the SQLite data-directory lock refuses a second
process), so it uses the throwaway cluster of ``tests/support/postgres.py``.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.runs import run_record, steps_run, stored_log, uid, wait_final
from tests.support.server import Frame, ServerProcess, demo_input, sse_frames, wait_for


@dataclass
class Watcher:
    """A stream read in the background until the server goes away."""

    frames: list[Frame] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def start(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Watcher:
        self.task = asyncio.create_task(self._read(c, method, url, **kwargs))
        return self

    async def _read(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> None:
        try:
            async with c.stream(method, url, **kwargs) as resp:
                assert resp.status_code == 200
                self.opened.set()
                async for f in sse_frames(resp):
                    self.frames.append(f)
                    self.times.append(time.monotonic())
        except httpx.HTTPError:
            pass
        finally:
            self.opened.set()

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task


def sqlite_row(data_dir: Path, sql: str, *params: Any) -> tuple[Any, ...] | None:
    """One row straight from the store's SQLite file (read-only)."""
    db = sqlite3.connect(f"file:{data_dir / 'outlast.db'}?mode=ro", uri=True)
    try:
        row = db.execute(sql, params).fetchone()
    finally:
        db.close()
    return None if row is None else tuple(row)


def check_log(log: list[Frame], seen: list[Frame], last_seq: int) -> None:
    """Contiguous seq, and every event a client saw is in the log unchanged (G2)."""
    assert [f.id for f in log] == list(range(1, last_seq + 1))
    for f in seen:
        if f.id is not None:
            assert log[f.id - 1].event == f.event, f.id


async def test_sigterm_stops_at_a_boundary_and_the_restart_resumes_at_once(
        server_factory: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    # A TTL far longer than the test: resuming at once proves the lease was released.
    args = ("--keepalive", "2", "--lease-ttl", "30")
    server: ServerProcess = server_factory(*args, data_dir=data_dir)
    thread_id, run_id = uid("t"), uid("r")
    async with server.client() as c:
        watcher = Watcher().start(c, "POST", "/agents/demo", json=demo_input(
            thread_id, run_id, steps=4, step_delay_ms=600, token_delay_ms=10))
        await watcher.opened.wait()

        async def in_step_two() -> bool:
            row = sqlite_row(data_dir, "SELECT e.status FROM effects e JOIN runs r "
                             "ON r.rid = e.rid WHERE r.id = ? AND e.key = 'step-2'", run_id)
            return row == ("started",)

        await wait_for(in_step_two)
        began = time.monotonic()
        code = server.stop()  # SIGTERM, then wait for the exit
        stopped_in = time.monotonic() - began
        await watcher.close()
    assert code in (0, -signal.SIGTERM), "\n".join(server.log)
    assert stopped_in < 10, stopped_in  # the drain waits for the tool, not for a timeout

    # The tool that was running finished, the run stopped at the boundary after it and
    # gave its lease up: no holder, and the attempt does not count as a crash.
    status, holder, attempts, last_seq = sqlite_row(
        data_dir, "SELECT status, lease_holder, attempts, last_seq FROM runs "
        "JOIN run_seqs USING (rid) WHERE id = ?",
        run_id) or ()
    assert (status, holder, attempts) == ("running", None, 0)
    assert sqlite_row(data_dir, "SELECT e.status FROM effects e JOIN runs r ON r.rid = e.rid "
                      "WHERE r.id = ? AND e.key = 'step-2'", run_id) == ("completed",)
    assert sqlite_row(data_dir, "SELECT e.boundary FROM events e JOIN runs r ON r.rid = e.rid "
                      "WHERE r.id = ? AND e.seq = ?", run_id, last_seq) == (1,)

    restarted = time.monotonic()
    server = server_factory(*args, data_dir=data_dir)
    async with server.client() as c:
        follower = Watcher().start(c, "GET", f"/runs/{run_id}/events",
                                   params={"after": str(last_seq)})
        await wait_for(lambda: _has_new(follower, last_seq))
        first_new = next(t for f, t in zip(follower.frames, follower.times, strict=True)
                         if f.id is not None and f.id > last_seq)
        resumed_in = first_new - restarted
        print(f"SIGTERM drain took {stopped_in:.2f} s; the restarted process wrote the run's "
              f"next event {resumed_in:.2f} s after it was started")
        assert resumed_in < 10, resumed_in  # far below the 30 s TTL

        record = await wait_final(c, run_id)
        await follower.close()
        assert record["status"] == "succeeded" and record["attempts"] == 1
        log = await stored_log(c, run_id)
        check_log(log, watcher.frames + follower.frames, record["lastSeq"])
        [resumed] = [f for f in log if f.event.get("name") == "outlast.resumed"]
        # Nothing was left open: the resumed marker follows the drained attempt's last event.
        assert resumed.event["value"]["resumedFromSeq"] == last_seq == resumed.id - 1  # type: ignore[operator]
        assert steps_run(server.effects_log, run_id) == {1: 1, 2: 1, 3: 1, 4: 1}
        thread = (await c.get(f"/threads/{thread_id}")).json()
        fold = ThreadFold()
        for f in log:
            fold.apply(f.event)
        assert fold.messages == thread["messages"]
        assert all(m.get("content") for m in thread["messages"])  # no cut-off message
        tool_results = [m for m in thread["messages"] if m["role"] == "tool"]
        assert not [m for m in tool_results if "interrupted" in m["content"]]
        assert thread["status"] == "idle"


async def _has_new(w: Watcher, after: int) -> bool:
    return any(f.id is not None and f.id > after for f in w.frames)


@pytest.mark.postgres
async def test_a_stale_process_cannot_append_after_its_lease_was_taken_over(
        server_factory: Any, pg_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    args = ("--store", pg_url, "--demo-workspace", str(workspace), "--lease-ttl", "1",
            "--keepalive", "2")
    a: ServerProcess = server_factory(*args)
    thread_id, run_id = uid("t"), uid("r")
    effects_log = workspace / "effects.log"
    async with a.client() as ca:
        # Slow tokens: A spends its time streaming text, outside any tool.
        watcher = Watcher().start(ca, "POST", "/agents/demo", json=demo_input(
            thread_id, run_id, steps=2, step_delay_ms=50, tokens_per_message=8,
            token_delay_ms=100))

        async def streaming_step_two() -> Frame | None:
            for f in watcher.frames:
                if f.event["type"] == "TEXT_MESSAGE_CONTENT" and "2:" in f.event["delta"]:
                    return f
            return None

        mid = await wait_for(streaming_step_two)
        a.signal(signal.SIGSTOP)  # A still believes it holds the lease
        try:
            b: ServerProcess = server_factory(*args)
            async with b.client() as cb:
                async def taken_over() -> bool:
                    return bool((await run_record(cb, run_id))["attempts"] >= 2)

                await wait_for(taken_over)
                a.signal(signal.SIGCONT)
                record = await wait_final(cb, run_id)
                assert record["status"] == "succeeded" and record["attempts"] == 2

                # A woke up mid-message, tried to go on, and was fenced off.
                async def a_noticed() -> bool:
                    return any("lease lost" in line for line in a.log)

                await wait_for(a_noticed)
                await asyncio.sleep(1.0)  # time for any stray write of A to land
                final = await run_record(cb, run_id)
                assert (final["status"], final["lastSeq"]) == ("succeeded", record["lastSeq"])
                log = await stored_log(cb, run_id)
                check_log(log, watcher.frames, record["lastSeq"])
                [resumed] = [f for f in log if f.event.get("name") == "outlast.resumed"]
                assert resumed.event["value"]["attempt"] == 2
                # After the takeover nothing more of A's message: B closed it, and only B's
                # events follow.
                message_id = mid.event["messageId"]
                after = [f.event for f in log if f.id > resumed.id  # type: ignore[operator]
                         and f.event.get("messageId") == message_id]
                assert after == []
                before = [f.event for f in log if f.id < resumed.id  # type: ignore[operator]
                          and f.event.get("messageId") == message_id]
                assert before[-1]["type"] == "TEXT_MESSAGE_END"  # the resume closed it
                assert steps_run(effects_log, run_id) == {1: 1, 2: 1}
                thread = (await cb.get(f"/threads/{thread_id}")).json()
                assert thread["status"] == "idle" and thread["activeRun"] is None
        finally:
            a.signal(signal.SIGCONT)
        await watcher.close()
