"""Microsoft Agent Framework adapter: a MAF agent's streaming run as AG-UI events.

Every tool the MAF agent executes runs as a journaled effect keyed by the
model's call id (G9): a retry or a replay of the same run reuses the recorded
result instead of calling the tool again. Install with
``pip install "outlast[maf]"``.

Tools whose approval mode requires approval become durable interrupts (G7): the
framework's ``function_approval_request`` ends the run with an interrupt that
stores the request; the person's answer comes back in the continuation run's
``ctx.resume`` and is turned into the framework's ``function_approval_response``.
The stored interrupt is the authority: the response is built from the request it
holds (the exact call the person saw), the client supplies only the verdict, and
the engine accepts answers only to pending interrupts. The framework's own
binding stays on: its approval state is kept in the thread's private
``session_state`` and handed back in an ``AgentSession``, so it checks the
response against the request it recorded. Edited arguments are refused (the
call is not run): the framework binds an approval to the call as recorded.

A crash resume (G8) runs the agent again on the thread: a reply the dead attempt was
cutting off is kept, marked ``finishReason: interrupted``, and never sent back to the
model (``outlast.agents.resume``). A call it was executing is in doubt: the resumed
attempt asks a person whether it happened (``outlast.agent.in_doubt``), and the
continuation runs it again, takes the person's result, or fails, as they answered.
"""

from __future__ import annotations

import json
from typing import Any

from outlast.agent import Agent, Capabilities, Resolution, RunContext
from outlast.agents.calls import approval
from outlast.agents.resume import (
    answer_placeholder,
    call_args,
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
    import agent_framework as af
except ImportError:  # pragma: no cover - exercised only without the extra
    af = None  # type: ignore[assignment]


APPROVAL_KIND = "tool_approval"
SESSION_KEY = "maf"
KEY_PREFIX = "maf-tool:"  # + the call id: a tool invocation's journal key
_APPROVAL_STATE = "tool_approval"  # the framework's key in AgentSession.state


def _require() -> Any:
    if af is None:
        raise MissingDependency("agent-framework-core", "maf")
    return af


def to_maf(messages: list[dict[str, Any]]) -> list[Any]:
    """AG-UI messages as MAF messages (text, function calls, function results);
    unfinished replies are not sent back to the model."""
    lib = _require()
    out: list[Any] = []
    for m in finished(messages):
        role = m.get("role")
        if role in ("user", "system", "developer"):
            out.append(lib.Message("system" if role == "developer" else role,
                                   [text_of(m.get("content"))]))
        elif role == "assistant":
            contents: list[Any] = []
            if m.get("content"):
                contents.append(lib.Content("text", text=text_of(m["content"])))
            for call in m.get("toolCalls") or ():
                contents.append(lib.Content("function_call", call_id=call["id"],
                                            name=call["function"]["name"],
                                            arguments=call["function"].get("arguments") or "{}"))
            if contents:
                out.append(lib.Message("assistant", contents))
        elif role == "tool":
            out.append(lib.Message("tool", [lib.Content(
                "function_result", call_id=m.get("toolCallId"), result=text_of(m.get("content")))]))
    return out


def _resulttext_of(result: Any) -> str:
    if isinstance(result, list):
        parts = [getattr(c, "text", None) or "" for c in result]
        if any(parts):
            return "".join(parts)
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, default=str)
    except TypeError:
        return str(result)


def _journal(ctx: RunContext) -> Any:
    lib = _require()

    class Journal(lib.FunctionMiddleware):  # type: ignore[misc, name-defined]
        """Runs each tool invocation through ``ctx.effect`` (G9)."""

        async def process(self, context: Any, call_next: Any) -> None:
            call_id = (context.metadata or {}).get("call_id") or \
                f"{context.function.name}:{json.dumps(dict(context.arguments), sort_keys=True)}"
            ran = False

            async def invoke() -> Any:
                nonlocal ran
                ran = True
                await call_next()
                result = context.result
                if isinstance(result, list):
                    return [c.to_dict() for c in result]
                return result

            recorded = await ctx.effect(KEY_PREFIX + call_id, invoke,
                                        tool=context.function.name,
                                        args=dict(context.arguments or {}),
                                        tool_call_id=call_id)
            if not ran:
                context.result = ([lib.Content.from_dict(d) for d in recorded]
                                  if isinstance(recorded, list) else recorded)

    return Journal()


class MafAgent(Agent):
    """Wraps an ``agent_framework`` agent (anything with ``run(messages, stream=True)``)."""

    capabilities = Capabilities(
        description="Microsoft Agent Framework agent with journaled tool calls and "
                    "durable tool approvals",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any) -> None:
        _require()
        self.agent = agent

    def _session(self, ctx: RunContext, answers: list[Resolution]) -> tuple[Any, list[Any]]:
        """A session holding the framework's approval state, and the responses to add."""
        lib = _require()
        session = lib.AgentSession()
        if not answers:
            return session, []
        saved = (ctx.session_state.get(SESSION_KEY) or {}).get("toolApproval")
        requests = [a.interrupt["metadata"]["request"] for a in answers]
        session.state[_APPROVAL_STATE] = json.loads(json.dumps(saved)) if isinstance(
            saved, dict) and saved else {"pending_approval_requests": requests}
        responses = []
        for answer in answers:
            request = lib.Content.from_dict(answer.interrupt["metadata"]["request"])
            # An edited call is not the call the framework recorded: refused, not run.
            approved = answer.approved and answer.edited_args is None
            responses.append(request.to_function_approval_response(approved=approved))
        return session, responses

    async def _settle_doubts(self, ctx: RunContext) -> None:
        """A crash resume asks about the calls the dead attempt left in doubt (ending
        the run); a continuation executes those a person answered about, through the
        journal (which applies each answer), and puts the result in place."""
        owed = await owed_calls(ctx, KEY_PREFIX, None)
        if ctx.resumed:
            return  # asked about any in doubt; the others keep the engine's result
        lib = _require()
        options = getattr(self.agent, "default_options", None) or {}
        tools = {t.name: t for t in options.get("tools") or () if hasattr(t, "invoke")}
        for call in owed:
            name, args = call["function"]["name"], call_args(call)
            invoke = _invoker(tools.get(name), name, args, call["id"])
            recorded = await ctx.effect(KEY_PREFIX + call["id"], invoke, tool=name, args=args,
                                        tool_call_id=call["id"])
            if isinstance(recorded, list) and all(isinstance(d, dict) for d in recorded):
                recorded = [lib.Content.from_dict(d) for d in recorded]
            await answer_placeholder(ctx, call["id"], _resulttext_of(recorded))

    async def run(self, ctx: RunContext) -> None:
        lib = _require()
        settled = settled_at(ctx, SESSION_KEY)
        if settled is not None:
            await mark_cut_off(ctx, settled)  # and so left out: the model answers again
        await self._settle_doubts(ctx)
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND
                   and isinstance((r.interrupt.get("metadata") or {}).get("request"), dict)]
        session, responses = self._session(ctx, answers)
        messages = to_maf(ctx.messages)
        if responses:
            messages.append(lib.Message("user", responses))
        stream = self.agent.run(messages, stream=True, session=session,
                                middleware=[_journal(ctx)])
        relay = _Relay(ctx)
        async for update in stream:
            for c in update.contents or ():
                await relay.send(c, getattr(update, "model_id", None))
        await relay.close()
        if relay.approvals:
            state = session.state.get(_APPROVAL_STATE)
            ctx.session_state[SESSION_KEY] = {
                "toolApproval": json.loads(json.dumps(state, default=str))
                if isinstance(state, dict) else None}
            await ctx.interrupt(*[_approval(req) for req in relay.approvals])


class _Relay:
    """Turns the framework's streamed contents into AG-UI events on the run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.text: str | None = None  # the open text message
        self.parent: str | None = None  # the assistant message the next calls belong to
        self.calls: list[str] = []  # tool calls open (started, not ended)
        self.last_call: str | None = None  # the call a piece without an id continues
        self.approvals: list[Any] = []  # the framework's approval requests
        self.usage = RunningUsage()

    async def send(self, c: Any, model: Any) -> None:
        """One content of a streamed update (``model``: the update's model id)."""
        if c.type == "text" and c.text:
            if self.text is None:
                self._boundary()
                self.text = self.parent = self.ctx.new_id("msg")
                await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                     "role": "assistant"})
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": c.text})
        elif c.type == "function_call":
            await self._call(c)
        elif c.type == "function_result" and c.call_id:
            if c.call_id in self.calls:
                self.calls.remove(c.call_id)
                await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": c.call_id})
            await self.ctx.emit({"type": "TOOL_CALL_RESULT",
                                 "messageId": self.ctx.new_id("result"),
                                 "toolCallId": c.call_id, "role": "tool",
                                 "content": _resulttext_of(c.result)})
            self.parent = None  # what follows a tool result is a new assistant message
        elif c.type == "function_approval_request" and c.function_call is not None:
            self.approvals.append(c)
        elif c.type == "usage":
            counted = self.usage.call(c.usage_details, model)
            if counted is not None:
                self.ctx.record_usage(counted)

    async def _call(self, c: Any) -> None:
        """A piece of a function call: its start (closing the text before it), its
        arguments."""
        call_id = c.call_id or self.last_call
        if call_id is None:
            return
        if self.text is not None:
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": self.text})
            self.text = None
        if call_id not in self.calls:
            self._boundary()
            self.calls.append(call_id)
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call_id,
                                     "toolCallName": c.name or "tool"}
            if self.parent is not None:
                start["parentMessageId"] = self.parent
            await self.ctx.emit(start)
        self.last_call = call_id
        args = c.arguments
        if args:
            await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call_id,
                                 "delta": args if isinstance(args, str) else json.dumps(args)})

    def _boundary(self) -> None:
        """Before an opener with nothing open: the place a crash resume restarts from
        (G5, G8), noted as the snapshot is saved just before it."""
        if self.text is None and not self.calls:
            note_settled(self.ctx, SESSION_KEY)

    async def close(self) -> None:
        """The end of the stream: the open text closed, and the calls left open (front-end
        tools: the client answers them, AG-UI)."""
        if self.text is not None:
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": self.text})
        for call_id in self.calls:
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call_id})

def _invoker(tool: Any, name: str, args: Any, call_id: str) -> Any:
    """Runs ``tool`` for one call outside the framework's loop, its result journaled."""

    async def invoke() -> Any:
        if tool is None:
            return f"Not run: the agent has no tool named {name!r}."
        result = await tool.invoke(arguments=args, tool_call_id=call_id)
        return [c.to_dict() for c in result] if isinstance(result, list) else result

    return invoke


# The framework's UsageDetails keys, and AG-UI 1.0 TokenUsage's.
_USAGE_KEYS = {"input_token_count": "inputTokens", "output_token_count": "outputTokens",
               "total_token_count": "totalTokens",
               "reasoning_output_token_count": "reasoningTokens",
               "cache_read_input_token_count": "cachedInputTokens",
               "cache_creation_input_token_count": "cacheWriteInputTokens"}


class RunningUsage:
    """The framework reports usage as running totals over its tool loop (each ``usage``
    content sums every model call so far): what one call added is the difference."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def call(self, details: Any, model: Any = None) -> dict[str, Any] | None:
        """The AG-UI ``TokenUsage`` of the calls since the last report (None if none)."""
        if not isinstance(details, dict):
            return None
        totals = {wire: value for key, wire in _USAGE_KEYS.items()
                  if isinstance(value := details.get(key), int)
                  and not isinstance(value, bool) and value >= 0}
        if any(value < self.seen.get(wire, 0) for wire, value in totals.items()):
            self.seen = {}  # a new loop started counting again
        counts = {wire: value - self.seen.get(wire, 0) for wire, value in totals.items()}
        self.seen.update(totals)
        if not any(counts.values()):
            return None
        return {**counts, "model": model} if isinstance(model, str) and model else counts


def _approval(request: Any) -> dict[str, Any]:
    """The interrupt that asks a person about one framework approval request."""
    call = request.function_call
    raw = call.arguments
    try:
        args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except ValueError:
        args = {"arguments": raw}
    return approval(call.call_id, call.name, args, APPROVAL_KIND, reason=False,
                    request=request.to_dict())


HOST = MafAgent


def serves(obj: Any) -> bool:
    """True for an Agent Framework agent (anything with ``run``, as ``SupportsAgentRun``)."""
    return af is not None and callable(getattr(obj, "run", None))


def factory(settings: Any = None) -> MafAgent:
    """``--agent NAME=outlast.agents.maf:factory`` with ``OUTLAST_MAF_AGENT=module:attr``
    naming a MAF agent, or a function of the settings returning one."""
    return MafAgent(load_target("OUTLAST_MAF_AGENT", "MAF adapter",
                                serves, settings))
