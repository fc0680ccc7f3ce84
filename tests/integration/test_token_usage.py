"""AG-UI 1.0 token usage: what an agent counts with ``ctx.record_usage`` ends the run
on its final event (``RUN_FINISHED.usage`` or ``RUN_ERROR.usage``), summed per provider
and model; a malformed count is refused at the call and counts nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import TokenUsage

from outlast.agent import Agent, AgentError, Capabilities, RunContext
from tests.support.agui_validator import assert_valid
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import stored_log, uid
from tests.support.server import collect


class Counting(Agent):
    """Records the usages of ``forwardedProps.usage``; says which were refused; fails
    with ``forwardedProps.fail``."""

    capabilities = Capabilities(description="Counts tokens.")

    async def run(self, ctx: RunContext) -> Any:
        props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
        refused = []
        for usage in props.get("usage", []):
            try:
                ctx.record_usage(usage)
            except ValueError as exc:
                refused.append(str(exc))
        ctx.record_usage(TokenUsage(model="typed", input_tokens=1))
        mid = ctx.new_id("msg")
        await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                        "delta": "; ".join(refused) or "all counted"})
        await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        if props.get("fail"):
            raise AgentError("the model gave up", code="model_error")


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    async with in_process_server(tmp_path, agents={"count": Counting()}) as s:
        yield s


def body(run: str, **props: Any) -> dict[str, Any]:
    return {"threadId": uid("t"), "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": props}


@pytest.mark.parametrize("fail", [False, True], ids=["finished", "failed"])
async def test_usage_is_summed_per_model_onto_the_final_event(
        served: InProcess, fail: bool) -> None:
    run = uid("r")
    usage = [{"provider": "p", "model": "a", "inputTokens": 10, "outputTokens": 2},
             {"provider": "p", "model": "a", "inputTokens": 5, "outputTokens": 1,
              "reasoningTokens": 3},
             {"provider": "p", "model": "b", "totalTokens": 9}]
    _, frames = await collect(served.client, "POST", "/agents/count",
                              json=body(run, usage=usage, fail=fail))
    last = frames[-1].event
    assert last["type"] == ("RUN_ERROR" if fail else "RUN_FINISHED"), last
    assert last["usage"] == [
        {"provider": "p", "model": "a", "inputTokens": 15, "outputTokens": 3,
         "reasoningTokens": 3},
        {"provider": "p", "model": "b", "totalTokens": 9},
        {"model": "typed", "inputTokens": 1}]
    stored = [f.event for f in await stored_log(served.client, run)]
    assert stored[-1] == last  # stored as streamed, replayed the same
    assert_valid(stored, ("agentic-chat",))


@pytest.mark.parametrize("bad", [
    {"inputTokens": -1}, {"inputTokens": "12"}, {"outputTokens": 1.5},
    {"inputTokens": 2**60}, {"model": 5}, ["inputTokens", 1],
], ids=["negative", "string", "fraction", "past the wire's integers", "model", "not a dict"])
async def test_a_malformed_count_is_refused_at_the_call(served: InProcess, bad: Any) -> None:
    run = uid("r")
    _, frames = await collect(served.client, "POST", "/agents/count",
                              json=body(run, usage=[bad]))
    said = "".join(f.event.get("delta", "") for f in frames)
    assert said.startswith("record_usage: "), said
    assert frames[-1].event["usage"] == [{"model": "typed", "inputTokens": 1}]
