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
- Agno's telemetry is turned off for every run.

Install with ``pip install "outlast[agno]"``.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, AgentError, Capabilities, Resolution, RunContext, in_doubt
from outlast.agents.resume import (
    answer_placeholder,
    call_args,
    mark_cut_off,
    owed_calls,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency
from outlast.protocol.content import text_of

try:
    from agno.agent import Agent as AgnoAgent
    from agno.agent._tools import parse_tools
    from agno.db.base import SessionType
    from agno.db.in_memory import InMemoryDb
    from agno.models.message import Message
    from agno.models.response import ToolExecution
    from agno.session.agent import AgentSession
except ImportError:  # pragma: no cover - exercised only without the extra
    AgnoAgent = None  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.agno")

SESSION_KEY = "agno"
KEY_PREFIX = "agno-tool:"  # + the call id: a tool execution's journal key
APPROVAL_KIND = "agno_confirmation"
REJECTED = "Function call was rejected by the user"  # Agno's words without a reason
_RECORD = frozenset({"status", "result", "error"})  # a journaled tool outcome's keys
_TRANSIENT = frozenset({"current_session_id", "current_user_id", "current_run_id"})
_USAGE = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",  # AG-UI: Agno
          "reasoningTokens": "reasoning_tokens", "cachedInputTokens": "cache_read_tokens"}


def _require() -> Any:
    if AgnoAgent is None:
        raise MissingDependency("agno", "agno")
    return AgnoAgent


def serves(obj: Any) -> bool:
    """True for an Agno ``Agent`` (the object this host takes)."""
    return AgnoAgent is not None and isinstance(obj, AgnoAgent)


def to_agno(messages: list[dict[str, Any]]) -> list[Any]:
    """AG-UI messages as Agno messages (text, tool calls, tool results)."""
    out: list[Any] = []
    for m in messages:
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


def _text(value: Any) -> str:
    """A tool's result as the model is shown it."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)


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
        model = copy.copy(self.agent.model)
        if model is None:
            raise AgentError("the Agno agent has no model", code="agent_misconfigured")
        model.arun_function_call = _journaled(ctx, model.arun_function_call, failures)
        return self.agent.deep_copy(update={
            "model": model, "db": store.db, "telemetry": False,
            "add_history_to_context": False})

    async def run(self, ctx: RunContext) -> Any:
        _require()
        store = _Store(ctx)
        relay = _Relay(ctx, store)
        agent = self._copy(ctx, store, relay.failures)
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND]
        saved = store.state()
        crashed = ctx.resumed and saved.get("run") == ctx.run_id
        stream = await self._continue(ctx, agent, answers, relay) \
            if answers and not crashed else None
        if stream is None:
            # A continuation that crashed after a boundary goes on from it, from the thread
            # (the calls a person answered settled first), not from Agno's paused run; so
            # does one whose paused run the thread's session does not hold.
            settled = int(saved.get("settled") or 0) if crashed else None
            history = await self._history(ctx, agent, settled, answers)
            # The thread's AG-UI state goes in as the run's session_state, as Agno's own
            # AGUI interface passes it (it takes precedence over the stored one).
            shared = dict(ctx.state) if isinstance(ctx.state, dict) and ctx.state else None
            stream = agent.arun(history, stream=True, stream_events=True, session_state=shared,
                                session_id=ctx.thread_id, run_id=ctx.run_id)
        async for event in stream:
            await relay.send(event)
        await relay.close()
        await relay.share()
        store.save()
        if relay.interrupts:
            await ctx.interrupt(*relay.interrupts)
        return relay.result

    async def _continue(self, ctx: RunContext, agent: Any, answers: list[Resolution],
                        relay: _Relay) -> Any:
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
        ctx.session_state.setdefault(SESSION_KEY, {}).update(
            run=ctx.run_id, settled=len(ctx.messages))
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
            await answer_placeholder(ctx, call["id"], await _execute(agent, call))
        await self._settle(ctx, agent, answers)
        if settled is not None:
            log.info("run %s: resuming from message %d (%d calls owed, reply cut off: %s)",
                     ctx.run_id, settled, len(owed), cut is not None)
        ctx.session_state.setdefault(SESSION_KEY, {}).update(
            run=ctx.run_id, settled=len(ctx.messages))
        # A placeholder left is the engine's word for a call no attempt answers.
        return to_agno([m for m in ctx.messages if m.get("id") != cut])

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
            content = rejected if rejected is not None else await _execute(agent, call)
            await ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": ctx.new_id("tool"),
                            "toolCallId": call["id"], "role": "tool", "content": content})
        # Agno's paused run is over: it is not kept.
        agent.db.delete_runs([str((a.interrupt.get("metadata") or {}).get("runId"))
                              for a in answers])


def _rejection(answer: Resolution) -> str | None:
    """None for a confirmed call; for a rejected one, what Agno tells the model: the
    person's reason, or its own words (``agent._tools.reject_tool_call``)."""
    if answer.approved:
        return None
    reason = answer.payload.get("reason") if isinstance(answer.payload, dict) else None
    return str(reason) if reason else REJECTED


def _journaled(ctx: RunContext, run_call: Any, failures: list[AgentError]) -> Any:
    """Agno's ``Model.arun_function_call`` for one run, each call an outlast effect. A
    failure of the journal's (a person said an effect in doubt must not run) is kept in
    ``failures``: Agno reports it only as its run's error."""

    async def arun_function_call(fc: Any) -> Any:
        from agno.tools.function import FunctionExecutionResult
        from agno.utils.timer import Timer

        ran: Any = None

        async def invoke() -> Any:
            nonlocal ran
            ran = await run_call(fc)
            outcome = ran[3]
            return {"status": outcome.status, "error": fc.error or outcome.error,
                    "result": to_jsonable_python(fc.result, fallback=str)}

        try:
            recorded = await ctx.effect(KEY_PREFIX + str(fc.call_id), invoke,
                                        tool=fc.function.name, args=fc.arguments,
                                        tool_call_id=str(fc.call_id))
        except AgentError as exc:
            failures.append(exc)
            raise
        if ran is not None:
            return ran
        if not (isinstance(recorded, dict) and set(recorded) == _RECORD):
            recorded = {"status": "success", "result": recorded, "error": None}
        fc.result, fc.error = recorded["result"], recorded["error"]
        outcome = FunctionExecutionResult(status=recorded["status"], result=fc.result,
                                          error=fc.error)
        return recorded["status"] == "success", Timer(), fc, outcome  # type: ignore[no-untyped-call]

    return arun_function_call


async def _execute(agent: Any, call: dict[str, Any]) -> str:
    """One call a crashed attempt left without a result, run with the agent's own tool
    (through the journal); its result as the model is shown it."""
    name = call["function"]["name"]
    functions = {f.name: f for f in parse_tools(agent, tools=list(agent.tools or ()),
                                                model=agent.model, async_mode=True)
                 if not isinstance(f, dict)}
    if name not in functions:
        return f"Not run: the agent has no tool named {name!r}."
    fc = agent.model.get_function_call_to_run_from_tool_execution(
        ToolExecution(tool_call_id=call["id"], tool_name=name, tool_args=call_args(call)),
        functions)
    _, _, fc, outcome = await agent.model.arun_function_call(fc)
    return _text(fc.result if outcome.status == "success" else fc.error or outcome.error)


class _Relay:
    """Turns Agno's run events into AG-UI events on the run."""

    def __init__(self, ctx: RunContext, store: _Store) -> None:
        self.ctx = ctx
        self.store = store
        self.text: str | None = None  # the open text message
        self.parent: str | None = None  # the current model response's message
        self.unanswered: set[str] = set()
        self.shown = {c["id"] for m in ctx.messages for c in m.get("toolCalls") or ()}
        self.rejected: dict[str, str] = {}  # a paused run's rejected calls: their result
        self.interrupts: list[dict[str, Any]] = []
        self.failures: list[AgentError] = []  # the journal's, inside Agno's run
        self.result: Any = None
        self.session_state: Any = None  # Agno's, as the run ended

    async def send(self, event: Any) -> None:
        kind = getattr(event, "event", None)
        if kind == "RunContent":
            content = getattr(event, "content", None)
            if content:
                await self._say(content if isinstance(content, str) else _text(content))
        elif kind == "ModelRequestStarted":
            await self.close()
            self.parent = None
        elif kind == "ModelRequestCompleted":
            await self.close()
            self._usage(event)
        elif kind == "ToolCallStarted" and event.tool is not None:
            await self._call(event.tool)
        elif kind == "ToolCallCompleted" and event.tool is not None:
            await self._result(str(event.tool.tool_call_id), _text(event.tool.result))
        elif kind == "RunContinued":
            for call, said in list(self.rejected.items()):
                await self._result(call, said)
        elif kind == "RunPaused":
            await self.close()
            for req in getattr(event, "active_requirements", None) or ():
                await self._pause(event, req)
        elif kind == "RunError":
            if self.failures:
                raise self.failures[0]
            raise AgentError(str(getattr(event, "content", None) or "the Agno run failed"),
                             code=str(getattr(event, "error_type", None) or "agent_error"))
        elif kind == "RunCancelled":
            raise AgentError("the Agno run was cancelled", code="agent_cancelled")
        elif kind == "RunCompleted":
            content = getattr(event, "content", None)
            self.result = to_jsonable_python(content, fallback=str)
            self.session_state = getattr(event, "session_state", None)

    def _boundary(self) -> None:
        """Before an opener with nothing open: the place a crash resume restarts from."""
        if self.text is None and not self.unanswered:
            self.store.state().update(run=self.ctx.run_id, settled=len(self.ctx.messages))

    async def _say(self, delta: str) -> None:
        if self.text is None:
            self._boundary()
            self.text = self.parent = self.ctx.new_id("msg")
            await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                 "role": "assistant"})
        await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                             "delta": delta})

    async def _call(self, tool: Any) -> None:
        call = str(tool.tool_call_id)
        if call in self.shown:
            return
        await self.close()
        self._boundary()
        self.shown.add(call)
        self.unanswered.add(call)
        if self.parent is None:
            self.parent = self.ctx.new_id("msg")
        await self.ctx.emit({"type": "TOOL_CALL_START", "toolCallId": call,
                             "toolCallName": str(tool.tool_name),
                             "parentMessageId": self.parent})
        await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call,
                             "delta": json.dumps(tool.tool_args or {}, ensure_ascii=False)})
        await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})

    async def _result(self, call: str, content: str) -> None:
        self.unanswered.discard(call)
        self.rejected.pop(call, None)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("tool"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def _pause(self, event: Any, req: Any) -> None:
        tool = req.tool_execution
        if tool is None or not req.needs_confirmation:
            raise AgentError("the Agno run paused for input this host does not take (only "
                             "tool confirmations)", code="agno_unsupported_pause")
        await self._call(tool)
        self.unanswered.discard(str(tool.tool_call_id))  # the continuation answers it
        args = to_jsonable_python(tool.tool_args or {}, fallback=str)
        shown = json.dumps(args, ensure_ascii=False)
        if len(shown) > 300:
            shown = shown[:297] + "..."
        self.interrupts.append({
            "id": f"approve-{tool.tool_call_id}", "reason": "tool_call",
            "toolCallId": str(tool.tool_call_id),
            "message": f"Run {tool.tool_name}({shown})?",
            "responseSchema": {"type": "object", "properties": {
                "approved": {"type": "boolean"}, "reason": {"type": "string"},
                "editedArgs": {"type": "object"}}, "required": ["approved"]},
            "metadata": {"kind": APPROVAL_KIND, "tool": tool.tool_name, "args": args,
                         "runId": getattr(event, "run_id", None), "requirementId": req.id}})

    def _usage(self, event: Any) -> None:
        counted: dict[str, Any] = {wire: v for wire, name in _USAGE.items()
                                   if isinstance(v := getattr(event, name, 0), int) and v > 0}
        if counted:
            counted["totalTokens"] = counted.get("inputTokens", 0) + \
                counted.get("outputTokens", 0)
            counted.update({k: v for k, v in (("model", getattr(event, "model", None)), (
                "provider", getattr(event, "model_provider", None))) if isinstance(v, str) and v})
            self.ctx.record_usage(counted)

    async def share(self) -> None:
        """Agno's ``session_state`` as the run left it becomes the thread's AG-UI state
        when it differs, as Agno's own AGUI interface shows it (without the ids Agno
        adds for the run)."""
        if not isinstance(self.session_state, dict):
            return
        state = to_jsonable_python({k: v for k, v in self.session_state.items()
                                    if k not in _TRANSIENT}, fallback=str)
        if state != (self.ctx.state if self.ctx.state is not None else {}):
            await self.ctx.emit({"type": "STATE_SNAPSHOT", "snapshot": state})

    async def close(self) -> None:
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})


HOST = AgnoHost


def factory(settings: Any = None) -> AgnoHost:
    """``--agent NAME=outlast.agents.agno:factory`` with ``OUTLAST_AGNO_AGENT=module:attr``
    naming an Agno ``Agent``, or a function of the settings returning one."""
    _require()
    return AgnoHost(load_target("OUTLAST_AGNO_AGENT", "Agno host", serves, settings))
