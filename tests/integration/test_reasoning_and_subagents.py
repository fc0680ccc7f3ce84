"""AG-UI 1.0 reasoning and subagents end to end: the demo agent thinks before each step
(``REASONING_*``) and hands the review to a subagent (``SUBAGENT_*``, its messages
tagged with its ``subagentRunId``). The stream is valid for the independent validator,
the thread keeps the reasoning and the subagent's messages as the stock
``@ag-ui/client`` folds them, and a reattach after every seq is valid too, reopening a
reasoning message or a subagent where it was cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_client import stock_client_runs
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import stored_log, uid
from tests.support.server import collect, demo_input

FEATURES = ("agentic-chat", "backend-tool-rendering")


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    async with in_process_server(tmp_path) as s:
        yield s


async def test_reasoning_and_a_subagent_stream_fold_and_reattach(served: InProcess) -> None:
    thread, run = uid("t"), uid("r")
    _, frames = await collect(served.client, "POST", "/agents/demo", json=demo_input(
        thread, run, steps=2, step_delay_ms=0, think=True, delegate=True))
    events = [f.event for f in frames]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert_valid(events, FEATURES)
    kinds = [e["type"] for e in events]
    assert kinds.count("REASONING_MESSAGE_START") == 3  # two steps and the review
    assert kinds.count("SUBAGENT_STARTED") == kinds.count("SUBAGENT_FINISHED") == 1
    [sub] = [e for e in events if e["type"] == "SUBAGENT_STARTED"]
    assert sub["name"] == "reviewer"

    stored = (await served.client.get(f"/threads/{thread}")).json()
    messages = stored["messages"]
    reasoning = [m for m in messages if m["role"] == "reasoning"]
    assert len(reasoning) == 3 and reasoning[0]["content"].startswith("Step 1 calls for")
    tagged = [m for m in messages if m.get("subagentRunId") == sub["subagentRunId"]]
    assert [m["role"] for m in tagged] == ["reasoning", "assistant"]
    assert tagged[1]["content"].startswith("Review: all 2 steps look right.")
    # The stock client folds the stream to the thread the server stores.
    log = [f.event for f in await stored_log(served.client, run)]
    folded = stock_client_runs([log])
    assert folded["errors"] == [None], folded
    assert folded["messages"] == messages

    assert await assert_every_reattach_valid(served.client, run, FEATURES) > 50


async def test_a_reattach_inside_a_subagents_reasoning_reopens_both(
        served: InProcess) -> None:
    run = uid("r")
    await collect(served.client, "POST", "/agents/demo", json=demo_input(
        uid("t"), run, steps=1, step_delay_ms=0, think=True, delegate=True))
    log = await stored_log(served.client, run)
    [cut] = [f.id for f in log if f.event["type"] == "REASONING_MESSAGE_CONTENT"
             and f.event.get("subagentRunId")][:1]
    _, frames = await collect(served.client, "GET", f"/runs/{run}/events",
                              headers={"Last-Event-ID": str(cut)})
    head = [f.event["type"] for f in frames if f.id is None]
    assert head == ["RUN_STARTED", "STATE_SNAPSHOT", "SUBAGENT_STARTED", "REASONING_START",
                    "REASONING_MESSAGE_START"], head
    assert all(f.event.get("subagentRunId") for f in frames[2:5])


async def test_the_demos_approval_its_continuation_and_their_reattaches_are_valid(
        served: InProcess) -> None:
    thread, run = uid("t"), uid("r")
    _, frames = await collect(served.client, "POST", "/agents/demo", json=demo_input(
        thread, run, steps=2, step_delay_ms=0, approve_at=[2], think=True))
    events = [f.event for f in frames]
    assert events[-1]["outcome"]["type"] == "interrupt", events[-1]
    assert_valid(events, (*FEATURES, "human-in-the-loop"))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    r = await served.client.post(f"/threads/{thread}/resume", json={"resume": [{
        "interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]})
    assert r.status_code == 200, r.text
    continuation = r.json()["run"]["runId"]
    _, rest = await collect(served.client, "GET", f"/runs/{continuation}/events")
    after = [f.event for f in rest]
    assert after[-1]["type"] == "RUN_FINISHED", after[-1]
    first = next(i for i, e in enumerate(after) if e["type"] == "TOOL_CALL_RESULT")
    assert after[first]["toolCallId"] == interrupt["toolCallId"]
    assert_valid(after, FEATURES, allowed={("AGUI207", first)})
    await assert_every_reattach_valid(served.client, run, FEATURES)
    await assert_every_reattach_valid(served.client, continuation, FEATURES,
                                      owed=[interrupt["toolCallId"]])
