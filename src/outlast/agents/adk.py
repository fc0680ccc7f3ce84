"""Google ADK host: an ADK ``LlmAgent`` runs durably as an outlast agent.

The agent runs under ADK's own ``Runner`` (``StreamingMode.SSE``): its model events
become AG-UI text and tool-call events, its function responses tool results (ADK's
``{"result": ...}`` wrapper of a plain value taken off). Outlast adds:

- the ADK session in the thread: a session service (``ThreadSessions``) keeps it in the
  thread's private ``session_state``, saved with every boundary snapshot, so a new
  process continues the conversation; messages the thread gained since join it;
- tools journaled (G9): every tool runs as an effect keyed by the model's call id;
- ``require_confirmation`` as a durable interrupt (G7): ADK ends its invocation with a
  long-running ``adk_request_confirmation`` call, kept in the session; the answer, after
  any restart, goes back as the ``FunctionResponse`` ADK expects, and ADK runs the tool
  or tells the model in its own words (and the person's reason) that it was rejected.
  ADK's stand-in result for the waiting call is never shown (one result per call);
  edited arguments are refused (ADK confirms a call only as the model made it);
- crash resume (G8) from the session at the last boundary: owed calls run through the
  journal (a call in doubt asked about first), a cut reply is marked and left out;
- cancel through ADK's ``abort_signal``; every response's tokens on the final event.

ADK's OpenTelemetry spans go to the process's tracer provider (none unless outlast's
tracing is on); nothing else leaves the process. Install ``pip install "outlast[adk]"``.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import json
import logging
from contextlib import aclosing
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, Resolution, RunContext
from outlast.agents.resume import answer_placeholder, call_args, mark_cut_off, owed_calls
from outlast.agents.target import load_target
from outlast.errors import MissingDependency
from outlast.protocol.content import text_of

try:
    from google.adk.agents import LlmAgent, RunConfig
    from google.adk.agents.run_config import StreamingMode  # type: ignore[attr-defined]
    from google.adk.apps import App
    from google.adk.events import Event
    from google.adk.plugins import BasePlugin
    from google.adk.runners import Runner
    from google.adk.sessions import BaseSessionService, Session
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.function_tool import FunctionTool
    from google.genai import types
except ImportError:  # pragma: no cover - exercised only without the extra
    LlmAgent = None  # type: ignore[assignment, misc]
    BaseSessionService = object  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.adk")

SESSION_KEY = "adk"
KEY_PREFIX = "adk-tool:"  # + the call id: a tool execution's journal key
APPROVAL_KIND = "adk_confirmation"
CONFIRM = "adk_request_confirmation"  # ADK's long-running confirmation call
APP, USER = "outlast", "outlast"
EDITED = ("Not run: the person edited the arguments, and ADK runs a confirmed call only "
          "as the model made it.")
CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "outlast_adk_run", default=None)
"""The run whose agent is executing: its tools journal through it (tasks inherit it)."""


def _require() -> None:
    if LlmAgent is None:
        raise MissingDependency("google-adk", "adk")


def serves(obj: Any) -> bool:
    """True for an ADK ``LlmAgent``, the object this host serves."""
    return LlmAgent is not None and isinstance(obj, LlmAgent)


class ThreadSessions(BaseSessionService):
    """The ADK session of one run's thread, kept in ``store`` (the host's part of the
    thread's ``session_state``): rewritten after every event ADK appends, so it is
    saved with the next boundary snapshot."""

    def __init__(self, store: dict[str, Any]) -> None:
        self.store = store
        saved = store.get("session")
        self.session: Session | None = Session.model_validate(saved) \
            if isinstance(saved, dict) else None

    async def create_session(self, *, app_name: str, user_id: str,
                             state: dict[str, Any] | None = None,
                             session_id: str | None = None) -> Session:
        self.session = Session(app_name=app_name, user_id=user_id, id=session_id or "",
                               state=dict(state or {}))
        self._save()
        return self.session

    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: Any = None) -> Session | None:
        return self.session

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> Any:
        raise NotImplementedError("one thread holds one ADK session")

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self.session = None
        self.store.pop("session", None)

    async def append_event(self, session: Session, event: Event) -> Event:
        event = await super().append_event(session, event)
        if not event.partial:
            self._save()
        return event

    def _save(self) -> None:
        if self.session is not None:
            self.store["session"] = json.loads(self.session.model_dump_json(exclude_none=True))


def journal_tools(agent: Any) -> None:
    """Make every tool of ``agent`` (and of its sub-agents) run as an outlast effect keyed
    by the model's call id while a run of this host executes it (G9); outside such a
    run the tools behave as before. Plain functions become ``FunctionTool``s."""
    _require()
    if isinstance(agent, LlmAgent):
        agent.tools = [_journaled(FunctionTool(t) if callable(t) and not isinstance(
            t, BaseTool) and not hasattr(t, "get_tools") else t) for t in agent.tools]
    for sub in getattr(agent, "sub_agents", None) or ():
        journal_tools(sub)


def _journaled(tool: Any) -> Any:
    if not isinstance(tool, BaseTool) or getattr(tool, "_outlast_journaled", False):
        return tool
    copied = copy.copy(tool)
    run = tool.run_async

    async def run_async(*, args: dict[str, Any], tool_context: Any) -> Any:
        # ADK's confirmation gate stands before this: a call that runs here is confirmed.
        ctx = CURRENT.get()
        call_id = getattr(tool_context, "function_call_id", None)
        if ctx is None or not call_id:
            return await run(args=args, tool_context=tool_context)

        async def invoke() -> Any:
            return to_jsonable_python(await run(args=args, tool_context=tool_context),
                                      fallback=str)

        return await ctx.effect(KEY_PREFIX + call_id, invoke, tool=tool.name,
                                args=dict(args), tool_call_id=call_id)

    object.__setattr__(copied, "run_async", run_async)
    object.__setattr__(copied, "_outlast_journaled", True)
    return copied


@functools.cache
def _reasons() -> Any:
    """An ADK plugin adding the person's reason to ADK's answer for a rejected call."""

    class Reasons(BasePlugin):
        async def after_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                      tool_context: Any, result: Any) -> Any:
            confirmation = getattr(tool_context, "tool_confirmation", None)
            payload = getattr(confirmation, "payload", None)
            reason = payload.get("reason") if isinstance(payload, dict) else None
            if confirmation is None or confirmation.confirmed or not isinstance(
                    reason, str) or not isinstance(result, dict) or "error" not in result:
                return None
            return {**result, "reason": reason}  # ADK's words, then the person's

    return Reasons(name="outlast_rejection_reasons")


def result_text(response: Any) -> str:
    """A function response as the thread shows it: ADK's ``{"result": value}`` wrapper of
    a plain value taken off, anything else as JSON."""
    if isinstance(response, dict) and set(response) == {"result"}:
        response = response["result"]
    if isinstance(response, str):
        return response
    return json.dumps(to_jsonable_python(response, fallback=str), ensure_ascii=False)


class AdkAgent(Agent):
    """Hosts a Google ADK agent: its session in the thread, tools journaled,
    confirmations durable, crash resume from the last boundary."""

    capabilities = Capabilities(
        description="Google ADK agent with its session in the thread, journaled tools and "
                    "durable tool confirmations",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any) -> None:
        _require()
        journal_tools(agent)
        self.agent = agent

    async def run(self, ctx: RunContext) -> Any:
        store = ctx.session_state.setdefault(SESSION_KEY, {})
        sessions = ThreadSessions(store)
        session = sessions.session or await sessions.create_session(
            app_name=APP, user_id=USER, session_id=ctx.thread_id)
        new_message = await self._catch_up(ctx, sessions, session, store)
        runner = Runner(app=App(name=APP, root_agent=self.agent, plugins=[_reasons()]),
                        session_service=sessions)
        relay = _Relay(ctx, store)
        abort = asyncio.Event()
        token = CURRENT.set(ctx)
        try:
            async with aclosing(runner.run_async(
                    user_id=USER, session_id=session.id, new_message=new_message,
                    run_config=RunConfig(streaming_mode=StreamingMode.SSE),
                    abort_signal=abort)) as events:
                async for event in events:
                    await relay.send(event)
        finally:
            abort.set()  # a cancelled run stops ADK's model request too
            CURRENT.reset(token)
            # Failed or cancelled too: the session holds what ADK finished, and a
            # later turn must not add the messages of this one again.
            relay.settle()
        await relay.close()
        if relay.confirmations:
            await ctx.interrupt(*[_approval(c) for c in relay.confirmations])
        return None

    async def _catch_up(self, ctx: RunContext, sessions: ThreadSessions, session: Session,
                        store: dict[str, Any]) -> Any:
        """Bring the session up to the thread; the message to run ADK with (None: go on
        from the session as it is)."""
        held = set(store.get("ids") or ())
        settled = next((i for i, m in enumerate(ctx.messages) if m.get("id") not in held),
                       len(ctx.messages))
        cut = await mark_cut_off(ctx, settled) if ctx.resumed else None
        owed = await owed_calls(ctx, KEY_PREFIX, settled if ctx.resumed else None)
        for call in owed:  # executed now, through the journal: at most once (G9)
            await answer_placeholder(ctx, call["id"], await self._execute(ctx, call))
        if owed or cut:
            log.info("run %s: resuming from message %d (%d calls owed, reply cut off: %s)",
                     ctx.run_id, settled, len(owed), cut is not None)
        new = [m for m in ctx.messages if m.get("id") not in held and m.get("id") != cut
               and (m.get("metadata") or {}).get("finishReason") != "interrupted"]
        # An answer a dead attempt already gave ADK (or whose call has its result) is
        # not given again: ADK would take it as consumed and stop.
        given = {r.id for e in session.events for r in e.get_function_responses()
                 if r.name == CONFIRM}
        results = {m.get("toolCallId") for m in ctx.messages if m.get("role") == "tool"}
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND
                   and r.interrupt["metadata"].get("confirmationId") not in given
                   and r.interrupt.get("toolCallId") not in results]
        last: Any = None
        if answers:
            last = types.Content(role="user", parts=[_confirmation(a) for a in answers])
        elif new and new[-1].get("role") == "user":
            last = _content(new.pop())
        calls = {c["id"]: c for m in ctx.messages for c in m.get("toolCalls") or ()}
        for m in new:
            event = _event(m, self.agent.name, calls, ctx.run_id)
            if event is not None:
                await sessions.append_event(session, event)
        return last

    async def _execute(self, ctx: RunContext, call: dict[str, Any]) -> str:
        """Run one owed call with the agent's own tool, journaled; its result text."""
        name, args = call["function"]["name"], call_args(call)
        tool = next((t for t in getattr(self.agent, "tools", ())
                     if isinstance(t, FunctionTool) and t.name == name), None)

        async def invoke() -> Any:
            if tool is None or not isinstance(args, dict):
                return f"Not run: the agent has no tool named {name!r} taking these arguments."
            if inspect.iscoroutinefunction(tool.func):
                value = await tool.func(**args)
            else:  # off the event loop
                value = await asyncio.to_thread(tool.func, **args)
            return to_jsonable_python(value, fallback=str)

        recorded = await ctx.effect(KEY_PREFIX + call["id"], invoke, tool=name, args=args,
                                    tool_call_id=call["id"])
        return result_text(recorded)


def _content(message: dict[str, Any]) -> Any:
    return types.Content(role="user", parts=[types.Part(text=text_of(message.get("content")))])


def _event(m: dict[str, Any], author: str, calls: dict[str, Any], run_id: str) -> Any:
    """One AG-UI message as the ADK session event that holds it (None: nothing to hold)."""
    role = m.get("role")
    parts: list[Any] = []
    if role in ("user", "system", "developer"):
        author = "user"
        parts.append(types.Part(text=text_of(m.get("content"))))
        content_role = "user"
    elif role == "assistant":
        content_role = "model"
        if m.get("content"):
            parts.append(types.Part(text=text_of(m["content"])))
        for call in m.get("toolCalls") or ():
            args = call_args(call)
            parts.append(types.Part(function_call=types.FunctionCall(
                id=call["id"], name=call["function"]["name"],
                args=args if isinstance(args, dict) else {"arguments": args})))
    elif role == "tool" and m.get("toolCallId") in calls:
        content_role = "user"
        call = calls[m["toolCallId"]]
        parts.append(types.Part(function_response=types.FunctionResponse(
            id=call["id"], name=call["function"]["name"],
            response={"result": text_of(m.get("content"))})))
    if not parts:
        return None
    return Event(author=author, invocation_id=f"outlast-{run_id}",
                 content=types.Content(role=content_role, parts=parts))


def _confirmation(answer: Resolution) -> Any:
    """The ``FunctionResponse`` ADK expects for one answered confirmation."""
    meta = answer.interrupt["metadata"]
    reason = answer.payload.get("reason") if isinstance(answer.payload, dict) else None
    confirmed = answer.approved and answer.edited_args is None
    if answer.approved and not confirmed:
        reason = EDITED
    response: dict[str, Any] = {"confirmed": confirmed}
    if isinstance(reason, str) and reason:
        response["payload"] = {"reason": reason}
    return types.Part(function_response=types.FunctionResponse(
        id=meta["confirmationId"], name=CONFIRM, response=response))


def _approval(call: Any) -> dict[str, Any]:
    """The interrupt that asks a person about one ``adk_request_confirmation`` call."""
    original = (call.args or {}).get("originalFunctionCall") or {}
    name, args = str(original.get("name") or "tool"), original.get("args") or {}
    hint = ((call.args or {}).get("toolConfirmation") or {}).get("hint")
    shown = json.dumps(args, ensure_ascii=False)
    if len(shown) > 300:
        shown = shown[:297] + "..."
    return {
        "id": f"approve-{original.get('id')}", "reason": "tool_call",
        "toolCallId": str(original.get("id")), "message": f"Run {name}({shown})?",
        "responseSchema": {"type": "object", "properties": {
            "approved": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["approved"]},
        "metadata": {"kind": APPROVAL_KIND, "tool": name, "args": args,
                     "confirmationId": call.id, "hint": hint},
    }


# ADK's usage metadata fields, and AG-UI 1.0 TokenUsage's.
_USAGE = {"prompt_token_count": "inputTokens", "candidates_token_count": "outputTokens",
          "total_token_count": "totalTokens", "thoughts_token_count": "reasoningTokens",
          "cached_content_token_count": "cachedInputTokens"}


class _Relay:
    """Turns ADK's events into AG-UI events on the run, noting each boundary."""

    def __init__(self, ctx: RunContext, store: dict[str, Any]) -> None:
        self.ctx = ctx
        self.store = store
        self.reply: str | None = None  # the model response under way (ADK's event id)
        self.text: str | None = None  # the open text message
        self.parent: str | None = None  # this response's text message
        self.calls: list[str] = []  # tool calls open (started, not ended)
        self.unanswered: set[str] = set()
        self.confirmations: list[Any] = []  # ADK's confirmation requests

    def settle(self) -> None:
        """The session holds everything the thread does (a new reply starts, or the run
        ends): what a crash resume restarts from, and what a later run does not add."""
        self.store["run"] = self.ctx.run_id
        self.store["ids"] = [m["id"] for m in self.ctx.messages if m.get("id")]

    async def send(self, event: Any) -> None:
        content = event.content
        parts = list(content.parts or ()) if content is not None else []
        if content is not None and content.role == "model":
            if event.id != self.reply:
                await self._close_text()
                self.reply, self.parent = event.id, None
                if not self.unanswered:
                    self.settle()  # set before the opener: its snapshot is saved first
            if event.partial:
                await self._partial(parts)
            else:
                await self._whole(event, parts)
        for part in parts:
            response = part.function_response
            if response is not None and response.id and response.name != CONFIRM:
                await self._result(event, response)

    async def _partial(self, parts: list[Any]) -> None:
        for part in parts:
            if part.text and not part.thought:
                await self._open_text()
                await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                     "delta": part.text})
            elif part.function_call is not None and part.function_call.id:
                await self._start_call(part.function_call)

    async def _whole(self, event: Any, parts: list[Any]) -> None:
        """The final event of a model response: what the stream did not show, shown."""
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if text and self.parent is None:  # a response that was not streamed
            await self._open_text()
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": text})
        await self._close_text()
        for part in parts:
            call = part.function_call
            if call is None or not call.id:
                continue
            if call.name == CONFIRM:
                self.confirmations.append(call)
                continue
            await self._start_call(call)
            if call.id in self.calls:
                self.calls.remove(call.id)
                await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call.id,
                                     "delta": json.dumps(call.args or {}, ensure_ascii=False)})
                await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call.id})
        usage = event.usage_metadata
        counts = {wire: value for key, wire in _USAGE.items()
                  if isinstance(value := getattr(usage, key, None), int) and value > 0}
        if counts:
            self.ctx.record_usage(counts)

    async def _start_call(self, call: Any) -> None:
        if call.id in self.calls or call.id in self.unanswered:
            return
        await self._close_text()
        start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call.id,
                                 "toolCallName": call.name or "tool"}
        if self.parent is not None:
            start["parentMessageId"] = self.parent
        await self.ctx.emit(start)
        self.calls.append(call.id)
        self.unanswered.add(call.id)

    async def _result(self, event: Any, response: Any) -> None:
        call = str(response.id)
        if call in (event.actions.requested_tool_confirmations or {}):
            return  # ADK's stand-in while a person decides: the real result comes later
        if call in self.calls:
            self.calls.remove(call)
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.unanswered.discard(call)
        content = result_text(response.response)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("result"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def _open_text(self) -> None:
        if self.text is None:
            self.text = self.parent = str(self.reply or self.ctx.new_id("msg"))
            await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                 "role": "assistant"})

    async def _close_text(self) -> None:
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})

    async def close(self) -> None:
        await self._close_text()
        for call in self.calls:
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.calls = []


def factory(settings: Any = None) -> AdkAgent:
    """``--agent NAME=outlast.agents.adk:factory`` with ``OUTLAST_ADK_AGENT=module:attr``
    naming an ADK ``LlmAgent``, or a function of the settings returning one."""
    _require()
    return AdkAgent(load_target("OUTLAST_ADK_AGENT", "ADK host", serves, settings))


HOST = AdkAgent
