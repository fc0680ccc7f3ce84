"""Agno host: an ``agno.agent.Agent`` runs durably as an outlast agent.

The agent runs through Agno's own streamed run (``arun(stream=True,
stream_events=True)``); its text, tool calls and tool results reach clients as AG-UI
events. The thread is the conversation: each run hands Agno the thread's messages.
Outlast adds what Agno's own ``AGUI`` interface cannot keep:

- Agno's session (its paused runs, ``session_state``, summary) lives in outlast's
  store: each run's copy of the agent gets an in-memory Agno ``db`` restored from the
  thread's private ``session_state`` and saved back into it when the run ends or
  pauses (the agent's own ``db`` and history loading are not used);
- every tool the agent executes runs as a journaled effect keyed by the model's call
  id (G9): a retry, a reattach or a crash resume never runs it twice;
- a tool with ``requires_confirmation`` pauses Agno's run; the pause ends the outlast
  run with a durable interrupt (G7). The answer, after any restart, confirms or
  rejects Agno's own ``RunRequirement`` (edited arguments replace the call's) and
  ``acontinue_run`` carries on with the paused run from the restored ``db``: a
  rejected call's result is Agno's own words (the person's reason, when given);
- a crash resume (G8) continues from the last boundary, as the other hosts do
  (``outlast.agents.resume``): a cut-off reply is marked and never sent back to the
  model, calls left without a result run through the journal, and a call in doubt is
  asked about first;
- every model request's tokens are counted for the run's final event (AG-UI 1.0);
- as in Agno's own ``AGUI`` interface, the thread's AG-UI state is the run's
  ``session_state`` (what it leaves comes back as the thread's state), and a client's
  front-end tools are Agno external tools, their calls left for the client;
- Agno's telemetry is turned off for every run.

``stream`` turns the run's events into AG-UI events and journals its tools.

Install with ``pip install "outlast[agno]"``.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from outlast.agent import Agent, AgentError, Capabilities, Resolution, RunContext, in_doubt
from outlast.agents.agno.stream import (
    APPROVAL_KIND,
    KEY_PREFIX,
    SESSION_KEY,
    Relay,
    execute,
    journaled,
)
from outlast.agents.resume import (
    answer_placeholder,
    finished,
    mark_cut_off,
    note_settled,
    owed_calls,
    settled_at,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency
from outlast.protocol.content import text_of

try:
    from agno.agent import Agent as AgnoAgent
    from agno.db.base import SessionType
    from agno.db.in_memory import InMemoryDb
    from agno.models.message import Message
    from agno.run.base import RunContext as RunContext_
    from agno.session.agent import AgentSession
    from agno.tools.function import Function
except ImportError:  # pragma: no cover - exercised only without the extra
    AgnoAgent = None  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.agno")

REJECTED = "Function call was rejected by the user"  # Agno's words without a reason


def _require() -> Any:
    if AgnoAgent is None:
        raise MissingDependency("agno", "agno")
    return AgnoAgent


def serves(obj: Any) -> bool:
    """True for an Agno ``Agent`` (the object this host takes)."""
    return AgnoAgent is not None and isinstance(obj, AgnoAgent)


def to_agno(messages: list[dict[str, Any]]) -> list[Any]:
    """AG-UI messages as Agno messages (text, tool calls, tool results); unfinished
    replies are not sent back to the model."""
    out: list[Any] = []
    for m in finished(messages):
        role, content = m.get("role"), text_of(m.get("content"))
        if role in ("user", "system", "developer"):
            out.append(Message(role="system" if role == "developer" else role, content=content))
        elif role == "assistant":
            calls = [{"id": c["id"], "type": "function",
                      "function": {"name": c["function"]["name"],
                                   "arguments": c["function"].get("arguments") or "{}"}}
                     for c in m.get("toolCalls") or ()]
            out.append(Message(role="assistant", content=content or None,
                               tool_calls=calls or None))
        elif role == "tool" and m.get("toolCallId"):
            out.append(Message(role="tool", tool_call_id=m["toolCallId"], content=content))
    return out


class _Store:
    """Agno's session of one thread, in an Agno ``InMemoryDb`` restored from (and saved
    back into) the thread's ``session_state``. Only paused runs are kept: the thread
    holds the conversation."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.db = InMemoryDb()  # type: ignore[no-untyped-call]
        saved = self.state().get("session")
        if isinstance(saved, dict):
            session = AgentSession.from_dict(copy.deepcopy(saved))
            if session is not None:
                self.db.upsert_session(session)

    def state(self) -> dict[str, Any]:
        state = self.ctx.session_state.get(SESSION_KEY)
        if not isinstance(state, dict):
            state = self.ctx.session_state[SESSION_KEY] = {}
        return state

    def save(self) -> None:
        session = self.db.get_session(session_id=self.ctx.thread_id,
                                      session_type=SessionType.AGENT, deserialize=False)
        if not isinstance(session, dict):
            return
        saved = json.loads(json.dumps(session, default=str))
        saved["runs"] = [r for r in saved.get("runs") or ()
                         if isinstance(r, dict) and r.get("status") == "PAUSED"]
        self.state()["session"] = saved


class AgnoHost(Agent):
    """Hosts an Agno ``Agent``: its session in the thread, tools journaled, tool
    confirmations durable, crash resume from the last boundary."""

    capabilities = Capabilities(
        description="Agno agent with its session in the thread, journaled tool calls and "
                    "durable tool confirmations",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any) -> None:
        _require()
        if not serves(agent):
            raise TypeError(f"the Agno host takes an agno.agent.Agent, not {type(agent)!r}")
        self.agent = agent
        client = getattr(agent.model, "get_async_client", None)
        if callable(client):
            try:
                client()  # made once, so every run's copy of the model shares it
            except Exception:  # each run reports it (no API key, ...)
                log.debug("the Agno model's client is made per run", exc_info=True)

    def _copy(self, ctx: RunContext, store: _Store, failures: list[AgentError]) -> Any:
        """This run's agent: Agno keeps a run's state on its agent and model objects, so
        each run gets its own, with the thread's db and its tools journaled."""
        agent = self.agent.deep_copy(update={
            "model": copy.copy(self.agent.model), "db": store.db, "telemetry": False,
            "add_history_to_context": False})
        if agent.model is None:  # Agno's default model, as its own run would pick
            from agno.agent._init import set_default_model

            set_default_model(agent)
        agent.model.arun_function_call = journaled(ctx, agent.model.arun_function_call,
                                                   failures)
        return agent

    async def run(self, ctx: RunContext) -> Any:
        store = _Store(ctx)
        relay = Relay(ctx)
        agent = self._copy(ctx, store, relay.failures)
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND]
        settled = settled_at(ctx, SESSION_KEY)  # None unless a crash resume
        stream = await self._continue(ctx, agent, answers, relay) \
            if answers and settled is None else None
        if stream is None:
            # A continuation that crashed after a boundary goes on from it, from the thread
            # (the calls a person answered settled first), not from Agno's paused run; so
            # does one whose paused run the thread's session does not hold.
            history = await self._history(ctx, agent, settled, answers)
            # As Agno's own AGUI interface runs it: the thread's AG-UI state as the run's
            # session_state (over the stored one), the client's tools as external ones.
            shared = dict(ctx.state) if isinstance(ctx.state, dict) and ctx.state else None
            context = RunContext_(run_id=ctx.run_id, session_id=ctx.thread_id,
                                  session_state=shared, client_tools=_client_tools(ctx) or None)
            stream = agent.arun(history, stream=True, stream_events=True, run_context=context,
                                session_id=ctx.thread_id, run_id=ctx.run_id)
        async for event in stream:
            await relay.send(event)
        await relay.close()
        await relay.share()
        store.db.delete_runs(relay.dropped)
        store.save()
        if relay.interrupts:
            await ctx.interrupt(*relay.interrupts)
        return relay.result

    async def _continue(self, ctx: RunContext, agent: Any, answers: list[Resolution],
                        relay: Relay) -> Any:
        """Agno's paused run, restored from the thread, with the person's answers (None
        when the thread's session does not hold it)."""
        run_id = str(answers[0].interrupt["metadata"].get("runId"))
        paused = await agent.aget_run_output(run_id=run_id, session_id=ctx.thread_id)
        if paused is None or paused.status != "PAUSED":
            log.warning("run %s: Agno's paused run %s is not in the thread's session; "
                        "going on from the thread", ctx.run_id, run_id)
            return None
        by_call = {a.interrupt.get("toolCallId"): a for a in answers}
        requirements = [r for r in paused.requirements or ()
                        if r.tool_execution is not None and r.needs_confirmation]
        for req in requirements:
            answer = by_call.get(req.tool_execution.tool_call_id)
            if answer is None:
                continue
            said = _rejection(answer)
            if said is None:
                if answer.edited_args is not None:
                    req.tool_execution.tool_args = answer.edited_args
                req.confirm()
            else:
                req.reject(None if said == REJECTED else said)
                relay.rejected[str(req.tool_execution.tool_call_id)] = said
        note_settled(ctx, SESSION_KEY)
        return agent.acontinue_run(run_id=run_id, session_id=ctx.thread_id,
                                   requirements=requirements, stream=True,
                                   stream_events=True)

    async def _history(self, ctx: RunContext, agent: Any, settled: int | None,
                       answers: list[Resolution]) -> list[Any]:
        """The conversation to hand Agno. In a crash resume (from message ``settled``):
        the dead attempt's cut-off reply marked and left out, calls it left without a
        result executed now (after asking about any in doubt), and confirmed calls of a
        paused run it had not answered executed (rejected ones answered); in a
        continuation, the calls a person answered a question about."""
        cut = await mark_cut_off(ctx, settled) if settled is not None else None
        owed = await owed_calls(ctx, KEY_PREFIX, settled)
        for call in owed:
            await answer_placeholder(ctx, call["id"], await execute(agent, call))
        await self._settle(ctx, agent, answers)
        if settled is not None:
            log.info("run %s: resuming from message %d (%d calls owed, reply cut off: %s)",
                     ctx.run_id, settled, len(owed), cut is not None)
        note_settled(ctx, SESSION_KEY)
        # A placeholder left is the engine's word for a call no attempt answers.
        return to_agno(ctx.messages)

    async def _settle(self, ctx: RunContext, agent: Any, answers: list[Resolution]) -> None:
        """Answer, in the thread, the calls of a paused run that a crashed continuation
        left without a result: those a person answered (run through the journal, so at
        most once, or rejected, as Agno would have) and those a person was asked about
        because the crash cut them off (the journal applies their answer)."""
        answered = {m.get("toolCallId") for m in ctx.messages if m.get("role") == "tool"}
        calls = {c["id"]: c for m in ctx.messages for c in m.get("toolCalls") or ()}
        todo: list[tuple[dict[str, Any], Any, str | None]] = []  # call, args, rejection
        for answer in answers:
            todo.append((calls.get(str(answer.interrupt.get("toolCallId"))) or {},
                         answer.edited_args, _rejection(answer)))
        for r in ctx.resume:
            if in_doubt.is_question(r.interrupt):
                todo.append((calls.get(str(r.interrupt.get("toolCallId"))) or {},
                             (r.interrupt.get("metadata") or {}).get("args"), None))
        for call, args, rejected in todo:
            if not call or call["id"] in answered:
                continue
            answered.add(call["id"])
            if args is not None:  # the arguments the call ran with (edited by a person)
                call = {**call, "function": {**call["function"], "arguments": json.dumps(args)}}
            content = rejected if rejected is not None else await execute(agent, call)
            await ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": ctx.new_id("tool"),
                            "toolCallId": call["id"], "role": "tool", "content": content})
        # Agno's paused run is over: it is not kept.
        agent.db.delete_runs([str((a.interrupt.get("metadata") or {}).get("runId"))
                              for a in answers])


def _client_tools(ctx: RunContext) -> list[Any]:
    """The tools the client runs itself (AG-UI front-end tools) as Agno's external ones:
    the model may call them, and the run ends with the call for the client to answer."""
    return [Function(name=t.name, description=t.description, external_execution=True,
                     parameters=t.parameters or {"type": "object", "properties": {}},
                     external_execution_silent=True) for t in ctx.input.tools or ()]


def _rejection(answer: Resolution) -> str | None:
    """None for a confirmed call; for a rejected one, what Agno tells the model: the
    person's reason, or its own words (``agent._tools.reject_tool_call``)."""
    if answer.approved:
        return None
    return answer.reason or REJECTED


HOST = AgnoHost


def factory(settings: Any = None) -> AgnoHost:
    """``--agent NAME=outlast.agents.agno:factory`` with ``OUTLAST_AGNO_AGENT=module:attr``
    naming an Agno ``Agent``, or a function of the settings returning one."""
    _require()
    return AgnoHost(load_target("OUTLAST_AGNO_AGENT", "Agno host", serves, settings))
