"""OpenAI Agents SDK host: an ``agents.Agent`` runs durably as an outlast agent.

The SDK's streamed run (``Runner.run_streamed``) becomes AG-UI: its response text,
reasoning and function-call items become text, reasoning and tool-call events, tool
outputs become tool results, and each agent that takes the turn (the first one, then
every handoff) is an AG-UI step named after it. Outlast adds:

- every function tool runs as a journaled effect keyed by the model's call id (G9);
- a tool with ``needs_approval`` ends the run with an outlast interrupt (G7); the SDK's
  own run state (``RunResult.to_state()``) is kept in the thread's private
  ``session_state``, so an answer given after a restart approves or rejects the call in
  the same SDK run, which then goes on;
- a crash resume (G8) restarts the SDK run from the conversation as of the last
  boundary: calls the dead attempt left without a result are answered through the
  journal, and a reply it was cutting off is kept, marked ``interrupted``, and not sent
  to the model;
- every model response's tokens count toward the run's final event (AG-UI 1.0 usage).

The SDK exports traces to OpenAI by default; that is the application's choice to make
(``agents.set_tracing_disabled`` or a trace processor of its own), not the host's.
Install with ``pip install "outlast[openai-agents]"``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, RunContext
from outlast.agents.calls import approval, result_text
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
    import agents as sdk
    from agents.tool_context import ToolContext
except ImportError:  # pragma: no cover - exercised only without the extra
    sdk = None  # type: ignore[assignment]

log = logging.getLogger("outlast.agents.openai_agents")

SESSION_KEY = "openai_agents"
KEY_PREFIX = "openai-agents-tool:"  # + the call id: a tool execution's journal key
APPROVAL_KIND = "openai_agents_approval"


def _require() -> Any:
    if sdk is None:
        raise MissingDependency("openai-agents", "openai-agents")
    return sdk


def to_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI messages as the SDK's input items (Responses-style); unfinished replies are
    not sent back to the model."""
    items: list[dict[str, Any]] = []
    for m in finished(messages):
        role = m.get("role")
        if role in ("user", "system", "developer"):
            items.append({"role": role, "content": text_of(m.get("content"))})
        elif role == "assistant":
            if m.get("content"):
                items.append({"role": "assistant", "content": text_of(m["content"])})
            for call in m.get("toolCalls") or ():
                items.append({"type": "function_call", "call_id": call["id"],
                              "name": call["function"]["name"],
                              "arguments": call["function"].get("arguments") or "{}"})
        elif role == "tool" and m.get("toolCallId"):
            items.append({"type": "function_call_output", "call_id": m["toolCallId"],
                          "output": text_of(m.get("content"))})
    return items


def journaled(agent: Any, ctx: RunContext, seen: dict[int, Any] | None = None) -> Any:
    """A copy of ``agent`` (and of the agents it hands off to) whose function tools run
    as outlast effects keyed by the model's call id (G9)."""
    lib = _require()
    seen = {} if seen is None else seen
    if id(agent) in seen:
        return seen[id(agent)]
    copy = agent.clone()
    seen[id(agent)] = copy
    copy.tools = [_journal_tool(t, ctx) if isinstance(t, lib.FunctionTool) else t
                  for t in agent.tools]
    copy.handoffs = [journaled(h, ctx, seen) if isinstance(h, lib.Agent) else h
                     for h in agent.handoffs]
    return copy


def _journal_tool(tool: Any, ctx: RunContext) -> Any:
    invoke = tool.on_invoke_tool

    async def on_invoke(tool_ctx: Any, arguments: str) -> Any:
        async def run() -> Any:
            return to_jsonable_python(await invoke(tool_ctx, arguments), fallback=str)

        return await ctx.effect(KEY_PREFIX + tool_ctx.tool_call_id, run, tool=tool.name,
                                args=call_args({"function": {"arguments": arguments}}),
                                tool_call_id=tool_ctx.tool_call_id)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke)


class OpenAIAgentsAgent(Agent):
    """Hosts an OpenAI Agents SDK ``Agent``: tools journaled, approvals durable (with the
    SDK's own run state), handoffs as steps, crash resume from the last boundary."""

    capabilities = Capabilities(
        description="OpenAI Agents SDK agent with journaled tools, durable approvals and "
                    "handoffs shown as steps",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any, *, max_turns: int = 10) -> None:
        _require()
        self.agent = agent
        self.max_turns = max_turns

    async def run(self, ctx: RunContext) -> Any:
        lib = _require()
        agent = journaled(self.agent, ctx)
        saved = ctx.session_state.get(SESSION_KEY)
        saved = saved if isinstance(saved, dict) else {}
        relay = _Relay(ctx)
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND]
        if answers and isinstance(saved.get("state"), str):
            # The same SDK run goes on: its state, as it stopped, with the person's answers.
            state = await lib.RunState.from_string(agent, saved["state"])
            pending = {_call_id(item): item for item in state.get_interruptions()}
            for answer in answers:
                item = pending.get(str(answer.interrupt.get("toolCallId")))
                if item is None:
                    continue
                reason = answer.reason
                if answer.approved and answer.edited_args is None:
                    state.approve(item)
                elif answer.approved:
                    # The SDK runs a call as the model made it: an edit cannot apply.
                    state.reject(item, rejection_message="Not run: the person edited the "
                                 "arguments, and this agent runs calls only as proposed.")
                else:
                    state.reject(item, rejection_message=str(reason) if reason else
                                 "The person declined this tool call; it was not run.")
            start: Any = state
        else:
            start = to_input(await relay.resume_history(agent))
        ctx.session_state.pop(SESSION_KEY, None)  # a stopped SDK run kept there is spent
        note_settled(ctx, SESSION_KEY)
        result = lib.Runner.run_streamed(agent, start, max_turns=self.max_turns)
        async for event in result.stream_events():
            await relay.send(event)
        await relay.close()
        interruptions = list(result.interruptions or ())
        if interruptions:
            ctx.session_state[SESSION_KEY] = {"run": ctx.run_id,
                                              "state": _saved(result.to_state())}
            await ctx.interrupt(*[_approval(item) for item in interruptions])
        output = result.final_output
        return to_jsonable_python(output, fallback=str) if output is not None else None


def _saved(state: Any) -> str:
    """The SDK run's state as a string. The SDK's serializer turns the input's assistant
    messages into content parts with a status and no type, a shape its own Chat
    Completions converter refuses when the run goes on: they are kept as they were given
    (text content), which both APIs take."""
    data = json.loads(state.to_string())
    given = data.get("original_input")
    if isinstance(given, list):
        data["original_input"] = [_as_given(item) for item in given]
    return json.dumps(data)


def _as_given(item: Any) -> Any:
    if not (isinstance(item, dict) and item.get("role") == "assistant" and "type" not in item
            and isinstance(item.get("content"), list)):
        return item
    parts = item["content"]
    if not all(isinstance(p, dict) and p.get("type") == "output_text" for p in parts):
        return item
    return {"role": "assistant", "content": "".join(str(p.get("text", "")) for p in parts)}


def _call_id(item: Any) -> str:
    raw = item.raw_item
    return str(raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", ""))


def _approval(item: Any) -> dict[str, Any]:
    """The interrupt that asks a person about one ``needs_approval`` call."""
    raw = item.raw_item
    name = getattr(raw, "name", None) or (raw.get("name") if isinstance(raw, dict) else "tool")
    arguments = getattr(raw, "arguments", None) or (
        raw.get("arguments") if isinstance(raw, dict) else "{}")
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = {"arguments": arguments}
    return approval(_call_id(item), name, args, APPROVAL_KIND)


class _Relay:
    """Turns the SDK's stream events into AG-UI events on the run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.text: str | None = None  # the open text message
        self.reasoning: str | None = None  # the open reasoning message
        self.calls: list[str] = []  # tool calls open (started, not ended)
        self.unanswered: set[str] = set()
        self.step: str | None = None  # the open step: the model response under way
        self.agent = "agent"  # the agent that has the turn

    async def emit(self, event: dict[str, Any]) -> None:
        if event["type"].endswith(("_START", "_STARTED")) and not (
                self.text or self.reasoning or self.calls or self.unanswered):
            # A boundary: what a crash resume restarts from (G5, G8), set before the
            # opener since the snapshot is saved just before it.
            note_settled(self.ctx, SESSION_KEY)
        await self.ctx.emit(event)

    async def send(self, event: Any) -> None:
        if event.type == "agent_updated_stream_event":
            self.agent = str(event.new_agent.name)  # the first agent, then each handoff
        elif event.type == "raw_response_event":
            await self._raw(event.data)
        elif event.type == "run_item_stream_event" and event.name in (
                "tool_output", "handoff_occured"):
            raw = event.item.raw_item
            call = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
            output = raw.get("output") if isinstance(raw, dict) else getattr(raw, "output", "")
            if call:
                await self._result(str(call), output)

    async def _raw(self, data: Any) -> None:
        kind = data.type
        item: Any = getattr(data, "item", None)
        if kind == "response.created" and self.step is None:
            # One step per model response, named after the agent that has the turn: a step
            # left open across tool calls would keep the run from every boundary (G5).
            self.step = self.agent
            await self.emit({"type": "STEP_STARTED", "stepName": self.agent})
        elif kind == "response.output_text.delta" and data.delta:
            await self._open_text()
            await self.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                             "delta": data.delta})
        elif kind in ("response.reasoning_text.delta",
                      "response.reasoning_summary_text.delta") and data.delta:
            if self.reasoning is None:
                self.reasoning = self.ctx.new_id("reasoning")
                await self.emit({"type": "REASONING_START", "messageId": self.reasoning})
                await self.emit({"type": "REASONING_MESSAGE_START",
                                 "messageId": self.reasoning, "role": "reasoning"})
            await self.emit({"type": "REASONING_MESSAGE_CONTENT", "messageId": self.reasoning,
                             "delta": data.delta})
        elif kind == "response.output_item.added" and getattr(item, "type", None) == \
                "function_call":
            await self._close_reasoning()
            call = str(item.call_id)
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call,
                                     "toolCallName": item.name}
            if self.text is not None:
                start["parentMessageId"] = self.text
            await self.emit(start)
            self.calls.append(call)
            self.unanswered.add(call)
        elif kind == "response.function_call_arguments.delta" and self.calls and data.delta:
            await self.emit({"type": "TOOL_CALL_ARGS", "toolCallId": self.calls[-1],
                             "delta": data.delta})
        elif kind == "response.output_item.done" and getattr(item, "type", None) == \
                "function_call" and str(item.call_id) in self.calls:
            self.calls.remove(str(item.call_id))
            await self.emit({"type": "TOOL_CALL_END", "toolCallId": str(item.call_id)})
        elif kind == "response.output_item.done" and getattr(item, "type", None) in (
                "message", "reasoning"):
            await self._close_reasoning()
            await self._close_text()
        elif kind == "response.completed":
            await self.close()
            usage = getattr(data.response, "usage", None)
            counts = {"inputTokens": getattr(usage, "input_tokens", 0),
                      "outputTokens": getattr(usage, "output_tokens", 0),
                      "totalTokens": getattr(usage, "total_tokens", 0)}
            counts = {k: v for k, v in counts.items() if isinstance(v, int) and v > 0}
            if counts:
                model = getattr(data.response, "model", None)
                self.ctx.record_usage({**counts, **({"model": model} if isinstance(
                    model, str) and model else {})})

    async def _open_text(self) -> None:
        if self.text is None:
            await self._close_reasoning()
            self.text = self.ctx.new_id("msg")
            await self.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                             "role": "assistant"})

    async def _close_text(self) -> None:
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})

    async def _close_reasoning(self) -> None:
        if self.reasoning is not None:
            rid, self.reasoning = self.reasoning, None
            await self.ctx.emit({"type": "REASONING_MESSAGE_END", "messageId": rid})
            await self.ctx.emit({"type": "REASONING_END", "messageId": rid})

    async def close_reply(self) -> None:
        """Close whatever one model response left open."""
        await self._close_reasoning()
        for call in self.calls:
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.calls = []
        await self._close_text()


    async def close(self) -> None:
        """The end of the SDK's run: every open construct closed."""
        await self.close_reply()
        if self.step is not None:
            await self.ctx.emit({"type": "STEP_FINISHED", "stepName": self.step})
            self.step = None

    async def _result(self, call: str, output: Any) -> None:
        self.unanswered.discard(call)
        if call in self.calls:
            self.calls.remove(call)
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        content = result_text(output)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("result"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def resume_history(self, agent: Any) -> list[dict[str, Any]]:
        """The conversation to start the SDK from; after a crash, the calls the dead
        attempt left without a result answered (through the journal, after asking a
        person about any in doubt) and a cut reply marked and left out; in a
        continuation, the calls a person answered such a question about."""
        ctx = self.ctx
        settled = settled_at(ctx, SESSION_KEY)
        if settled is not None:
            await mark_cut_off(ctx, settled)  # and so left out: the model answers again
        owed = await owed_calls(ctx, KEY_PREFIX, settled)
        tools = {t.name: t for t in _all_tools(agent)}
        for call in owed:
            tool = tools.get(call["function"]["name"])
            if tool is not None:
                await self._answer_owed(tool, call)
        if settled is not None:
            log.info("run %s: resuming from message %d", ctx.run_id, settled)
        return ctx.messages

    async def _answer_owed(self, tool: Any, call: dict[str, Any]) -> None:
        arguments = call["function"].get("arguments") or "{}"
        tool_ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=call["id"],
                                   tool_arguments=arguments)
        output = await tool.on_invoke_tool(tool_ctx, arguments)  # journaled (G9)
        await self._result(call["id"], output)


def _all_tools(agent: Any, seen: set[int] | None = None) -> list[Any]:
    seen = set() if seen is None else seen
    if id(agent) in seen:
        return []
    seen.add(id(agent))
    found = list(agent.tools)
    for h in agent.handoffs:
        if sdk is not None and isinstance(h, sdk.Agent):
            found += _all_tools(h, seen)
    return found


HOST = OpenAIAgentsAgent


def serves(obj: Any) -> bool:
    """True for an ``agents.Agent`` of the OpenAI Agents SDK."""
    return sdk is not None and isinstance(obj, sdk.Agent)


def factory(settings: Any = None) -> OpenAIAgentsAgent:
    """``--agent NAME=outlast.agents.openai_agents:factory`` with
    ``OUTLAST_OPENAI_AGENTS_AGENT=module:attr`` naming an ``agents.Agent``, or a function of
    the settings returning one."""
    _require()
    return OpenAIAgentsAgent(load_target("OUTLAST_OPENAI_AGENTS_AGENT", "OpenAI Agents host",
                                         serves, settings))
