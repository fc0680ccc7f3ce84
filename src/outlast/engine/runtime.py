"""The engine: admits runs, leases and executes them, cancels them, drains.

Concurrency model (see docs/architecture.md): every state change that must
hold across processes is decided by one store transaction (admission, lease
claim, fenced append, interrupt answer); in-process structures are caches
and wake-ups only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from outlast import logs
from outlast.agent import Agent, AgentError, RunContext
from outlast.config import Settings
from outlast.engine import limits, outages, retention
from outlast.engine.admission import (
    RunOptions,
    admit_request,
    check_agent_input,
    check_tool_results,
)
from outlast.engine.edge import EdgeReads
from outlast.engine.execution import RunExecution
from outlast.engine.history import ResentHistory
from outlast.engine.hub import Hub
from outlast.engine.leases import HeldLeases, LeaseKeeper, Losses
from outlast.engine.metrics import Metrics
from outlast.engine.outages import OutageWatch
from outlast.engine.outcome import RunServices
from outlast.engine.trim import malloc_trim, trim_forever
from outlast.engine.webhooks import Deliveries, check_request_webhook, owed
from outlast.engine.writer import Writer
from outlast.errors import AgentNotFound, Draining, RunNotFound, StoreUnavailable
from outlast.protocol.jsonutil import dumps
from outlast.store.base import (
    FINAL,
    AdmitResult,
    FinishWrite,
    Freed,
    RunRecord,
    RunWrite,
    Store,
)
from outlast.store.notifications import (
    CancelRequested,
    EventsCommitted,
    Notification,
    WebhookDue,
    WorkAvailable,
)

log = logging.getLogger("outlast.engine")


class MissingAgent(Agent):
    """Stands in for an agent a stored run names but this server does not register."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, ctx: RunContext) -> None:
        raise AgentError(f"The agent {self.name!r} is not available on this server.",
                         code="agent_not_found")


class Engine(EdgeReads, HeldLeases):
    """Owns runs in this process; the HTTP edge and the CLI call it."""

    def __init__(self, settings: Settings, store: Store, agents: dict[str, Agent]) -> None:
        self.settings = settings
        self.store = store
        self.agents = agents
        self.instance = f"{uuid.uuid4().hex[:12]}"
        self.hub = Hub()
        self.metrics = Metrics()
        self.outages = OutageWatch(
            "the PostgreSQL store" if settings.store_url else f"the SQLite store in "
            f"{settings.data_dir}", None if settings.store_url else settings.data_dir)
        store.report_outage = self.outages
        self.writer = Writer(store, self.hub, self._committed,
                             self.metrics.commit_seconds.observe, self.outages)
        self.webhooks = Deliveries(store, settings, self.instance, self.metrics)
        self.executions: dict[int, RunExecution] = {}
        self.draining = False
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set while no run executes here
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        # Background work by purpose, each awaited (or cancelled) on stop.
        self._runs: set[asyncio.Task[None]] = set()  # executions' main tasks
        self._notifications: set[asyncio.Task[None]] = set()  # cross-process notifies
        self._reserved = 0  # room taken by claims in flight (admissions and the pump)
        self._pump_claim: asyncio.Event | None = None  # set once the pump's claim ends
        self._snapshot_hooks: set[asyncio.Task[None]] = set()  # the host's snapshot hook
        self._renewed = time.monotonic()  # the last time the loop renewed the leases
        # The leases' heartbeat runs in a thread: an agent blocking the loop loses none.
        # A lease runs out here first (G9): a shared store's runs stop when it does.
        self.leases = LeaseKeeper(store.lease_renewer(), self.instance, settings.lease_ttl,
                                  self._leases_renewed,
                                  None if store.exclusive else self._leases_expired)
        self.losses = Losses(settings.lease_ttl)
        self.services = RunServices(
            store=store, writer=self.writer, hub=self.hub, settings=settings, metrics=self.metrics,
            instance=self.instance, is_draining=lambda: self.draining,
            on_snapshot=self._schedule_snapshot_hook)
        self._started = False

    # -- lifecycle --------------------------------------------------------
    async def start(self) -> None:
        """Open the store, take over orphaned runs, start the loops."""
        await self.store.open()
        self.store.add_listener(self._on_notify)
        self.writer.start()
        if self.store.exclusive:
            # The data-directory lock proves any other lease holder dead (G8):
            # take its runs now instead of waiting for the TTL.
            sent = time.monotonic()
            for run in await self.store.claim_expired(self.instance, self.settings.lease_ttl,
                                                      self.settings.max_runs, all_foreign=True):
                self._launch(run, crashed=True, sent=sent)
        self._tasks = [
            asyncio.create_task(self._pump(), name="outlast-pump"),
            asyncio.create_task(self.leases.beating(), name="outlast-loop-beat"),
            asyncio.create_task(retention.upkeep(self.store, self.settings),
                                name="outlast-upkeep"),
            asyncio.create_task(self.hub.sweep(), name="outlast-feed-sweep"),
            asyncio.create_task(outages.probe(self.outages, self.store.probe_write,
                                              self.settings.storage_wait, self._storage_gone),
                                name="outlast-outage-probe"),
        ]
        trim = malloc_trim()
        if trim is not None:
            self._tasks.append(asyncio.create_task(trim_forever(trim), name="outlast-trim"))
        self.leases.start()
        self.webhooks.start()
        self._started = True
        self._wake.set()

    def begin_drain(self) -> None:
        """Refuse new admissions from now on (503 ``draining``), and end the streams this
        process serves at their next wake (their clients resume from another process).
        Safe to call from a signal handler."""
        self.draining = True
        with contextlib.suppress(RuntimeError):  # no loop runs: nobody follows a feed
            asyncio.get_running_loop().call_soon_threadsafe(self.hub.poke_all)

    async def drain(self) -> None:
        """SIGTERM: refuse admissions, stop runs at their next boundary, release leases."""
        self.begin_drain()
        for ex in list(self.executions.values()):
            if ex.fold.at_boundary:
                ex.stop("drain")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), self.settings.drain_timeout)
        for ex in list(self.executions.values()):
            ex.stop("drain")
        await self._idle.wait()

    async def stop(self) -> None:
        """Drain, stop the loops, close the store."""
        if not self._started:
            return
        await self.drain()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.leases.stop()
        await self.writer.stop()
        await self.webhooks.stop()
        # Executions have ended (drain); what is left is short notification and hook work.
        for group in (self._runs, self._notifications, self._snapshot_hooks):
            if group:
                await asyncio.wait(set(group), timeout=self.settings.drain_timeout)
            for task in set(group):
                task.cancel()
        await self.store.close()
        self._started = False

    def resident(self) -> dict[str, int]:
        """What this process holds for runs right now, by kind (G10: all zero when no run
        executes or is watched here)."""
        return {
            "executions": len(self.executions),
            "feeds": len(self.hub),
            "write_channels": self.writer.pending_channels(),
            "run_tasks": len(self._runs),
            "notification_tasks": len(self._notifications),
            "snapshot_hook_tasks": len(self._snapshot_hooks),
        }

    # -- admission --------------------------------------------------------
    def agent(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            raise AgentNotFound(f"no agent is registered as {name!r}", agent=name)
        return agent

    async def admit(self, principal: str, agent: str, body: dict[str, Any],
                    options: RunOptions) -> AdmitResult:
        """Admit the run of a RunAgentInput body, or attach to the one with its key (G3)."""
        host = self.agent(agent)
        if self.draining:
            raise Draining("the server is shutting down; retry on another instance")
        if options.webhook is not None:
            check_request_webhook(self.settings, options.webhook)  # before anything is stored
        check_agent_input(host, body)
        messages = body.get("messages") or []
        await check_tool_results(self.store, principal, body["threadId"], messages)
        history = ResentHistory(messages)  # before the transaction: it holds the writer
        # Start a run in the same transaction when this process has room: its
        # RUN_STARTED commits with the admission, so the request's stream has its first
        # event without waiting for another transaction. The room is reserved while the
        # transaction runs, or concurrent admissions would each take the last slot.
        req = admit_request(principal, agent, body, options, history,
                            limits.of(self.settings, principal),
                            claim=(self.instance, self.settings.lease_ttl,
                                   await self._admission_room()))
        sent = time.monotonic()
        with self._reserving(req.claim_limit):
            result = await self.store.admit(req)
        self._start(result.claimed, sent)
        if result.created:
            self.metrics.admitted.inc()
            for old in result.superseded:
                await self._stop_run(old)
            if result.run.status == "queued":
                self.wake()
                await self.store.notify(WorkAvailable())
        else:
            self.metrics.attached.inc()
        return result

    # -- cancel (G6) ------------------------------------------------------
    async def cancel(self, principal: str, run_id: str, *, wait: bool = False,
                     limit: float = 30.0) -> RunRecord:
        """Stop a run by id; idempotent. With ``wait``, return once it is final."""
        run = await self.store.get_run(principal, run_id)
        if run is None:
            raise RunNotFound("run not found", runId=run_id)
        if run.status in FINAL:
            return run
        await self._stop_run(run)
        if wait:
            deadline = time.monotonic() + limit
            with self.hub.watch(run.rid) as feed:
                while time.monotonic() < deadline:
                    current = await self.store.get_run_by_rid(run.rid)
                    if current is None or current.status in FINAL:
                        break
                    await feed.wait(feed.last_seq, 0.2)
        current = await self.store.get_run_by_rid(run.rid)
        if current is None:
            raise RunNotFound("run not found", runId=run_id)
        return current

    async def _stop_run(self, run: RunRecord) -> None:
        record = await self.store.request_cancel(run.rid)
        if record is None or record.status in FINAL:
            return
        if record.status == "queued":
            outcome = {"type": "cancelled"}
            events = [
                dumps({"type": "RUN_STARTED", "threadId": run.thread_id, "runId": run.id,
                       "protocolVersion": "1.0", "timestamp": int(time.time() * 1000)}),
                dumps({"type": "RUN_FINISHED", "threadId": run.thread_id, "runId": run.id,
                       "outcome": outcome, "timestamp": int(time.time() * 1000)}),
            ]
            fin = FinishWrite("cancelled", outcome=outcome)
            if await self.store.cancel_queued(run.rid, events, outcome,
                                              owed(self.settings, run, fin, [])):
                self._webhooks_due()
                self.hub.publish(run.rid, [], 2, True)
                await self.store.notify(EventsCommitted(run.rid, 2, True))
                self.metrics.finished.labels("cancelled").inc()
                return
        ex = self.executions.get(run.rid)
        if ex is not None:
            ex.stop("cancel")
        else:
            # G6 across processes: the lease holder hears this within milliseconds.
            await self.store.notify(CancelRequested(run.rid))

    # -- execution --------------------------------------------------------
    def wake(self) -> None:
        """Ask the scheduler to look for startable runs now."""
        self._wake.set()

    async def _claiming(
        self, claim: Callable[[str, float, int], Awaitable[list[RunRecord]]],
    ) -> list[RunRecord]:
        """Claim runs for the room there is, reserved while the claim is in flight."""
        free = self._room()
        if free <= 0:
            return []
        done = self._pump_claim = asyncio.Event()
        try:
            with self._reserving(free):
                return await claim(self.instance, self.settings.lease_ttl, free)
        finally:
            self._pump_claim = None
            done.set()

    async def _admission_room(self) -> int:
        """How many runs an admission may claim (0 or 1). While the pump's claim holds
        the room it may fill, wait for it rather than queue the run for the pump's next
        look, a transaction later: the pump mostly finds nothing to claim."""
        while (pump := self._pump_claim) is not None and self._room() <= 0:
            await pump.wait()  # its next claim (queued, then expired runs) may follow
        return 1 if self._room() > 0 else 0

    @contextlib.contextmanager
    def _reserving(self, slots: int) -> Iterator[None]:
        """Count ``slots`` as taken while a claim that may fill them is in flight."""
        self._reserved += slots
        try:
            yield
        finally:
            self._reserved -= slots

    def executes(self, run: RunRecord) -> bool:
        """True while this process executes ``run``: its feed then sees every commit.
        Not once the execution let its feed go (``done``), even before it is dropped."""
        ex = self.executions.get(run.rid)
        return ex is not None and not ex.done.is_set()

    def _room(self) -> int:
        """How many more runs this process may start (--max-runs), admissions' claims
        in flight counted."""
        return self.settings.max_runs - len(self.executions) - self._reserved

    async def _claim_queued(self, instance: str, ttl: float, limit: int) -> list[RunRecord]:
        return await self.store.claim_queued(instance, ttl, limit, start=True)

    def _start(self, claimed: list[RunRecord], sent: float) -> None:
        """Launch runs claimed by a statement sent at ``sent``. Those their claim started
        have RUN_STARTED committed (``last_seq`` 1): counted and announced here, as the
        writer does its commits."""
        for run in claimed:
            self._launch(run, crashed=False, sent=sent)
        started = [EventsCommitted(run.rid, run.last_seq, False)
                   for run in claimed if run.last_seq]
        if started:
            self.metrics.events.inc(len(started))
            self._announce(started)

    def _launch(self, run: RunRecord, *, crashed: bool, sent: float) -> None:
        agent = self.agents.get(run.agent)
        if agent is None:
            log.error("run %s needs agent %r, which is not registered here (it ends failed, "
                      "G8)", run.id, run.agent, extra=logs.of_run(run))
            agent = MissingAgent(run.agent)
        if crashed:
            self.metrics.takeovers.inc()
        ex = RunExecution(self.services, run, agent, crashed=crashed)
        self.executions[run.rid] = ex
        self.leases.held([run.rid], sent)  # it lasts here until a TTL after ``sent``
        self._track_leases()
        self._idle.clear()
        self.metrics.executing.set(len(self.executions))
        task = asyncio.create_task(ex.main(), name=f"run:{run.id}")
        self._runs.add(task)
        task.add_done_callback(lambda t: self._execution_ended(t, ex))

    def _execution_ended(self, task: asyncio.Task[None], ex: RunExecution) -> None:
        """The one place an execution is dropped: when its task is done."""
        self._runs.discard(task)
        if self.executions.get(ex.run.rid) is ex:
            del self.executions[ex.run.rid]
            self._track_leases()
        if not self.executions:
            self._idle.set()
        self.metrics.executing.set(len(self.executions))
        self.wake()  # a queued run of the same thread may start now

    async def _pump(self) -> None:
        interval = max(0.05, self.settings.lease_ttl / 3)
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that
            # races a wake-up, and stop() would then wait for this loop forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wake.wait()
            self._wake.clear()
            if self.draining:
                continue
            try:
                sent = time.monotonic()
                self._start(await self._claiming(self._claim_queued), sent)
                if self.losses:
                    await self.losses.report(self.store)  # the store answers again
                last = max(self._renewed, self.leases.renewed_at)
                if self.executions and \
                        time.monotonic() - last > self.settings.lease_ttl / 2:
                    # The renewals failed a while (a store outage): the leases of the runs
                    # executing here may have run out. Renewed first, they are not taken
                    # over from this very process (G8 holds either way: fencing).
                    await self._renew()
                sent = time.monotonic()
                for run in await self._claiming(self.store.claim_expired):
                    log.warning("run %s: lease expired; taking it over", run.id,
                                extra=logs.of_run(run))
                    self._launch(run, crashed=True, sent=sent)
            except StoreUnavailable:
                pass  # said once by the OutageWatch
            except Exception:
                log.exception("scheduling failed; retrying")
                await asyncio.sleep(interval)

    def _storage_gone(self, outage: StoreUnavailable) -> None:
        """The store has not written for ``--storage-wait``: the runs waiting on it stop
        and end failed once that can be written."""
        for ex in list(self.executions.values()):
            if ex.waits_on_store():
                ex.stop(outage.code)

    async def compact(self, older_than: float | None, *, dry_run: bool) -> tuple[float, Freed]:
        """``outlast gc`` through this server (``retention.on_demand``)."""
        return await retention.on_demand(self.store, self.settings.event_retention,
                                         older_than, dry_run=dry_run)

    # -- notifications ----------------------------------------------------
    def _committed(self, writes: list[RunWrite]) -> None:
        # Counted per commit, not per event or run: a locked counter costs a busy loop.
        self.metrics.events.inc(sum(len(w.events) for w in writes))
        if any(w.finish is not None and w.finish.webhooks for w in writes):
            self._webhooks_due()
        if self.store.exclusive:
            return  # one process per store: the writer already published in-process
        self._announce([
            EventsCommitted(w.rid, w.events[-1].seq if w.events else w.prev_seq,
                            w.finish is not None)
            for w in writes if w.events or w.finish is not None])

    def _announce(self, commits: list[EventsCommitted]) -> None:
        """Tell the other processes on the store what committed, for their readers."""
        if self.store.exclusive:
            return  # one process per store: the writer already published in-process
        for commit in commits:
            task = asyncio.ensure_future(self.store.notify(commit))
            self._notifications.add(task)
            task.add_done_callback(self._notifications.discard)

    async def _on_notify(self, n: Notification) -> None:
        if isinstance(n, EventsCommitted):
            if n.rid not in self.executions:
                self.hub.hint(n.rid, n.last_seq, n.final)
        elif isinstance(n, CancelRequested):
            ex = self.executions.get(n.rid)
            if ex is not None:
                ex.stop("cancel")
        elif isinstance(n, WorkAvailable):
            self.wake()
        elif isinstance(n, WebhookDue):
            self.webhooks.wake()

    def _webhooks_due(self) -> None:
        """An end with webhooks committed (G12): deliver now, here and, on a shared
        store, wherever a process has room (the claim lets exactly one take each)."""
        self.webhooks.wake()
        if not self.store.exclusive:
            task = asyncio.ensure_future(self.store.notify(WebhookDue()))
            self._notifications.add(task)
            task.add_done_callback(self._notifications.discard)

    def _schedule_snapshot_hook(self, snapshot: dict[str, Any]) -> None:
        """Call the host's snapshot hook off the run's path; its failures are only logged."""
        hook = self.settings.snapshot_hook
        if hook is None:
            return

        async def call() -> None:
            try:
                result = hook(snapshot)
                if result is not None:
                    await result
            except Exception:
                log.exception("snapshot hook failed (the run goes on)")

        task = asyncio.create_task(call())
        self._snapshot_hooks.add(task)
        task.add_done_callback(self._snapshot_hooks.discard)
