"""Strands Agents host: a ``strands.Agent`` runs durably as an outlast agent.

A Strands ``Agent`` holds one conversation and its pending interrupt, and refuses a
second call while one runs; outlast runs many threads at once. So each run gets its own
``Agent``, built from the served one (its model, tools, system prompt, hooks, middleware,
state and settings), and the thread's Strands state (the SDK's own session snapshot:
messages, agent state, conversation manager state, interrupt state) is kept in the
thread's private ``session_state``, rewritten at every boundary; a new process continues
the conversation from it. Its stream (``stream_async``) becomes AG-UI: text, reasoning
and tool-call events, tool results. Outlast adds:

- every tool execution runs as a journaled effect keyed by the model's call id (G9),
  through Strands' own ``ExecuteToolStage`` middleware;
- an ``event.interrupt()`` in a hook (a ``BeforeToolCallEvent`` approval, or the SDK's
  ``HumanInTheLoop`` intervention) ends the run with durable outlast interrupts (G7); the
  answer, after any restart, goes back as the ``interruptResponse`` the hook reads;
- a crash resume (G8) continues from the Strands state at the last boundary: a reply it
  was cutting off is kept, marked ``interrupted``, and not sent to the model; a call it
  was executing is in doubt and a person is asked before anything runs;
- every model call's tokens count toward the run's final event (AG-UI 1.0 usage).

Strands' OpenTelemetry spans go to the process's tracer provider: nowhere unless the
application (or outlast's ``OTEL_*`` tracing) installs one. A ``session_manager`` on the
served agent is not used: the thread keeps the conversation. Install with
``pip install "outlast[strands]"``.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, Resolution, RunContext
from outlast.agents.resume import (
    answer_placeholder,
    call_args,
    is_placeholder,
    mark_cut_off,
    owed_calls,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency
from outlast.protocol.content import text_of

try:
    import strands
    from strands.handlers.callback_handler import PrintingCallbackHandler
    from strands.middleware.stages import ExecuteToolStage
    from strands.types._events import ToolInterruptEvent
    from strands.types._snapshot import Snapshot
    from strands.types.events import ToolResultEvent
    from strands.types.session import decode_bytes_values, encode_bytes_values
except ImportError:  # pragma: no cover - exercised only without the extra
    strands = None  # type: ignore[assignment]

log = logging.getLogger("outlast.agents.strands")

SESSION_KEY = "strands"
KEY_PREFIX = "strands-tool:"  # + the call id: a tool execution's journal key
INTERRUPT_KIND = "strands_interrupt"
APPROVAL_SCHEMA = {"type": "object", "required": ["approved"], "properties": {
    "approved": {"type": "boolean"}, "reason": {"type": "string"},
    "editedArgs": {"type": "object"}}}


def _require() -> Any:
    if strands is None:
        raise MissingDependency("strands-agents", "strands")
    return strands


def serves(obj: Any) -> bool:
    """True for a Strands ``Agent`` (the object this host takes)."""
    return strands is not None and isinstance(obj, strands.Agent)


def fork(template: Any) -> Any:
    """A fresh ``strands.Agent`` with ``template``'s model, tools, system prompt, settings,
    hooks and middleware, and none of its conversation: one per run, so runs of
    different threads never share an agent (Strands refuses concurrent calls)."""
    lib = _require()
    owned = _owned(template)
    try:
        manager = copy.deepcopy(template.conversation_manager)
    except Exception:  # a manager holding a lock or a client: the default instead
        manager = None
    retry = copy.copy(template._retry_strategy)
    retry._current_attempt = 0
    handler = template.callback_handler
    agent = lib.Agent(
        model=template.model, tools=[t for t in template.tool_registry.registry.values()
                                     if not _bound_to(getattr(t, "_tool_func", None), owned)],
        system_prompt=template._system_prompt_content,
        structured_output_model=template._default_structured_output_model,
        callback_handler=None if isinstance(handler, PrintingCallbackHandler) else handler,
        conversation_manager=manager, record_direct_tool_call=template.record_direct_tool_call,
        trace_attributes=template.trace_attributes, agent_id=template.agent_id,
        name=template.name, description=template.description, state=template.state.get(),
        tool_executor=template.tool_executor, retry_strategy=retry)
    # The template's own hooks and middleware, except those bound to the parts the new
    # agent made for itself (its conversation manager, retry strategy, SDK plugins).
    for event_type, entries in template.hooks._registered_callbacks.items():
        if event_type.__name__ == "AgentInitializedEvent":
            continue
        have = [e.callback for e in agent.hooks._registered_callbacks.get(event_type, ())]
        for entry in entries:
            if not _bound_to(entry.callback, owned) and entry.callback not in have:
                agent.hooks.add_callback(event_type, entry.callback, order=entry.order)
    for stage, tagged in template._middleware_registry._handlers.items():
        mine = agent._middleware_registry._handlers.setdefault(stage, [])
        mine[:] = [t for t in tagged if not _bound_to(t.handler, owned)] + \
            [t for t in mine if t not in tagged]
    return agent


def _bound_to(fn: Any, owned: list[Any]) -> bool:
    owner = getattr(fn, "__self__", None)
    return any(owner is part for part in owned)


def _owned(template: Any) -> list[Any]:
    """The template's own parts: what its hooks bound to them must not be carried."""
    parts = [template, template.conversation_manager, template._retry_strategy,
             getattr(template, "_session_manager", None),
             getattr(template, "_context_manager_instance", None),
             getattr(template, "_background_tasks", None),
             getattr(template, "memory_manager", None)]
    plugins = getattr(template._plugin_registry, "_plugins", {})
    parts += [p for name, p in plugins.items() if str(name).startswith("strands:")]
    return [p for p in parts if p is not None]


def journal(ctx: RunContext) -> Any:
    """``ExecuteToolStage`` middleware running each tool execution as an outlast effect
    keyed by the model's call id (G9): its recorded result stands in on any later try."""

    async def middleware(context: Any, next_fn: Any) -> Any:
        use = context.tool_use
        ran: list[Any] = []

        async def invoke() -> Any:
            async for event in next_fn(context):
                if isinstance(event, ToolResultEvent):
                    ran.append(event)
                elif isinstance(event, ToolInterruptEvent):
                    raise _Halted(event)
            if not ran:
                raise RuntimeError(f"the tool {use['name']!r} gave no result")
            return encode_bytes_values(to_jsonable_python(ran[-1]["tool_result"], fallback=str))

        try:
            recorded = await ctx.effect(KEY_PREFIX + str(use["toolUseId"]), invoke,
                                        tool=use["name"], args=use.get("input"),
                                        tool_call_id=str(use["toolUseId"]))
        except _Halted as halted:  # the tool asked a person: it runs again when answered
            yield halted.event
            return
        yield ran[-1] if ran else ToolResultEvent(tool_result(use, recorded))

    return middleware


class _Halted(Exception):
    """A tool interrupted itself (``tool_context.interrupt``): it has no result yet."""

    def __init__(self, event: Any) -> None:
        super().__init__("the tool interrupted")
        self.event = event


def tool_result(use: Any, recorded: Any) -> Any:
    """A Strands ``ToolResult`` for ``use`` from what the journal holds: a result it
    recorded, or the result a person gave for a call cut off by a crash."""
    if isinstance(recorded, dict) and isinstance(recorded.get("content"), list):
        return dict(decode_bytes_values(recorded), toolUseId=str(use["toolUseId"]))
    text = recorded if isinstance(recorded, str) else json.dumps(recorded)
    return {"toolUseId": str(use["toolUseId"]), "status": "success", "content": [{"text": text}]}


def result_text(result: Any) -> str:
    """A Strands ``ToolResult``'s content as the text a tool message carries."""
    parts = []
    for block in result.get("content") or ():
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(json.dumps(block["json"]))
    return "".join(parts)


def to_strands(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI messages as Strands messages (text, tool uses, tool results), messages of
    the same role merged (Strands alternates user and assistant)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("user", "system", "developer"):
            text = text_of(m.get("content"))
            blocks: list[dict[str, Any]] = [{"text": text}] if text else []
            role = "user"
        elif role == "assistant":
            text = text_of(m.get("content"))
            blocks = [{"text": text}] if text else []
            blocks += [{"toolUse": {"toolUseId": c["id"], "name": c["function"]["name"],
                                    "input": call_args(c)}} for c in m.get("toolCalls") or ()]
        elif role == "tool" and m.get("toolCallId"):
            role, blocks = "user", [{"toolResult": {
                "toolUseId": m["toolCallId"], "status": "success",
                "content": [{"text": text_of(m.get("content"))}]}}]
        else:
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return out


class StrandsAgent(Agent):
    """Hosts a ``strands.Agent``: an agent per run from the served one, the Strands state
    in the thread, tools journaled, interrupts durable, crash resume from the last
    boundary."""

    capabilities = Capabilities(
        description="Strands Agents agent with its state in the thread, journaled tools "
                    "and durable interrupts",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any) -> None:
        _require()
        if not serves(agent):
            raise TypeError(f"the Strands host serves a strands.Agent, not {type(agent)!r}")
        if getattr(agent, "_session_manager", None) is not None:
            log.warning("the Strands agent's session_manager is not used: each thread "
                        "keeps its conversation in outlast")
        self.agent = agent
        self.approvers = {h.name for h in agent._intervention_registry.handlers}

    async def run(self, ctx: RunContext) -> Any:
        saved = ctx.session_state.get(SESSION_KEY)
        saved = saved if isinstance(saved, dict) else {}
        agent = fork(self.agent)
        agent.add_middleware(ExecuteToolStage, journal(ctx))  # innermost: next to the tool
        if isinstance(saved.get("snapshot"), dict):
            agent.load_snapshot(Snapshot.from_dict(decode_bytes_values(saved["snapshot"])))
        crashed = ctx.resumed and saved.get("run") == ctx.run_id
        settled = saved.get("settled") if crashed and isinstance(saved.get("settled"), int) \
            else None
        cut = await mark_cut_off(ctx, settled) if settled is not None else None
        # Calls a dead attempt was executing are asked about first (ending the run if any
        # is in doubt); those a person answered about run here, through the journal.
        owed = {c["id"] for c in await owed_calls(ctx, KEY_PREFIX, settled)}
        if not ctx.resumed:
            for call in (c for m in ctx.messages for c in m.get("toolCalls") or ()):
                if call["id"] in owed:
                    await self._execute(ctx, agent, call)
            owed = set()
        held = set(saved.get("held") or ())
        new = [m for m in ctx.messages if m.get("id") not in held and m.get("id") != cut]
        # After a crash, a reply whose calls were left without a result goes back without
        # its results: Strands runs its calls again in its own loop (hooks first, then the
        # journal, which holds those that ran), as it does a reply that ends in tool uses.
        again = {c["id"] for m in new if owed & {c["id"] for c in m.get("toolCalls") or ()}
                 for c in m["toolCalls"]}
        new = [m for m in new if not (m.get("role") == "tool" and m.get("toolCallId") in again)]
        prompt = self._answers(ctx, agent)
        relay = _Relay(ctx, agent)
        relay.done = {m.get("toolCallId") for m in ctx.messages
                      if m.get("role") == "tool" and not is_placeholder(m)}
        if prompt is None:
            _append(agent, to_strands(new))
        elif new:  # Strands continues an interrupt with the answers alone
            relay.waiting = {m.get("id") for m in new}
            log.info("run %s: %d new messages wait until the interrupt is answered",
                     ctx.run_id, len(new))
        relay.boundary()
        result = None
        async for event in agent.stream_async(prompt):
            if "result" in event:
                result = event["result"]
            else:
                await relay.send(event)
        await relay.close()
        relay.boundary()  # the state as the run ends: what the next run continues
        if result is not None and result.stop_reason == "interrupt" and result.interrupts:
            await ctx.interrupt(*[self._interrupt(agent, i) for i in result.interrupts])
        output = getattr(result, "structured_output", None)  # RUN_FINISHED.result
        return None if output is None else to_jsonable_python(output, fallback=str)

    def _answers(self, ctx: RunContext, agent: Any) -> list[dict[str, Any]] | None:
        """The ``interruptResponse`` blocks that continue the pending Strands interrupt,
        or None when none is pending (a pending one nobody answered is dropped)."""
        state = agent._interrupt_state
        if not state.activated:
            return None
        answers = {str((r.interrupt.get("metadata") or {}).get("interruptId")): r
                   for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == INTERRUPT_KIND}
        responses = [{"interruptResponse": {"interruptId": iid, "response": self._response(
            state.interrupts[iid].name, answers[iid])}}
            for iid in state.interrupts if iid in answers]
        if not responses:
            state.deactivate()
            return None
        return responses

    def _response(self, name: str, answer: Resolution) -> Any:
        """What ``event.interrupt()`` returns to the hook that raised it: the person's
        payload; a yes or no for the SDK's interventions (``HumanInTheLoop``), which run a
        call only as the model made it (an edited approval is a no: nothing runs)."""
        if name in self.approvers:
            return answer.approved and answer.edited_args is None
        if answer.status != "resolved":
            return {"approved": False, "reason": "The person cancelled this request."}
        return {"approved": True} if answer.payload is None else answer.payload

    def _interrupt(self, agent: Any, interrupt: Any) -> dict[str, Any]:
        """The outlast interrupt that asks a person about one Strands interrupt."""
        reason = to_jsonable_python(interrupt.reason, fallback=str)
        pending = agent._interrupt_state.pending_tool_execution
        uses = [b["toolUse"] for b in (pending.assistant_message["content"] if pending else ())
                if "toolUse" in b]
        use = next((u for u in uses if f":{u['toolUseId']}:" in interrupt.id), None)
        metadata = {"kind": INTERRUPT_KIND, "interruptId": interrupt.id,
                    "name": interrupt.name, "reason": reason}
        item: dict[str, Any] = {"id": f"strands-{interrupt.id}", "reason": "input_required",
                                "metadata": metadata}
        if use is not None:  # the call waits for it: its result is the continuation's
            args = to_jsonable_python(use.get("input"), fallback=str)
            shown = json.dumps(args, ensure_ascii=False)
            shown = shown if len(shown) <= 300 else shown[:297] + "..."
            metadata.update(tool=use["name"], args=args)
            item.update(toolCallId=str(use["toolUseId"]), message=f"Run {use['name']}({shown})?")
        if use is not None and not interrupt.id.startswith("v1:tool_call:"):
            # Asked before the call (a hook, an intervention): an approval. A tool asking
            # from inside its body may ask anything.
            item.update(reason="tool_call", responseSchema=APPROVAL_SCHEMA)
        if isinstance(reason, str) and reason:
            item["message"] = reason
        item.setdefault("message", f"The agent asks: {interrupt.name}")
        return item

    async def _execute(self, ctx: RunContext, agent: Any, call: dict[str, Any]) -> None:
        """Run one owed call with the agent's own tool, through the journal, and put its
        result in place of the engine's."""
        use = {"toolUseId": call["id"], "name": call["function"]["name"],
               "input": call_args(call)}
        tool = agent.tool_registry.registry.get(use["name"])

        async def invoke() -> Any:
            if tool is None:
                return f"Not run: the agent has no tool named {use['name']!r}."
            last: Any = None
            async for event in tool.stream(use, {"agent": agent}):
                last = event
            done = last.get("tool_result", last) if isinstance(last, dict) else last
            return encode_bytes_values(to_jsonable_python(done, fallback=str))

        recorded = await ctx.effect(KEY_PREFIX + call["id"], invoke, tool=use["name"],
                                    args=use["input"], tool_call_id=call["id"])
        await answer_placeholder(ctx, call["id"], result_text(tool_result(use, recorded)))


def _append(agent: Any, messages: list[dict[str, Any]]) -> None:
    """Add ``messages`` to the agent's conversation, merging a first one of the same role
    as its last."""
    for message in messages:
        last = agent.messages[-1] if agent.messages else None
        if last is not None and last["role"] == message["role"]:
            agent.messages[-1] = {**last, "content": [*last["content"], *message["content"]]}
        else:
            agent.messages.append(message)


class _Relay:
    """Turns the Strands stream into AG-UI events on the run, and notes the Strands
    state at each boundary."""

    def __init__(self, ctx: RunContext, agent: Any) -> None:
        self.ctx = ctx
        self.agent = agent
        self.text: str | None = None  # the open text message
        self.reply: str | None = None  # the reply's text message, parent of its calls
        self.reasoning: str | None = None
        self.call: str | None = None  # the open tool call
        self.waiting: set[Any] = set()  # thread messages the Strands state does not hold
        self.done: set[Any] = set()  # calls the thread holds a result of

    def boundary(self) -> None:
        """Note the Strands state as it is now: a crash resume restarts from it (G5, G8).
        Called before a reply's first opener, as the snapshot is saved just before it."""
        snapshot = self.agent.take_snapshot(preset="session").to_dict()
        self.ctx.session_state[SESSION_KEY] = {
            "run": self.ctx.run_id, "settled": len(self.ctx.messages),
            "held": [m.get("id") for m in self.ctx.messages if m.get("id") not in self.waiting],
            "snapshot": encode_bytes_values(to_jsonable_python(snapshot, fallback=str))}

    async def send(self, event: dict[str, Any]) -> None:
        if "event" in event:
            await self._raw(event["event"])
        elif isinstance(event.get("message"), dict):
            for block in event["message"].get("content") or ():
                if "toolResult" in block:
                    await self._result(block["toolResult"])

    async def _raw(self, raw: dict[str, Any]) -> None:
        if "messageStart" in raw:
            await self.close()
            self.reply = None
            self.boundary()
        elif "contentBlockStart" in raw:
            use = (raw["contentBlockStart"].get("start") or {}).get("toolUse")
            if use:
                await self.close()
                self.call = str(use["toolUseId"])
                start = {"type": "TOOL_CALL_START", "toolCallId": self.call,
                         "toolCallName": use["name"]}
                if self.reply is not None:
                    start["parentMessageId"] = self.reply
                await self.ctx.emit(start)
        elif "contentBlockDelta" in raw:
            await self._delta(raw["contentBlockDelta"].get("delta") or {})
        elif "contentBlockStop" in raw:
            await self.close()
        elif "messageStop" in raw:
            await self.close()
        elif "metadata" in raw:
            self._usage(raw["metadata"].get("usage") or {})

    async def _delta(self, delta: dict[str, Any]) -> None:
        if delta.get("text"):
            if self.text is None:
                self.text = self.reply = self.ctx.new_id("msg")
                await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                     "role": "assistant"})
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": delta["text"]})
        elif (delta.get("toolUse") or {}).get("input") and self.call is not None:
            await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": self.call,
                                 "delta": delta["toolUse"]["input"]})
        elif (delta.get("reasoningContent") or {}).get("text"):
            if self.reasoning is None:
                self.reasoning = self.ctx.new_id("reasoning")
                await self.ctx.emit({"type": "REASONING_START", "messageId": self.reasoning})
                await self.ctx.emit({"type": "REASONING_MESSAGE_START",
                                     "messageId": self.reasoning, "role": "reasoning"})
            await self.ctx.emit({"type": "REASONING_MESSAGE_CONTENT",
                                 "messageId": self.reasoning,
                                 "delta": delta["reasoningContent"]["text"]})

    def _usage(self, usage: dict[str, Any]) -> None:
        counts = {wire: usage.get(key) for key, wire in (
            ("inputTokens", "inputTokens"), ("outputTokens", "outputTokens"),
            ("totalTokens", "totalTokens"), ("cacheReadInputTokens", "cachedInputTokens"),
            ("cacheWriteInputTokens", "cacheWriteInputTokens"))}
        counts = {k: v for k, v in counts.items() if isinstance(v, int) and v > 0}
        if counts:
            model = (getattr(self.agent.model, "config", None) or {}).get("model_id")
            self.ctx.record_usage({**counts, **({"model": model} if isinstance(
                model, str) and model else {})})

    async def _result(self, result: dict[str, Any]) -> None:
        call, content = str(result.get("toolUseId")), result_text(result)
        if call in self.done:
            return  # run again after a crash, its result recorded and shown before
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("result"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def close(self) -> None:
        """Close every construct the reply under way opened."""
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})
        if self.reasoning is not None:
            rid, self.reasoning = self.reasoning, None
            await self.ctx.emit({"type": "REASONING_MESSAGE_END", "messageId": rid})
            await self.ctx.emit({"type": "REASONING_END", "messageId": rid})
        if self.call is not None:
            call, self.call = self.call, None
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})


HOST = StrandsAgent


def factory(settings: Any = None) -> StrandsAgent:
    """``--agent NAME=outlast.agents.strands:factory`` with
    ``OUTLAST_STRANDS_AGENT=module:attr`` naming a ``strands.Agent``, or a function of the
    settings returning one."""
    _require()
    return StrandsAgent(load_target("OUTLAST_STRANDS_AGENT", "Strands host", serves,
                                    settings))
