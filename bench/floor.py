"""The floor: the least a durable server with outlast's guarantees does per event.

``POST /bench/floor/{name}`` runs an agent as the bare route does (same agent, encoding
and SSE response) plus what no durable design can leave out:

- each event is handed to another task: the response does not write an event when the
  agent emits it but when it is committed (G2, "committed before shown");
- the events go into a real SQLite file in WAL mode, with the store's own PRAGMAs
  (``SQLiteStore._pragmas``), in the events table's shape (a rowid table with its
  ``(rid, seq)`` key), batched per commit as the writer batches them (one transaction
  for every run's pending events, at most one every ``COMMIT_INTERVAL``, the rows bound
  as ``VALUES`` rows by ``store.sqlrows``), in a thread;
- each watcher is woken once per commit that carried its run's events.

Nothing else: no fencing, no fold, no G11 checks, no snapshots, no construct or state
index, no hub. What ``outlast serve`` spends above this is the price of those (and of
its own overheads), which is what a change to the write path can shrink.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from outlast.agent import Agent
from outlast.engine.runtime import Engine
from outlast.engine.writer import COMMIT_INTERVAL
from outlast.http.frames import frame, retry_preamble
from outlast.http.request_limits import read_json
from outlast.http.request_models import parse_input
from outlast.http.sse import EventStream
from outlast.protocol.events import now_ms
from outlast.protocol.jsonutil import dumps
from outlast.store.sqlite import SQLiteStore
from outlast.store.sqlrows import chunks

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    rid       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    boundary  INTEGER NOT NULL DEFAULT 0,
    body      TEXT    NOT NULL,
    PRIMARY KEY (rid, seq)
);
"""
INSERT = "INSERT INTO events (rid, seq, boundary, body) VALUES (?, ?, ?, ?)"


class FloorContext:
    """``bench.server.BaselineContext``, but an emitted event waits for its commit:
    ``push`` queues it with the writer, which moves its frame to ``pending`` (what the
    response writes) once committed."""

    def __init__(self, body: dict[str, Any], writer: FloorWriter, rid: int) -> None:
        self.run_id = body["runId"]
        self.thread_id = body["threadId"]
        self.forwarded_props = body.get("forwardedProps")
        self.messages = body.get("messages") or []
        self.pending: list[str] = []
        self.seq = self.committed = 0
        self.done = False
        self.wake = asyncio.Event()
        self.writer = writer
        self.rid = rid
        self.uncommitted: list[tuple[int, int, int, str]] = []

    def take_extra(self) -> dict[str, list[Any]]:
        """Rows beside the events this commit takes, by statement, once the commit has
        taken the events (none here: ``bench.floor_guarded`` adds the guarantees' own)."""
        return {}

    def finished(self) -> bool:
        """The run ended and everything it emitted is committed and sent on."""
        return self.done and self.committed == self.seq

    async def emit(self, event: dict[str, Any]) -> None:
        self.push(dict(event))

    def push(self, data: dict[str, Any]) -> None:
        if "timestamp" not in data:
            data["timestamp"] = now_ms()
        self.seq += 1
        self.uncommitted.append((self.rid, self.seq, 0, dumps(data)))
        self.writer.mark(self)


class FloorWriter:
    """One task committing every run's pending events in one transaction, in a thread."""

    def __init__(self, path: Path, synchronous: str, schema: str = SCHEMA) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in SQLiteStore(path, synchronous=synchronous)._pragmas():
            self._db.execute(pragma)
        self._db.executescript(schema)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="floor-writer")
        self._dirty: dict[int, FloorContext] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rids = 0

    def writing(self) -> int:
        """How many runs have events queued for the next commit."""
        return len(self._dirty)

    def next_rid(self) -> int:
        self._rids += 1
        return self._rids

    def mark(self, ctx: FloorContext) -> None:
        self._dirty[ctx.rid] = ctx
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    def close(self) -> None:
        """Stop committing (what is queued stays uncommitted) and close the file."""
        if self._task is not None:
            self._task.cancel()
        self._pool.shutdown(wait=True)
        self._db.close()

    def _commit(self, rows: list[tuple[int, int, int, str]],
                extra: dict[str, list[Any]]) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        for sql, args in chunks(INSERT, rows):
            db.execute(sql, args)
        for statement, more in extra.items():
            for sql, args in chunks(statement, more):
                db.execute(sql, args)
        db.execute("COMMIT")

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        last_start = -COMMIT_INTERVAL
        while True:
            await self._wake.wait()
            self._wake.clear()
            due = last_start + COMMIT_INTERVAL - time.perf_counter()
            if due > 0:
                await asyncio.sleep(due)  # what arrives meanwhile joins this commit
                self._wake.clear()
            last_start = time.perf_counter()
            taken = list(self._dirty.values())
            self._dirty.clear()
            batches = []
            rows: list[tuple[int, int, int, str]] = []
            extra: dict[str, list[Any]] = {}
            for ctx in taken:
                batch, ctx.uncommitted = ctx.uncommitted, []
                batches.append(batch)
                rows.extend(batch)
                for statement, more in ctx.take_extra().items():
                    extra.setdefault(statement, []).extend(more)
            await loop.run_in_executor(self._pool, self._commit, rows, extra)
            for ctx, batch in zip(taken, batches, strict=True):
                ctx.pending.extend(frame(seq, body) for _, seq, _, body in batch)
                ctx.committed = batch[-1][1]
                ctx.wake.set()  # the watcher, once per commit


async def stream_frames(agent: Agent, ctx: Any) -> AsyncIterator[str]:
    """The agent's events as ``ctx`` makes them sendable (``ctx.pending``), drained whole
    per send, until ``ctx.finished()``: the no-store paths' one stream loop."""
    yield retry_preamble()
    ctx.push({"type": "RUN_STARTED", "threadId": ctx.thread_id, "runId": ctx.run_id,
              "protocolVersion": "1.0",
              "input": {"threadId": ctx.thread_id, "runId": ctx.run_id,
                        "messages": ctx.messages}})

    async def run() -> None:
        try:
            await agent.run(ctx)
            ctx.push({"type": "RUN_FINISHED", "threadId": ctx.thread_id, "runId": ctx.run_id})
        finally:
            ctx.done = True
            ctx.wake.set()

    task = asyncio.create_task(run())
    try:
        while True:
            if ctx.pending:
                chunk = "".join(ctx.pending)
                ctx.pending.clear()
                yield chunk
            elif ctx.finished():
                break
            else:
                await ctx.wake.wait()
                ctx.wake.clear()
        await task
    finally:
        task.cancel()


def add_floor(app: FastAPI, engine: Engine, agents: dict[str, Agent], path: Path,
              synchronous: str, *, route: str = "/bench/floor",
              context: type[FloorContext] = FloorContext, schema: str = SCHEMA) -> None:
    """``POST {route}/{name}``: the floor's route (or a variant's: its own context and
    tables), its SQLite file at ``path``."""
    writer = FloorWriter(path, synchronous, schema)

    @app.post(route + "/{name}", response_model=None)
    async def stream_floor(name: str, request: Request) -> EventStream:
        s = engine.settings
        body = parse_input(await read_json(request, s.max_body_bytes, s.body_timeout), s)
        ctx = context(body, writer, writer.next_rid())
        return EventStream(stream_frames(agents[name], ctx),
                           headers={"Outlast-Run-Id": body["runId"],
                                    "Outlast-Thread-Id": body["threadId"]},
                           keepalive_seconds=s.keepalive)
