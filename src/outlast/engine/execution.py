"""One attempt of one run: the agent task, the fold, boundaries and the run's end.

The execution owns the run while it holds the lease. The HTTP request that
admitted the run never owns it (G1): requests only subscribe to the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ag_ui.core import TokenUsage

from outlast.agent import Agent
from outlast.engine import usage
from outlast.engine.context import EngineRunContext, resolutions_of
from outlast.engine.history import new_messages, sharing_history
from outlast.engine.outages import Patient
from outlast.engine.outcome import RunOutcome, RunServices
from outlast.engine.snapshots import Snapshots, fold_log
from outlast.engine.writer import NO_STATE
from outlast.errors import LeaseLost, PayloadTooLarge
from outlast.logs import about_run
from outlast.protocol.constructs import OPENERS, construct_row
from outlast.protocol.events import (
    now_ms,
    run_started,
    state_snapshot,
)
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps
from outlast.protocol.state import STATE_EVENTS
from outlast.protocol.verify import (
    MODELS,
    ProtocolViolation,
    check_order,
    check_schema,
    delta_key,
)
from outlast.store.base import EffectRecord, FinishWrite, RunRecord
from outlast.tracing import TRACING

log = logging.getLogger("outlast.run")

AGUI_MODELS = tuple(MODELS.values())


class RunExecution(RunOutcome):
    """Runs one attempt of a run under this process's lease.

    The engine learns that it ended from its task (``main``), never from a call back."""

    def __init__(self, services: RunServices, run: RunRecord, agent: Agent, *,
                 crashed: bool) -> None:
        self.services = services
        self.run = run
        self.agent = agent
        self.crashed = crashed  # a takeover of an attempt that died
        self.resumed = crashed and run.last_seq > 0  # a claim's RUN_STARTED is no attempt
        self.seq = run.last_seq
        self.cancel_reason: str | None = None
        self.violation: ProtocolViolation | None = None  # G11: the first rule the agent broke
        self.fold = ThreadFold()
        self.channel = services.writer.channel(
            run.rid, run.tid, run.id, run.attempts, services.instance, run.last_seq)
        self.channel.on_fenced = self._on_fenced
        self._writer = services.writer  # read per event: no attribute chain
        self._max_event_bytes = services.settings.max_event_bytes
        self.snapshots = Snapshots(services.writer, self.channel, services.settings,
                                   services.on_snapshot, thread_id=run.thread_id,
                                   run_id=run.id)
        self.usage = usage.RunUsage(services, run, self.channel, self.stop)
        self.journal = Patient()  # the effect journal's calls wait out a store outage
        self._agent_task: asyncio.Task[Any] | None = None
        self._settled = False  # the run ended or was handed back: nothing left to do
        self._ended: FinishWrite | None = None
        self.done = asyncio.Event()

    # -- control ----------------------------------------------------------
    def stop(self, reason: str) -> None:
        """Stop the agent: ``cancel`` (G6), ``lease_lost`` (G8 fencing) or ``drain``."""
        if self.cancel_reason is None or reason == "lease_lost":
            self.cancel_reason = reason
        if self._agent_task is not None and not self._agent_task.done():
            self._agent_task.cancel()

    def _on_fenced(self) -> None:
        self.stop("lease_lost")

    def waits_on_store(self) -> bool:
        """True while some of this run's writes are not stored yet."""
        return self.channel.pending or self.channel.inflight or self.journal.waiting

    # -- what the agent's context reads (engine.context.RunPort) --------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.fold.messages

    @property
    def state(self) -> Any:
        return self.fold.state

    def add_usage(self, used: TokenUsage, finish_reason: str | None = None) -> None:
        self.usage.add(used, finish_reason)

    @property
    def cancelled(self) -> bool:
        return self.cancel_reason is not None

    async def effect_get(self, key: str) -> EffectRecord | None:
        return await self.journal(self.services.store.effect_get, self.run.rid, key)

    # -- writing ----------------------------------------------------------
    async def emit(self, event: Any) -> None:
        """Append an agent's event: checked first (G11), shown only once committed (G2)."""
        if self.violation is not None:
            raise self.violation  # the run is failing: nothing more from this agent
        if type(event) is dict and self._append_delta(event):
            if self._writer.over_high_water(self.channel):
                await self._writer.make_room(self.channel)
            return
        try:
            if isinstance(event, dict):  # first: the common case, and a cheap test
                data: dict[str, Any] = dict(event)
                check_schema(data)
            elif isinstance(event, AGUI_MODELS):
                data = event.model_dump(mode="json", by_alias=True)
            else:
                raise ProtocolViolation("an event is an ag_ui.core event model or a dict",
                                        type(event).__name__)
            check_order(data, self.fold)
        except ProtocolViolation as violation:
            # G11: never stored, never shown; the run ends failed once the agent returns.
            self.violation = violation
            log.error("run %s: the agent broke the AG-UI protocol: %s", self.run.id, violation)
            raise
        await self._append(data, limit=self.services.settings.max_event_bytes)

    def _append_delta(self, event: dict[str, Any]) -> bool:
        """Most of what an agent emits, in one pass: a content delta continuing an open
        construct, checked (G11), folded and queued exactly as ``emit`` and ``_append``
        would, minus what cannot apply to it (no opener, no state, no boundary, no
        construct opened or closed). False, with nothing done, for any other event."""
        key = delta_key(event)
        fold = self.fold
        if key is None or not fold.continues(key) or self.channel.fenced:
            return False
        data = event if "timestamp" in event else {**event, "timestamp": now_ms()}
        body = dumps(data)
        size = len(body) if body.isascii() else len(body.encode())
        if size > self._max_event_bytes:
            return False  # refused the general way
        fold.apply_delta(data)
        self.seq += 1
        self._writer.append(self.channel, self.seq, False, body)
        self.snapshots.pending = None  # inside an open construct: no boundary
        return True

    async def _append(self, data: dict[str, Any], limit: int | None = None) -> None:
        """Append one event. ``limit`` bounds what an agent emits; the engine's own
        events (the input echoed in RUN_STARTED, snapshots at the end) are never refused,
        or a run could not end."""
        if self.channel.fenced:
            raise LeaseLost("this process no longer holds the run's lease")
        kind = data.get("type")
        if kind in OPENERS:
            draining = self.cancel_reason == "drain"
            if self.snapshots.pending is not None:
                self._save_boundary(self.snapshots.pending, force=draining)
            if draining:
                # Clean shutdown (G8): open nothing new. The log ends at the boundary and
                # the snapshot holds the agent's state as it starts its next construct,
                # so the next process resumes right here with nothing left to close.
                raise asyncio.CancelledError
        if "timestamp" not in data:
            data["timestamp"] = now_ms()
        body = dumps(data)
        size = len(body) if body.isascii() else len(body.encode())
        if limit is not None and size > limit:
            raise PayloadTooLarge(f"an event of {size} bytes is over the limit of {limit}")
        # The state before a state event, for the log's state index (spec §4): the fold
        # replaces its state on every change, never edits it, so the reference holds.
        state_before = self.fold.state if kind in STATE_EVENTS else NO_STATE
        self.fold.apply(data)
        self.seq += 1
        at_boundary = self.fold.at_boundary
        changes = self.fold.construct_changes
        indexed = None
        if changes:
            # spec §4: what this event opened or closed is indexed with it, so a stream can
            # start here without folding the log.
            indexed = [(self.seq, i, *construct_row(key, construct))
                       for i, (key, construct) in enumerate(changes)]
            changes.clear()
        self.services.writer.append(self.channel, self.seq, at_boundary, body, indexed,
                                    state_before)
        if at_boundary:
            self.snapshots.pending = self.seq
            if self.services.is_draining() and self.cancel_reason is None:
                # Clean shutdown: stop at this boundary so the next process resumes here.
                self.stop("drain")
        else:
            # Left the boundary without an opener (a MESSAGES_SNAPSHOT with an open tool
            # call, say): the fold no longer holds that boundary's state, so it is gone.
            self.snapshots.pending = None
        if self.services.writer.over_high_water(self.channel):
            await self.services.writer.make_room(self.channel)

    async def flush(self) -> None:
        """Wait until everything emitted so far is committed."""
        if self.snapshots.pending is not None:
            self._save_boundary(self.snapshots.pending, force=False)
        await self.services.writer.flush(self.channel)
        if self.channel.fenced:
            raise LeaseLost("this process no longer holds the run's lease")

    async def mark_boundary(self) -> None:
        """An agent's explicit boundary: saved now, whatever the throttle says."""
        if not self.fold.at_boundary:
            self.violation = ProtocolViolation(
                "not at a safe boundary: a message, tool call or step is open", "boundary()")
            raise self.violation
        self._save_boundary(self.seq, force=True)

    def _save_boundary(self, seq: int, *, force: bool) -> None:
        self.snapshots.save(self.fold, seq, force=force)

    async def effect_start(self, key: str) -> None:
        await self.journal(self.services.store.effect_start, self.run.rid, key,
                           self.services.instance, self.run.attempts)

    async def effect_complete(self, key: str, result_json: str) -> None:
        await self.journal(self.services.store.effect_complete, self.run.rid, key,
                           self.services.instance, self.run.attempts, result_json)
        self.usage.since = time.time()  # a model call after a tool starts from its end

    # -- lifecycle --------------------------------------------------------
    async def main(self) -> None:
        """Prepare, run the agent, end the run; never raises. Every log line about it,
        the agent's own included, carries the run's identity (``outlast.logs``)."""
        with about_run(self.run.id, self.run.thread_id, self.run.attempts, self.run.principal):
            with TRACING.attempt(self.run):
                await self._main_logged()
            if self._ended is not None:  # the run's span, once, by the attempt that ends it
                TRACING.run_ended(self.run, self._ended.status, self._ended.error)

    async def _main_logged(self) -> None:
        # The execution holds its run's feed while it writes, so what it commits reaches
        # the subscribers; the feed goes with the last holder (G10).
        self.services.hub.acquire(self.run.rid)
        try:
            await self._main()
        except LeaseLost:
            log.warning("run %s: lease lost; this process stops writing to it", self.run.id)
        except Exception:
            log.exception("run %s: engine failure", self.run.id)
            await self._give_up()
        finally:
            self.services.hub.release(self.run.rid)
            self.done.set()

    async def _main(self) -> None:
        await self._prepare()
        if self.crashed and not self._may_resume():
            await self._finish_failed("crashed", "The server running this run stopped, and "
                                      "the run cannot be resumed.")
            return
        if not self.run.cancel_requested and await self._cancel_requested_since_claim():
            self.cancel_reason = "cancel"  # it came before there was an execution to stop
        if self.run.cancel_requested or self.cancel_reason == "cancel":
            await self._finish_cancelled()
            return
        store = self.services.store
        resolutions = resolutions_of(await TRACING.waited(
            self.run, await store.resolved_by(self.run.rid), store))
        ctx = EngineRunContext(
            self, run_id=self.run.id, thread_id=self.run.thread_id, attempt=self.run.attempts,
            input=sharing_history(self.fold, self.run.input),
            session_state=self.snapshots.session_state, resumed=self.resumed,
            resolutions=resolutions)
        # The context holds the input now, as the agent's model: the record need not
        # keep the JSON and its parse (whatever history the client resent) for as long
        # as the agent runs.
        self.run = self.run.without_input()
        self._agent_task = asyncio.create_task(self.agent.run(ctx), name=f"agent:{self.run.id}")
        if self.cancel_reason is not None:  # stopped while preparing
            self._agent_task.cancel()
        await asyncio.wait({self._agent_task})
        await self._settle(self._agent_task, self.cancel_reason)

    async def _cancel_requested_since_claim(self) -> bool:
        # Its own frame: the record read here, input and all, is not kept by _main's
        # for the life of the run.
        current = await self.services.store.get_run_by_rid(self.run.rid)
        return current is not None and current.cancel_requested

    def _may_resume(self) -> bool:
        s = self.services.settings
        policy = s.crash_policy or ("resume" if self.agent.capabilities.supports_resume
                                    else "fail")
        return policy == "resume" and self.run.attempts <= s.max_attempts

    async def _prepare(self) -> None:
        store = self.services.store
        snap = await store.get_snapshot(self.run.tid)
        self.fold = ThreadFold(snap.messages, snap.state, copy=False)  # read for it alone
        self.fold.construct_changes = []  # new constructs from here on go to the index
        self.snapshots.load(snap)
        if not self.resumed and self.seq > 0:
            # Started by its claim (``claim_queued(start=True)``): RUN_STARTED and the
            # snapshot as of it are committed, and the fold above already holds them.
            self.snapshots.saved_now()
            self.snapshots.announce(self.fold, self.seq)
            if await self._start_state():
                self._save_boundary(self.seq, force=True)
            return
        if not self.resumed:
            # Claimed but not started (``sqlwrite.start_runs`` starts only runs it can
            # prove at a boundary; a continuation of an interrupted run is not): the
            # RUN_STARTED echoes the input's new messages, which the stock client (and
            # our fold) add to the conversation, so every reader of the log sees them.
            fresh = new_messages(self.fold, self.run.input.get("messages") or [])
            await self._append(run_started(  # as sqlwrite.start_runs spells it
                self.run.thread_id, self.run.id,
                input={"threadId": self.run.thread_id, "runId": self.run.id,
                       "messages": fresh}))
            await self._start_state()
            # G5: the thread shows the new input from the run's first commit on.
            self._save_boundary(self.seq, force=True)
            return
        # Resume after a crash (G8): fold what the dead attempt committed on top of
        # the last boundary snapshot, then close what it left open.
        mine = snap.as_of_run == self.run.id and snap.as_of_seq is not None
        await fold_log(store, self.run.rid, self.fold, (snap.as_of_seq or 0) if mine else 0)
        # Its attempts' tokens count toward its final event (the ledger kept them).
        self.usage.calls = [usage.token_usage_of(u)
                            for u in await store.usage_for_run(self.run.rid)]
        if not self.crashed or not self._may_resume():
            return  # a crashed run that may not resume ends failed, never "resumed"
        resumed_from = self.seq
        await self._close_open("The run was interrupted before this tool returned.")
        await self._append({
            "type": "CUSTOM", "name": "outlast.resumed",
            "value": {"attempt": self.run.attempts, "resumedFromSeq": resumed_from},
        })
        self._save_boundary(self.seq, force=True)

    async def _start_state(self) -> bool:
        """Open a fresh run's log with the shared state it starts from, when there is
        any (spec §4), so a client that did not send it still converges: the input's
        ``state`` when the client sent one, else the thread's. True if it did."""
        sent = self.run.input.get("state")
        state = sent if sent not in (None, {}) else self.fold.state
        if state in (None, {}):
            return False
        await self._append(state_snapshot(state))
        return True
