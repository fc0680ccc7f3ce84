"""The group commit's statements, written once and driven by each backend (G2, G8).

``write_steps`` is a generator that says which named statement to run next and is
sent each result back (sans I/O). The SQL store drives it over its async connection;
SQLite drives it inside the writer's thread in one trip, because on a busy event loop
every ``await`` of a commit waits a whole loop iteration, and a commit that awaited
each statement took tens of milliseconds under many runs.

Each kind of row is one statement for the whole commit, its rows passed as one JSON
array, never a statement per run or per row: at a model's pace a commit holds a few
events from each of many runs, and SQLite gives up and retakes the interpreter lock
for every row an ``executemany`` steps (a wait of its own while the loop is busy).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from outlast.protocol.jsonutil import dumps
from outlast.store.records import RunWrite, WebhookWrite
from outlast.store.sqlconn import Conn


@dataclass(frozen=True, slots=True)
class Step:
    """One named statement: ``many`` runs it per row of ``rows``; ``column`` returns the
    first column of its rows; ``run`` its changed-row count."""

    kind: Literal["many", "column", "run"]
    name: str
    params: Mapping[str, Any] | None = None
    rows: Sequence[Mapping[str, Any]] = ()


Steps = Generator[Step, Any, set[int]]


def webhook_rows(rid: int, webhooks: Sequence[WebhookWrite], now: float) -> list[dict[str, Any]]:
    """The outbox rows of a run's webhooks."""
    return [{"rid": rid, "id": h.id, "url": h.url, "type": h.type, "body": h.body,
             "now": now, "expires_at": h.expires_at} for h in webhooks]


def write_steps(batch: list[RunWrite], now: float) -> Steps:
    """The statements of one commit; returns the rids fenced off (written nothing)."""
    # G2/G8 fencing: only the lease holder of an attempt whose view of last_seq is
    # current moves it; the others write nothing.
    passed = set((yield Step("column", "runs_fence_append", {"batch": dumps([
        [w.rid, w.instance, w.attempt, w.prev_seq, w.events[-1][0] if w.events else w.prev_seq]
        for w in batch
    ])})))
    live = [w for w in batch if w.rid in passed]
    events = [[w.rid, s, 1 if b else 0, body] for w in live for s, b, body in w.events]
    if events:
        yield Step("run", "events_insert_batch", {"rows": dumps(events)})
    opened = [[w.rid, seq, o, k, b] for w in live for seq, o, k, b in w.constructs
              if b is not None]
    if opened:
        yield Step("run", "constructs_open_batch", {"rows": dumps(opened)})
    closed = [[w.rid, seq, k] for w in live for seq, _, k, b in w.constructs if b is None]
    if closed:
        yield Step("run", "constructs_close_batch", {"rows": dumps(closed)})
    snapshots = [w for w in live if w.snapshot is not None]
    if len({w.tid for w in snapshots}) == len(snapshots):
        yield from _snapshot_steps(snapshots, now)
    else:  # one thread's snapshots in one commit: each applied whole, in order
        for w in snapshots:
            yield from _snapshot_steps([w], now)
    for w in live:
        if w.finish is not None:
            yield from _finish_steps(w, now)
    return {w.rid for w in batch} - passed


def _snapshot_steps(writes: list[RunWrite], now: float) -> Generator[Step, Any, None]:
    """The boundary snapshots of a commit, at most one per thread."""
    snaps = [(w.tid, w.snapshot) for w in writes if w.snapshot is not None]
    deletes = [[tid, i] for tid, s in snaps for i in s.deletes]
    if deletes:
        yield Step("run", "messages_delete_batch", {"rows": dumps(deletes)})
    upserts = [[tid, i, p, body] for tid, s in snaps for i, p, body in s.upserts]
    if upserts:
        yield Step("run", "messages_upsert_batch", {"rows": dumps(upserts)})
    if snaps:
        yield Step("run", "threads_snapshot_batch", {"now": now, "rows": dumps([
            [tid, s.state_json, s.session_state_json, s.as_of_run, s.as_of_seq]
            for tid, s in snaps])})


def _finish_steps(w: RunWrite, now: float) -> Generator[Step, Any, None]:
    f = w.finish
    assert f is not None
    if f.interrupts:
        yield Step("many", "interrupt_insert", rows=[
            {"tid": w.tid, "id": i, "rid": w.rid, "run_id": w.run_id, "body": body,
             "expires_ts": exp}
            for i, body, exp in f.interrupts])
    yield Step("run", "run_finish", {
        "rid": w.rid, "status": f.status,
        "outcome": None if f.outcome is None else dumps(f.outcome),
        "error": None if f.error is None else dumps(f.error), "now": now})
    # G12: the notification is owed exactly when the end commits.
    if f.webhooks:
        yield Step("many", "webhook_insert", rows=webhook_rows(w.rid, f.webhooks, now))
    yield Step("run", "thread_refresh_status", {"tid": w.tid, "now": now})


async def drive(steps: Steps, c: Conn) -> set[int]:
    """Run ``steps`` over an async connection, one await per statement."""
    result: Any = None
    while True:
        try:
            step = steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if step.kind == "many":
            await c.many(step.name, step.rows)
            result = None
        elif step.kind == "column":
            result = await c.column(step.name, **(step.params or {}))
        else:
            result = await c.run(step.name, **(step.params or {}))
