"""How an attempt ends: its agent's task settled into the run's outcome, what it left
open closed so every stream still folds, and the final event committed with the run's
end (G8: an engine failure ends the run too, or hands its lease back)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from outlast.agent import AgentError, RunSuspended
from outlast.config import Settings
from outlast.engine import usage
from outlast.engine.hub import Hub
from outlast.engine.limits import STOPS
from outlast.engine.metrics import Metrics
from outlast.engine.snapshots import Snapshots
from outlast.engine.webhooks import owed
from outlast.engine.writer import RunChannel, Writer
from outlast.errors import LeaseLost, PayloadTooLarge
from outlast.protocol.events import FAILED, FINISH, parse_time, run_finished
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps
from outlast.protocol.message_index import unanswered_tool_calls
from outlast.protocol.verify import ProtocolViolation
from outlast.store.base import FinishWrite, RunRecord, Store
from outlast.store.notifications import WorkAvailable

log = logging.getLogger("outlast.run")


@dataclass(frozen=True)
class RunServices:
    """What an execution needs from the engine, and nothing more."""

    store: Store
    writer: Writer
    hub: Hub
    settings: Settings
    metrics: Metrics
    instance: str
    is_draining: Callable[[], bool]
    on_snapshot: Callable[[dict[str, Any]], None]  # the host's hook, called off the run's path


class RunOutcome:
    """The ending half of ``RunExecution``: what it holds is the execution's."""

    services: RunServices
    run: RunRecord
    fold: ThreadFold
    channel: RunChannel
    snapshots: Snapshots
    usage: usage.RunUsage
    seq: int
    violation: ProtocolViolation | None
    _settled: bool
    _ended: FinishWrite | None

    async def _append(self, data: dict[str, Any], limit: int | None = None) -> None:
        raise NotImplementedError  # the execution's

    def _save_boundary(self, seq: int, *, force: bool) -> None:
        raise NotImplementedError  # the execution's

    async def _give_up(self) -> None:
        """An engine failure must not leave the run running forever (G8): end it failed,
        or, failing that, let the lease go to another attempt (bounded by max attempts)."""
        if self._settled or self.channel.fenced:
            return
        try:
            await self._finish_failed("internal_error",
                                      "The server failed while running this run.")
            return
        except Exception:
            log.exception("run %s: could not end the run after an engine failure", self.run.id)
        try:
            await self.services.store.expire_lease(self.run.rid, self.services.instance,
                                                 self.run.attempts)
        except Exception:
            log.exception("run %s: could not give up its lease", self.run.id)

    async def _settle(self, task: asyncio.Task[Any], reason: str | None) -> None:
        """End the run as its agent's task ended: cancelled (and why), returned, raised."""
        if reason == "lease_lost" or self.channel.fenced:
            log.warning("run %s: lease lost; stopped", self.run.id)
            return
        if task.cancelled():
            if reason == "drain":
                await self._release()
            elif reason in STOPS:  # a store outage, a spent budget
                await self._finish_failed(reason, STOPS[reason])
            else:
                await self._finish_cancelled()
            return
        exc = task.exception()
        if self.violation is not None and not isinstance(exc, LeaseLost):
            await self._finish_failed(
                "agent_protocol_error",
                f"The agent broke the AG-UI protocol: {self.violation}.")
        elif exc is None:
            result = task.result()
            try:
                dumps(result)
            except (TypeError, ValueError):
                await self._finish_failed(
                    "agent_protocol_error", "The agent broke the AG-UI protocol: RUN_FINISHED: "
                    f"its result is not JSON ({type(result).__name__}).")
                return
            await self._finish_succeeded(result)
        elif isinstance(exc, RunSuspended):
            await self._finish_interrupted(exc.interrupts)
        elif isinstance(exc, LeaseLost):
            return
        elif isinstance(exc, AgentError):
            await self._finish_failed(exc.code, exc.message)
        elif isinstance(exc, PayloadTooLarge):
            await self._finish_failed(exc.code, f"The agent emitted too much: {exc.message}")
        else:
            await self._agent_raised(exc)

    async def _agent_raised(self, exc: BaseException) -> None:
        """An exception the agent did not mean: the server log names it and where it was
        raised, with its traceback, for the agent's author; the client gets only its type
        (its text may quote the conversation, tool arguments or secrets)."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb else "?"
        log.error("run %s: the agent raised %s at %s", self.run.id, type(exc).__name__,
                  where, exc_info=exc)
        await self._finish_failed(
            "agent_error", f"The agent failed unexpectedly ({type(exc).__name__}).")

    async def _close_open(self, tool_result: str, awaiting: set[str] | None = None,
                          finish: str | None = None) -> None:
        """Close constructs left open (cancel, failure, crash) so every stream still folds;
        an assistant reply closed here says why in its ``finish`` reason, when given.

        Tool calls that a pending (or now raised) interrupt waits on keep no result:
        the continuation run answers them."""
        for event in self.fold.closing_events():
            if finish is not None and event["type"] == "TEXT_MESSAGE_END":
                message = self.fold.message(event["messageId"])
                if message is not None and message.get("role") == "assistant":
                    event["metadata"] = {FINISH: finish}
            await self._append(event)
        pending_tools = {i.get("toolCallId") for i in self.fold.interrupts} | (awaiting or set())
        for call_id in unanswered_tool_calls(self.fold.messages):
            if call_id in pending_tools:
                continue
            await self._append({
                "type": "TOOL_CALL_RESULT", "messageId": f"result_{call_id}",
                "toolCallId": call_id, "content": tool_result, "role": "tool",
            })

    async def _end(self, events: list[dict[str, Any]], fin: FinishWrite) -> None:
        if self.usage.calls:  # the final event carries the run's token usage (AG-UI 1.0)
            events[-1]["usage"] = fin.usage = usage.wire(self.usage.calls)
        self._ended = fin
        for event in events:
            await self._append(event)
        self._save_boundary(self.seq, force=True)
        # G12: the webhooks owed are committed with the end, in its transaction.
        fin.webhooks = owed(self.services.settings, self.run, fin, self.fold.messages)
        self.services.writer.finish(self.channel, fin)
        await self.services.writer.flush(self.channel)
        self._settled = not self.channel.fenced
        self.services.metrics.finished.labels(fin.status).inc()

    async def _finish_succeeded(self, result: Any = None) -> None:
        """``result`` is what the agent's ``run`` returned: RUN_FINISHED's ``result``,
        kept on the run record's outcome too."""
        # Tool calls left without a result on success are front-end tool calls:
        # the client answers them in the next run's messages (AG-UI), so they stay open.
        for event in self.fold.closing_events():
            await self._append(event)
        outcome: dict[str, Any] = {"type": "success"}
        pending = unanswered_tool_calls(self.fold.messages)
        if pending:
            outcome["pendingToolCallIds"] = pending
        finished = run_finished(self.run.thread_id, self.run.id,
                                outcome=dict(outcome) if pending else None, result=result)
        if result is not None:
            outcome["result"] = result
        await self._end([finished], FinishWrite("succeeded", outcome=outcome))

    async def _finish_cancelled(self) -> None:
        await self._close_open("Cancelled before the tool returned.")
        outcome = {"type": "cancelled"}
        await self._end(
            [{"type": "RUN_FINISHED", "threadId": self.run.thread_id, "runId": self.run.id,
              "outcome": outcome}],
            FinishWrite("cancelled", outcome=outcome))

    async def _finish_failed(self, code: str, message: str) -> None:
        # A reply cut off by the failure is kept, never sent back to a model as a
        # finished turn (agents.resume.finished).
        await self._close_open("The run failed before this tool returned.", finish=FAILED)
        await self._end(
            [{"type": "RUN_ERROR", "message": message, "code": code}],
            FinishWrite("failed", error={"code": code, "message": message}))

    async def _finish_interrupted(self, interrupts: list[dict[str, Any]]) -> None:
        awaiting = {str(i["toolCallId"]) for i in interrupts if i.get("toolCallId")}
        await self._close_open("The tool did not return a result.", awaiting)
        outcome = {"type": "interrupt", "interrupts": interrupts}
        events = [
            {"type": "STATE_SNAPSHOT", "snapshot": self.fold.state},
            {"type": "MESSAGES_SNAPSHOT", "messages": list(self.fold.messages)},
            {"type": "RUN_FINISHED", "threadId": self.run.thread_id, "runId": self.run.id,
             "outcome": outcome},
        ]
        records = [(i["id"], dumps(i), parse_time(i.get("expiresAt"))) for i in interrupts]
        await self._end(events, FinishWrite("interrupted", outcome=outcome, interrupts=records))

    async def _release(self) -> None:
        """Clean shutdown: commit what we have and let the next process resume (G8)."""
        if self.snapshots.pending is not None:
            self._save_boundary(self.snapshots.pending, force=True)
        await self.services.writer.flush(self.channel)
        await self.services.store.release_lease(self.run.rid, self.services.instance,
                                              self.run.attempts)
        self._settled = True
        # Other processes on a shared store resume it now, not at their next look.
        await self.services.store.notify(WorkAvailable())
