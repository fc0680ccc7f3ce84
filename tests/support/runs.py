"""Helpers shared by the tests that drive runs over HTTP and check what the store kept.

Every helper reads through the public HTTP surface or, read-only, the server's SQLite
file and the demo agent's ``effects.log``; none of them changes what it looks at.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from outlast.protocol.fold import ThreadFold
from tests.support.server import Frame, ServerProcess, collect, sse_frames, wait_for

FINAL = ("succeeded", "failed", "cancelled", "interrupted")
# The store's data tables, for before/after row counts.
TABLES = ("threads", "runs", "events", "messages", "idempotency", "interrupts", "effects")


def uid(prefix: str) -> str:
    """A fresh id with a readable prefix."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def stream_into(client: httpx.AsyncClient, method: str, url: str, frames: list[Frame],
                      **kwargs: Any) -> httpx.Response:
    """Read an SSE response to its end, appending each frame as it arrives."""
    async with client.stream(method, url, **kwargs) as resp:
        async for frame in sse_frames(resp):
            frames.append(frame)
    return resp


async def run_record(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The run's record from ``GET /runs/{id}``; the run must exist."""
    resp = await client.get(f"/runs/{run_id}")
    assert resp.status_code == 200, resp.text
    record: dict[str, Any] = resp.json()
    return record


async def run_in_status(client: httpx.AsyncClient, run_id: str, *statuses: str,
                        timeout: float = 20, interval: float = 0.02) -> dict[str, Any]:
    """Poll until the run is in one of ``statuses`` (a run not admitted yet is waited for)."""
    async def reached() -> dict[str, Any] | None:
        resp = await client.get(f"/runs/{run_id}")
        if resp.status_code == 404:
            return None
        assert resp.status_code == 200, resp.text
        record: dict[str, Any] = resp.json()
        return record if record["status"] in statuses else None

    result: dict[str, Any] = await wait_for(reached, timeout=timeout, interval=interval)
    return result


async def wait_final(client: httpx.AsyncClient, run_id: str,
                     timeout: float = 30) -> dict[str, Any]:
    """Poll until the run is final and return its record."""
    return await run_in_status(client, run_id, *FINAL, timeout=timeout, interval=0.05)


def follow_final(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """Follow the run's event stream to its end; its final record."""
    resp = client.get(f"/runs/{run_id}/events")
    assert resp.status_code == 200, resp.text
    record: dict[str, Any] = client.get(f"/runs/{run_id}").json()
    assert record["status"] in FINAL, record
    return record


async def stored_log(client: httpx.AsyncClient, run_id: str) -> list[Frame]:
    """The run's whole stored event log, without following it."""
    resp, frames = await collect(client, "GET", f"/runs/{run_id}/events",
                                 params={"follow": "false"})
    assert resp.status_code == 200
    return frames


async def wait_streamed(client: httpx.AsyncClient, run_id: str, text: str) -> None:
    """Wait until the run's stored deltas hold ``text`` (a reply is under way: a kill now
    cuts it off)."""

    async def streamed() -> bool:
        log = await stored_log(client, run_id)
        return text in "".join(f.event.get("delta", "") for f in log)

    await wait_for(streamed)


def with_ids(frames: list[Frame]) -> list[tuple[int, dict[str, Any]]]:
    """The stored frames (those with a seq) as (seq, event) pairs."""
    return [(f.id, f.event) for f in frames if f.id is not None]


def fold_of(events: list[dict[str, Any]], start: ThreadFold | None = None) -> ThreadFold:
    """The thread as a client folds it from ``events`` (on top of a copy of ``start``)."""
    fold = start.copy() if start is not None else ThreadFold()
    for event in events:
        fold.apply(event)
    return fold


def one_result_per_call(messages: list[dict[str, Any]]) -> None:
    """Every tool call in the transcript has exactly one result (a resume never adds a second)."""
    calls = [call["id"] for m in messages for call in m.get("toolCalls") or ()]
    results = Counter(m["toolCallId"] for m in messages if m.get("role") == "tool")
    assert len(calls) == len(set(calls)), calls
    assert results == Counter(calls), (calls, results)


def row_counts(server: ServerProcess, *tables: str) -> dict[str, int]:
    """Rows per table (all of ``TABLES`` by default), read beside the running server."""
    db = sqlite3.connect(f"file:{server.data_dir / 'outlast.db'}?mode=ro", uri=True)
    try:
        return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in tables or TABLES}
    finally:
        db.close()


def effect_status(server: ServerProcess, run_id: str, key: str) -> str | None:
    """The effect journal entry, read straight from the store's SQLite file."""
    db = sqlite3.connect(f"file:{server.data_dir / 'outlast.db'}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT e.status FROM effects e JOIN runs r ON r.rid = e.rid "
                         "WHERE r.id = ? AND e.key = ?", (run_id, key)).fetchone()
    finally:
        db.close()
    return None if row is None else str(row[0])


def effect_counts(server: ServerProcess) -> Counter[tuple[str, int]]:
    """How many times each (run, step) tool ran, from the demo's effects.log."""
    counts: Counter[tuple[str, int]] = Counter()
    for line in server.effects():
        run_id, step, _ = line.split(" ")
        counts[(run_id, int(step))] += 1
    return counts


def steps_run(effects_log: Path, *run_ids: str) -> Counter[int]:
    """How many times each demo step's tool ran over the given runs, from ``effects_log``.

    The demo agent writes one ``<run_id> <step> <tool_call_id>`` line per executed tool
    (``ServerProcess.effects_log`` names the server's file); a missing file means none ran.
    """
    lines = effects_log.read_text().splitlines() if effects_log.exists() else []
    counts: Counter[int] = Counter()
    for line in lines:
        run_id, step, _ = line.split(" ")
        if run_id in run_ids:
            counts[int(step)] += 1
    return counts
