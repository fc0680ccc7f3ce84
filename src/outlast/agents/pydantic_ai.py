"""Pydantic AI host: a ``pydantic_ai.Agent`` runs durably as an outlast agent.

The run goes through Pydantic AI's own AG-UI adapter (``AGUIAdapter``), so its text,
reasoning, tool calls and tool results reach clients exactly as the framework's own
endpoint streams them; outlast adds what that endpoint cannot keep:

- every tool the agent executes runs as a journaled effect keyed by the model's call
  id (G9): a retry, a reattach or a crash resume never runs it twice;
- tools that require approval (and deferred tools) end the run with the adapter's
  AG-UI interrupts, stored as outlast interrupts (G7); the answer, given through
  ``resume`` or ``POST /threads/{id}/resume`` after any restart, goes back to the
  adapter as the AG-UI ``resume`` it expects, with the thread the server stores;
- a crash resume (G8) continues from the last boundary: calls the dead attempt left
  without a result are executed (through the journal) and answered in place, and a
  reply it was cutting off is kept, marked ``finishReason: interrupted``, and never
  sent back to the model; a call the dead attempt was executing is in doubt, and a
  person is asked whether it happened before anything runs (``outlast.agent.in_doubt``);
- every model call's tokens are counted for the run's final event (AG-UI 1.0 usage).

Install with ``pip install "outlast[pydantic-ai]"``.
"""

from __future__ import annotations

import logging
from typing import Any

from ag_ui.core import RunAgentInput

from outlast.agent import Agent, AgentError, Capabilities, RunContext, in_doubt
from outlast.agents.resume import (
    FAILED,
    answer_placeholder,
    finished,
    is_placeholder,
    mark_cut_off,
    mark_reply,
    note_settled,
    owed_calls,
    settled_at,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency

try:
    import pydantic_ai as pai
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from pydantic_core import to_jsonable_python
except ImportError:  # pragma: no cover - exercised only without the extra
    pai = None  # type: ignore[assignment]
    AbstractCapability = object  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.pydantic_ai")

SESSION_KEY = "pydantic_ai"
KEY_PREFIX = "pydantic-ai-tool:"  # + the call id: a tool execution's journal key
OPENERS = frozenset({"TEXT_MESSAGE_START", "TOOL_CALL_START", "REASONING_START",
                     "REASONING_MESSAGE_START"})
CLOSERS = frozenset({"TEXT_MESSAGE_END", "TOOL_CALL_END", "REASONING_END",
                     "REASONING_MESSAGE_END"})


def _require() -> Any:
    if pai is None:
        raise MissingDependency("pydantic-ai-slim", "pydantic-ai")
    return pai


class _Durable(AbstractCapability[Any]):
    """Runs each tool execution as an outlast effect; counts each model call's tokens."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                handler: Any) -> Any:
        async def invoke() -> Any:
            # Recorded as JSON (G9): the model is shown the same serialized value anyway.
            return to_jsonable_python(await handler(args))

        return await self.ctx.effect(KEY_PREFIX + call.tool_call_id, invoke,
                                     tool=call.tool_name, args=call.args_as_dict(),
                                     tool_call_id=call.tool_call_id)

    async def after_model_request(self, ctx: Any, *, request_context: Any,
                                  response: Any) -> Any:
        usage = getattr(response, "usage", None)
        counts = {"inputTokens": getattr(usage, "input_tokens", 0),
                  "outputTokens": getattr(usage, "output_tokens", 0),
                  "reasoningTokens": getattr(usage, "output_reasoning_tokens", 0),
                  "cachedInputTokens": getattr(usage, "cache_read_tokens", 0)}
        counts = {k: v for k, v in counts.items() if isinstance(v, int) and v > 0}
        if counts:
            counts["totalTokens"] = counts.get("inputTokens", 0) + counts.get("outputTokens", 0)
            for label, value in (("model", getattr(response, "model_name", None)),
                                 ("provider", getattr(response, "provider_name", None))):
                if isinstance(value, str) and value:
                    counts[label] = value
            self.ctx.record_usage(counts, finish_reason=getattr(response, "finish_reason", None))
        return response


class PydanticAIAgent(Agent):
    """Hosts a ``pydantic_ai.Agent``: streamed through its AG-UI adapter, tools journaled,
    approvals durable, crash resume from the last boundary."""

    capabilities = Capabilities(
        description="Pydantic AI agent with journaled tool calls and durable approvals",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any, *, deps: Any = None) -> None:
        _require()
        self.agent = agent
        self.deps = deps

    async def run(self, ctx: RunContext) -> Any:
        lib = _require()
        history, owed = await self._history(ctx)
        deferred = None
        if owed:  # executed now, through the journal: run at most once (G9)
            deferred = lib.DeferredToolResults(approvals=dict.fromkeys(owed, True))
        run_input = RunAgentInput.model_validate({
            "threadId": ctx.thread_id, "runId": ctx.run_id, "protocolVersion": "1.0",
            "messages": history, "state": ctx.state if ctx.state is not None else {},
            "tools": [t.model_dump(by_alias=True) for t in ctx.input.tools or ()],
            "context": [c.model_dump(by_alias=True) for c in ctx.input.context or ()],
            "forwardedProps": ctx.forwarded_props,
            "resume": [{"interruptId": r.interrupt["id"], "status": r.status,
                        "payload": r.payload} for r in ctx.resume
                       if not in_doubt.is_question(r.interrupt)] or None})
        adapter = AGUIAdapter(self.agent, run_input)
        output = self.agent.output_type
        outputs = output if isinstance(output, list) else [output]
        if lib.DeferredToolRequests not in outputs:
            outputs = [*outputs, lib.DeferredToolRequests]
        relay = _Relay(ctx, owed)
        async for event in adapter.run_stream(output_type=outputs, deps=self.deps,
                                              deferred_tool_results=deferred,
                                              capabilities=[_Durable(ctx)]):
            await relay.send(event.model_dump(mode="json", by_alias=True, exclude_none=True))
        if relay.interrupts:
            await ctx.interrupt(*relay.interrupts)
        return relay.result

    async def _history(self, ctx: RunContext) -> tuple[list[dict[str, Any]], list[str]]:
        """The conversation to hand the adapter, and the calls to execute now: those a
        crashed attempt left without a result, or those a person answered a question
        about (after asking about any in doubt)."""
        settled = settled_at(ctx, SESSION_KEY)
        if settled is None:
            # A continuation: the calls a person answered a question about run in place.
            owed = [c["id"] for c in await owed_calls(ctx, KEY_PREFIX, None)]
            return [m for m in finished(ctx.messages) if not (
                is_placeholder(m) and m.get("toolCallId") in owed)], owed
        cut = await mark_cut_off(ctx, settled)  # the model answers again
        owed = [c["id"] for c in await owed_calls(ctx, KEY_PREFIX, settled)]
        history = [m for m in finished(ctx.messages) if not is_placeholder(m)]
        log.info("run %s: resuming from message %d (%d calls owed, reply cut off: %s)",
                 ctx.run_id, settled, len(owed), cut is not None)
        return history, owed


class _Relay:
    """Sends the adapter's events to the run: lifecycle events stay the engine's, the
    session state names the last boundary, a result owed since a crash replaces the
    engine's placeholder."""

    def __init__(self, ctx: RunContext, owed: list[str]) -> None:
        self.ctx = ctx
        self.owed = set(owed)
        self.open = 0
        self.unanswered: set[str] = set()
        self.interrupts: list[dict[str, Any]] = []
        self.result: Any = None
        self.ended_reply: str | None = None  # the reply ended by the event just relayed

    async def send(self, event: dict[str, Any]) -> None:
        etype = event["type"]
        ended, self.ended_reply = self.ended_reply, None
        if etype == "RUN_STARTED":
            return
        if etype == "RUN_FINISHED":
            outcome = event.get("outcome") or {}
            if outcome.get("type") == "interrupt":
                self.interrupts = list(outcome.get("interrupts") or [])
            self.result = event.get("result")
            return
        if etype == "RUN_ERROR":
            if ended is not None:
                # The adapter ended the reply the failure cut off: marked, it is never
                # sent back to the model (the engine marks a reply a failure left open).
                await mark_reply(self.ctx, ended, FAILED)
            raise AgentError(str(event.get("message") or "the agent failed"),
                             code=str(event.get("code") or "agent_error"))
        if etype in OPENERS:
            if self.open == 0 and not self.unanswered:
                # A boundary: what a crash resume restarts from (G5, G8). Set before the
                # opener, as the snapshot is saved just before it.
                note_settled(self.ctx, SESSION_KEY)
            self.open += 1
            if etype == "TOOL_CALL_START":
                self.unanswered.add(event["toolCallId"])
        elif etype in CLOSERS:
            self.open = max(0, self.open - 1)
            if etype == "TEXT_MESSAGE_END":
                self.ended_reply = event["messageId"]
        elif etype == "TOOL_CALL_RESULT":
            call = event["toolCallId"]
            self.unanswered.discard(call)
            if call in self.owed:
                self.owed.discard(call)
                if await answer_placeholder(self.ctx, call, event.get("content")):
                    return
        await self.ctx.emit(event)


HOST = PydanticAIAgent


def serves(obj: Any) -> bool:
    """True for a ``pydantic_ai.Agent`` (``--agent NAME=module:attr`` picks this host)."""
    return pai is not None and isinstance(obj, pai.Agent)


def factory(settings: Any = None) -> PydanticAIAgent:
    """``--agent NAME=outlast.agents.pydantic_ai:factory`` with
    ``OUTLAST_PYDANTIC_AI_AGENT=module:attr`` naming a ``pydantic_ai.Agent``, or a function
    of the settings returning one."""
    _require()
    return PydanticAIAgent(load_target("OUTLAST_PYDANTIC_AI_AGENT", "Pydantic AI host",
                                       serves, settings))
