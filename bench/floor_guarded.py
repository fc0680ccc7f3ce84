"""The floor with the guarantees: the least a server does per event that checks, folds,
snapshots and indexes what agents emit as outlast does, written as plainly as it can be.

``POST /bench/floor-guarded/{name}`` is the floor's route (``bench.floor``: the bare
path, the hand-over, a SQLite commit per batch, a wake-up per commit) plus, per event,
what outlast's guarantees need of it, done with outlast's own protocol code and
statements but none of its machinery (no execution, writer, hub or store):

- G11: each event checked (``verify.check_schema``, ``check_order``), except a content
  delta continuing an open construct (``delta_key``, ``continues``), as outlast checks;
- the fold (``ThreadFold``), as the stock client folds them: what G11's order checks,
  the boundaries and the snapshots read;
- G5: at the first opener after a boundary, the messages the fold changed since the
  last save encoded and upserted with the commit's events (the store's
  ``messages_upsert_batch``), and the snapshot's coordinates and state (when it
  changed) written with them;
- spec §4: every construct opened or closed indexed with its event (``construct_row``;
  the store's ``constructs_open_batch``, a construct closed in the commit that opened
  it written closed, ``constructs_close_batch`` for the rest, as ``sqlwrite`` does);
- the boundary flag of each event, and the log's index of boundaries.

- G10: a run whose queued events pass its share of the backlog waits for the next
  commit to take them (``writer.backlog_share``, as outlast's writer bounds them);
  without it, an agent in bursts outruns the commits and they grow without bound.

Not here: fencing and leases, the runs' and threads' records, the state index, usage,
hooks, limits, the hub's feeds. What ``outlast serve`` spends above this route is its
own machinery: what a change to the write path can still take away.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI

from bench.floor import SCHEMA, FloorContext, FloorWriter, add_floor
from outlast.agent import Agent
from outlast.engine.runtime import Engine
from outlast.engine.writer import backlog_share
from outlast.protocol.constructs import OPENERS, construct_row
from outlast.protocol.events import now_ms
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps
from outlast.protocol.verify import check_order, check_schema, delta_key
from outlast.store.sql import load_queries
from outlast.store.sqlwrite import construct_rows

# The construct index and the boundaries' index as the store's migration makes them
# (their runs' table is not here: no foreign keys), then the snapshots' messages.
_INDEXES = resources.files("outlast.store.sql").joinpath("sqlite", "0003_constructs.sql") \
    .read_text("utf-8").replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ") \
    .replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ")
GUARDED_SCHEMA = "PRAGMA foreign_keys=OFF;" + SCHEMA + _INDEXES + """
CREATE TABLE IF NOT EXISTS messages (
    tid       INTEGER NOT NULL,
    id        TEXT    NOT NULL,
    position  REAL    NOT NULL,
    body      TEXT    NOT NULL,
    PRIMARY KEY (tid, id)
);
CREATE INDEX IF NOT EXISTS messages_order ON messages (tid, position);
CREATE TABLE IF NOT EXISTS snapshots (
    tid       INTEGER PRIMARY KEY,
    state     TEXT,
    as_of_seq INTEGER NOT NULL
);
"""
SNAPSHOT = "INSERT INTO snapshots (tid, state, as_of_seq) VALUES (?, ?, ?) " \
           "ON CONFLICT (tid) DO UPDATE SET state = COALESCE(excluded.state, snapshots.state), " \
           "as_of_seq = excluded.as_of_seq"
_QUERIES = load_queries("sqlite")
OPEN, CLOSE, MESSAGES = (_QUERIES[name].sql for name in (
    "constructs_open_batch", "constructs_close_batch", "messages_upsert_batch"))


class GuardedContext(FloorContext):
    """The floor's context, each event checked, folded, indexed and snapshotted first."""

    def __init__(self, body: dict[str, Any], writer: FloorWriter, rid: int) -> None:
        super().__init__(body, writer, rid)
        self.fold = ThreadFold()
        self.fold.construct_changes = []
        self.constructs: list[tuple[int, int, str, str | None]] = []
        self.messages_out: list[tuple[int, str, float, str]] = []
        self.positions: dict[str, float] = {}
        self.boundary = False  # the fold is at a boundary not saved yet
        self.saved: tuple[int, str | None, int] | None = None  # (tid, state, as of seq)
        self.room = asyncio.Event()  # set when a commit takes the queued events

    async def emit(self, event: dict[str, Any]) -> None:
        """An agent's event: checked (G11), then appended; waits while this run holds
        more than its share of the backlog (G10)."""
        self.append(dict(event), checked=True)
        while len(self.uncommitted) > backlog_share(self.writer.writing()):
            self.room.clear()
            await self.room.wait()

    def push(self, data: dict[str, Any]) -> None:
        """The route's own events (``RUN_STARTED``, ``RUN_FINISHED``): not the agent's,
        so not checked, as the engine's own are not."""
        self.append(data, checked=False)

    def append(self, data: dict[str, Any], *, checked: bool) -> None:
        fold = self.fold
        key = delta_key(data)  # before the timestamp: the delta's usual three keys
        if "timestamp" not in data:
            data["timestamp"] = now_ms()
        if key is not None and fold.continues(key):  # inside an open construct
            body = dumps(data)
            fold.apply_delta(data)
            self.seq += 1
            self.uncommitted.append((self.rid, self.seq, 0, body))
            self.writer.mark(self)
            return
        if checked:
            check_schema(data)
            check_order(data, fold)
        if self.boundary and data["type"] in OPENERS:
            self._save()
        body = dumps(data)
        fold.apply(data)
        self.seq += 1
        self.boundary = fold.at_boundary
        changes = fold.construct_changes
        if changes:
            self.constructs.extend((self.seq, i, *construct_row(k, c))
                                   for i, (k, c) in enumerate(changes))
            changes.clear()
        if data["type"] == "RUN_FINISHED":
            self._save()  # the run's last snapshot, as of its end
        self.uncommitted.append((self.rid, self.seq, 1 if self.boundary else 0, body))
        self.writer.mark(self)

    def _save(self) -> None:
        """The boundary's snapshot: what the fold changed since the last save."""
        self.boundary = False
        changes = self.fold.take_changes()
        for index, message in changes.upserts:
            position = self.positions.setdefault(message["id"], float(index + 1))
            self.messages_out.append((self.rid, message["id"], position, dumps(message)))
        state = dumps(self.fold.state) if changes.state_changed else None
        if self.saved is not None and state is None:
            state = self.saved[1]  # the commit's snapshot keeps its latest state
        self.saved = (self.rid, state, self.seq)

    def take_extra(self) -> dict[str, list[Any]]:
        self.room.set()  # the events are taken: the agent may queue more
        extra: dict[str, list[Any]] = {}
        if self.constructs:
            opened, closed = construct_rows([SimpleNamespace(rid=self.rid,
                                                             constructs=self.constructs)])
            self.constructs = []
            if opened:
                extra[OPEN] = opened
            if closed:
                extra[CLOSE] = closed
        if self.messages_out:
            # One row per message a commit: the last save's, as the writer merges them.
            extra[MESSAGES] = list({row[1]: row for row in self.messages_out}.values())
            self.messages_out = []
        if self.saved is not None:
            extra[SNAPSHOT] = [self.saved]
            self.saved = None
        return extra


def add_floor_guarded(app: FastAPI, engine: Engine, agents: dict[str, Agent], path: Path,
                      synchronous: str) -> None:
    """``POST /bench/floor-guarded/{name}``, its SQLite file at ``path``."""
    add_floor(app, engine, agents, path, synchronous, route="/bench/floor-guarded",
              context=GuardedContext, schema=GUARDED_SCHEMA)
