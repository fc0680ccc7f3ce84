"""The group commit's statements (G2, G8): one statement per kind of row for the whole
commit, its rows passed as one JSON array (on SQLite the rows of the fence, the events,
the construct and state indexes and the snapshots' messages are bound as they are,
``Conn.rows``), never a statement per run or per row.

At a model's pace a commit holds a few events from each of many runs. Each statement
awaited is a round trip (on SQLite a trip to a thread that, while the event loop is
busy, waits a loop iteration), and SQLite gives up and retakes the interpreter lock
for every row an ``executemany`` steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from outlast.protocol.events import now_ms, run_started
from outlast.protocol.jsonutil import clone_message, dumps
from outlast.protocol.message_index import unanswered_tool_calls
from outlast.store.records import (
    RunRecord,
    RunWrite,
    SnapshotWrite,
    StartInput,
    StoredEvent,
    WebhookWrite,
)
from outlast.store.sqlconn import Conn


async def insert_webhooks(c: Conn, rid: int, webhooks: Sequence[WebhookWrite],
                          now: float) -> None:
    """A run's webhooks into the outbox (G12: in the transaction that owes them)."""
    if webhooks:
        await c.many("webhook_insert", [
            {"rid": rid, "id": h.id, "url": h.url, "type": h.type, "body": h.body,
             "now": now, "expires_at": h.expires_at} for h in webhooks])


STATE_ROW_SPAN = 64
"""The most events one row of the state index spans: a reattach reads at most this many
events past the row to fold the state as of its cursor, and a run's state is written
out at most once per this many events (once per commit when its state events are
sparser)."""


def state_rows(w: RunWrite) -> list[list[Any]]:
    """The state index rows of a write: ``[rid, seq, upto, state before seq]``, a new
    row wherever the next state event lies more than ``STATE_ROW_SPAN`` events past
    the current row's first."""
    rows: list[list[Any]] = []
    for seq, before in w.states:
        if rows and seq - rows[-1][1] <= STATE_ROW_SPAN:
            rows[-1][2] = seq
        else:
            rows.append([w.rid, seq, seq, before])
    for row in rows:
        row[3] = dumps(row[3])
    return rows


def construct_rows(live: list[RunWrite]) -> tuple[list[list[Any]], list[list[Any]]]:
    """The construct index's rows of a commit: those it opened, ``[rid, seq, ord, ckey,
    body, closed_seq]`` each, where a construct the same commit also closed is written
    closed (most are, when an agent emits in bursts: no update, no entry in the index of
    open constructs); and the closes of constructs opened before, ``[rid, seq, ckey]``."""
    opened: list[list[Any]] = []
    closed: list[list[Any]] = []
    for w in live:
        open_here: dict[str, list[Any]] = {}  # ckey -> its row opened in this commit
        for seq, o, k, b in w.constructs:
            if b is not None:
                row: list[Any] = [w.rid, seq, o, k, b, None]
                open_here[k] = row
                opened.append(row)
            elif k in open_here:
                open_here.pop(k)[5] = seq  # the first close of its key after it opened
            else:
                closed.append([w.rid, seq, k])
    return opened, closed


async def write_batch(c: Conn, batch: list[RunWrite], now: float,
                      known: set[tuple[int, str, int]] | None = None) -> set[int]:
    """Write one commit; returns the rids fenced off (written nothing). ``known``: the
    (rid, instance, attempt) whose lease is known held (``SqlStore._known_leases``),
    updated with what this commit finds."""
    passed = await _fence(c, batch, known)
    live = [w for w in batch if w.rid in passed]
    events = [(w.rid, s, 1 if b else 0, body) for w in live for s, b, body in w.events]
    if events:
        await c.rows("events_insert_batch", events)
    opened, closed = construct_rows(live)
    if opened:
        await c.rows("constructs_open_batch", opened)
    if closed:
        await c.rows("constructs_close_batch", closed)
    states = [row for w in live for row in state_rows(w)]
    if states:
        await c.rows("run_states_insert_batch", states)
    usage = [[w.rid, w.attempt, at, u.provider, u.model, u.input_tokens, u.output_tokens,
              u.total_tokens, u.reasoning_tokens, u.cached_tokens]
             for w in live for at, u in w.usage]
    if usage:
        await c.run("usage_insert_batch", rows=dumps(usage))
    snapshots = [w for w in live if w.snapshot is not None]
    if len({w.tid for w in snapshots}) == len(snapshots):
        await _write_snapshots(c, snapshots, now)
    else:  # one thread's snapshots in one commit: each applied whole, in order
        for w in snapshots:
            await _write_snapshots(c, [w], now)
    for w in live:
        if w.finish is not None:
            await _write_finish(c, w, now)
            if known is not None:
                known.discard((w.rid, w.instance, w.attempt))  # no longer running
    return {w.rid for w in batch} - passed


async def _fence(c: Conn, batch: list[RunWrite],
                 known: set[tuple[int, str, int]] | None) -> set[int]:
    """G2/G8 fencing: only the lease holder of an attempt whose view of last_seq is
    current moves it; the rids that did. A run whose lease is ``known`` held has only its
    last_seq checked; the others have their lease checked too, and join ``known``."""
    rows = [(w.rid, w.instance, w.attempt, w.prev_seq,
             w.events[-1][0] if w.events else w.prev_seq) for w in batch]
    if known is None:
        return set(await c.rows("runs_fence_append", rows))
    held = [(r[0], r[3], r[4]) for r in rows if r[:3] in known]
    others = [r for r in rows if r[:3] not in known] if held else rows
    passed = set(await c.rows("run_seqs_append", held)) if held else set()
    if others:
        checked = set(await c.rows("runs_fence_append", others))
        known.update(r[:3] for r in others if r[0] in checked)
        passed |= checked
    return passed


async def start_runs(c: Conn, runs: list[RunRecord], instance: str, now: float,
                     known: Mapping[int, StartInput] | None = None,
                     ) -> tuple[list[RunRecord], dict[int, StoredEvent]]:
    """Start runs just claimed by ``instance``, in the claim's transaction: each one's
    ``RUN_STARTED``, echoing the input's messages its thread does not hold yet, is its
    seq 1, and its thread's snapshot is saved as of it with those messages last (G5).
    A new run's first event is then committed with its claim, not one commit later.

    Only a run that is provably at a boundary after ``RUN_STARTED`` is started here:
    its thread is settled (``messages_start_batch``) and its input answers every tool
    call it carries. The others (a continuation of an interrupted run, say) keep
    ``last_seq`` 0, and their execution starts them with the fold's own verdict
    (``RunExecution._prepare``), in the same bytes. ``known``: what admission knows of
    its own run (its input parsed, the messages its thread holds): reading a long
    input's messages again here would hold the writer.
    Returns the records and each started run's first event, by rid."""
    fresh = [r for r in runs if r.last_seq == 0]
    if not fresh:
        return runs, {}
    known = known or {}
    inputs = {r.rid: _messages(known[r.rid].input if r.rid in known else r.input)
              for r in fresh}
    held, last, settled = await _threads_at_start(c, fresh, inputs, known)
    writes: list[RunWrite] = []
    for run in fresh:
        echoed = _new_messages(run.tid, inputs[run.rid], held)
        if run.tid in settled and not unanswered_tool_calls(echoed):
            writes.append(_start_write(run, echoed, last[run.tid], instance))
    if not writes:
        return runs, {}
    fenced = await write_batch(c, writes, now)
    assert not fenced, "a run claimed in this transaction is fenced off"
    started = {w.rid: w.events[0] for w in writes}
    return [r.started() if r.rid in started else r for r in runs], started


def _messages(run_input: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [m for m in run_input.get("messages") or () if isinstance(m, dict)]


async def _threads_at_start(c: Conn, fresh: list[RunRecord],
                            inputs: Mapping[int, list[dict[str, Any]]],
                            known: Mapping[int, StartInput],
                            ) -> tuple[set[tuple[int, Any]], dict[int, float], set[int]]:
    """What the runs' threads hold, in one query: which of the inputs' messages (by
    thread and id; admission knows its own run's already), each thread's last message
    position, and which threads are settled."""
    held: set[tuple[int, Any]] = set()
    looked_up = set()
    for r in fresh:
        if r.rid in known and (ids := known[r.rid].held) is not None:
            held.update((r.tid, mid) for mid in ids)
            looked_up.add(r.rid)
    pairs = [[r.tid, m.get("id")] for r in fresh if r.rid not in looked_up
             for m in inputs[r.rid]]
    pairs += [[r.tid, None] for r in fresh]
    last: dict[int, float] = {}
    settled: set[int] = set()
    for row in await c.all("messages_start_batch", rows=dumps(pairs)):
        if row["id"] is not None:
            held.add((row["tid"], row["id"]))
            continue
        last[row["tid"]] = row["position"] or 0.0
        if row["settled"]:
            settled.add(row["tid"])
    return held, last, settled


def _new_messages(tid: int, messages: list[dict[str, Any]],
                  held: set[tuple[int, Any]]) -> list[dict[str, Any]]:
    """The messages the thread does not hold yet, now counted as held."""
    echoed = []
    for message in messages:
        key = (tid, message.get("id"))
        if key not in held:  # resent history is the thread's already (spec §3)
            held.add(key)
            echoed.append(message)
    return echoed


def _start_write(run: RunRecord, echoed: list[dict[str, Any]], position: float,
                 instance: str) -> RunWrite:
    """The run's ``RUN_STARTED`` as seq 1, echoing the new messages, and the snapshot as
    of it with those messages placed after ``position``, the thread's last (G5)."""
    upserts = []
    for message in echoed:
        position += 1.0
        upserts.append((message["id"], position, dumps(clone_message(message))))
    body = dumps(run_started(
        run.thread_id, run.id, timestamp=now_ms(),
        input={"threadId": run.thread_id, "runId": run.id, "messages": echoed}))
    return RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=run.attempts,
        instance=instance, prev_seq=0, events=[StoredEvent(1, True, body)],
        snapshot=SnapshotWrite(as_of_run=run.id, as_of_seq=1, upserts=upserts))


async def _write_snapshots(c: Conn, writes: list[RunWrite], now: float) -> None:
    """The boundary snapshots of a commit, at most one per thread."""
    snaps = [(w.tid, w.snapshot) for w in writes if w.snapshot is not None]
    deletes = [[tid, i] for tid, s in snaps for i in s.deletes]
    if deletes:
        await c.run("messages_delete_batch", rows=dumps(deletes))
    upserts = [[tid, i, p, body] for tid, s in snaps for i, p, body in s.upserts]
    if upserts:
        await c.rows("messages_upsert_batch", upserts)
    if snaps:
        await c.run("threads_snapshot_batch", now=now, rows=dumps([
            [tid, s.state_json, s.session_state_json, s.as_of_run, s.as_of_seq]
            for tid, s in snaps]))


async def _write_finish(c: Conn, w: RunWrite, now: float) -> None:
    f = w.finish
    assert f is not None
    if f.interrupts:
        await c.many("interrupt_insert", [
            {"tid": w.tid, "id": i, "rid": w.rid, "run_id": w.run_id, "body": body,
             "expires_ts": exp}
            for i, body, exp in f.interrupts])
    await c.run("run_finish", rid=w.rid, status=f.status,
                outcome=None if f.outcome is None else dumps(f.outcome),
                error=None if f.error is None else dumps(f.error), now=now)
    # G12: the notification is owed exactly when the end commits.
    await insert_webhooks(c, w.rid, f.webhooks, now)
    await c.run("thread_refresh_status", tid=w.tid, now=now)
