"""The Strands host's run: the Strands state from the thread, tools journaled, interrupts
durable, crash resume from the last boundary (the package docstring says it all)."""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, Resolution, RunContext
from outlast.agents.calls import approval_schema, shown_args
from outlast.agents.resume import (
    answer_placeholder,
    call_args,
    is_placeholder,
    mark_cut_off,
    owed_calls,
    settled_at,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency

try:
    import strands
    from strands.middleware.stages import ExecuteToolStage
    from strands.types._events import ToolInterruptEvent
    from strands.types._snapshot import Snapshot
    from strands.types.events import ToolResultEvent
    from strands.types.session import decode_bytes_values, encode_bytes_values

    from outlast.agents.strands.fork import fork
    from outlast.agents.strands.relay import SESSION_KEY, Relay, append, result_text, to_strands
except ImportError:  # pragma: no cover - exercised only without the extra
    strands = None  # type: ignore[assignment]

log = logging.getLogger("outlast.agents.strands")

KEY_PREFIX = "strands-tool:"  # + the call id: a tool execution's journal key
INTERRUPT_KIND = "strands_interrupt"
APPROVAL_SCHEMA = approval_schema(edits=True)


def _require() -> Any:
    if strands is None:
        raise MissingDependency("strands-agents", "strands")
    return strands


def serves(obj: Any) -> bool:
    """True for a Strands ``Agent`` (the object this host takes)."""
    return strands is not None and isinstance(obj, strands.Agent)


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
        settled = settled_at(ctx, SESSION_KEY)
        if settled is not None:
            await mark_cut_off(ctx, settled)  # and so left out: the model answers again
        # Calls a dead attempt was executing are asked about first (ending the run if any
        # is in doubt); those a person answered about run here, through the journal.
        owed = {c["id"] for c in await owed_calls(ctx, KEY_PREFIX, settled)}
        if not ctx.resumed:
            for call in (c for m in ctx.messages for c in m.get("toolCalls") or ()):
                if call["id"] in owed:
                    await self._execute(ctx, agent, call)
            owed = set()
        held = set(saved.get("held") or ())
        new = [m for m in ctx.messages if m.get("id") not in held]
        # After a crash, a reply whose calls were left without a result goes back without
        # its results: Strands runs its calls again in its own loop (hooks first, then the
        # journal, which holds those that ran), as it does a reply that ends in tool uses.
        again = {c["id"] for m in new if owed & {c["id"] for c in m.get("toolCalls") or ()}
                 for c in m["toolCalls"]}
        new = [m for m in new if not (m.get("role") == "tool" and m.get("toolCallId") in again)]
        prompt = self._answers(ctx, agent)
        relay = Relay(ctx, agent)
        relay.done = {m.get("toolCallId") for m in ctx.messages
                      if m.get("role") == "tool" and not is_placeholder(m)}
        if prompt is None:
            append(agent, to_strands(new))
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
            metadata.update(tool=use["name"], args=args)
            item.update(toolCallId=str(use["toolUseId"]),
                        message=f"Run {use['name']}({shown_args(args)})?")
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


HOST = StrandsAgent


def factory(settings: Any = None) -> StrandsAgent:
    """``--agent NAME=outlast.agents.strands:factory`` with
    ``OUTLAST_STRANDS_AGENT=module:attr`` naming a ``strands.Agent``, or a function of the
    settings returning one."""
    _require()
    return StrandsAgent(load_target("OUTLAST_STRANDS_AGENT", "Strands host", serves,
                                    settings))
