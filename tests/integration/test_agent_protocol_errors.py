"""G11: only valid AG-UI is stored. An agent that breaks the schema or the protocol's
ordering rules fails its run with ``agent_protocol_error`` naming the rule; nothing invalid
is stored, the stored log folds in the stock ``@ag-ui/client``, and the thread stays usable.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from outlast.agents.demo import DemoAgent
from tests.support.agui_client import stock_client_runs
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import uid, wait_final
from tests.support.scripted_agent import ScriptedAgent
from tests.support.server import collect, demo_input

# One server for the module (each test uses its own thread): starting one per case was
# most of the module's time.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp_path = tmp_path_factory.mktemp("protocol-errors")
    agents = {"scripted": ScriptedAgent(), "demo": DemoAgent(tmp_path / "workspace")}
    async with in_process_server(tmp_path, agents=agents) as s:
        yield s


def start(mid: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}


def content(mid: str, delta: Any = "hi") -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta}


def end(mid: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": mid}


def tool_start(tcid: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_START", "toolCallId": tcid, "toolCallName": "lookup",
            "parentMessageId": "a1"}


CASES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "unknown type": ([{"type": "NOT_A_TYPE"}], "not an AG-UI event type"),
    "missing required field": ([{"type": "TEXT_MESSAGE_START", "role": "assistant"}],
                               "messageId"),
    "wrong field type": ([start("m1"), content("m1", 5)], "delta"),
    "content without start": ([content("m9")], "no open text message 'm9'"),
    "args without start": ([{"type": "TOOL_CALL_ARGS", "toolCallId": "c9", "delta": "{}"}],
                           "no open tool call 'c9'"),
    "end without start": ([end("m9")], "no open text message 'm9'"),
    "step end without start": ([{"type": "STEP_FINISHED", "stepName": "s"}], "no open step"),
    "duplicate start": ([start("m1"), content("m1"), start("m1")], "already open"),
    "result for an unknown call": (
        [{"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "nope", "content": "x"}],
        "no tool call 'nope'"),
    "result before the call ends": (
        [tool_start("c1"), {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1",
                            "content": "x"}], "still open"),
    "an ended message started again": ([start("ok")], "message 'ok' has already ended"),
    "an ended tool call started again": (
        [start("a1"), tool_start("c1"), {"type": "TOOL_CALL_END", "toolCallId": "c1"},
         end("a1"), tool_start("c1")], "tool call 'c1' has already ended"),
    "reserved run event": ([{"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}],
                           "run lifecycle"),
    "reserved run error": ([{"type": "RUN_ERROR", "message": "x"}], "run lifecycle"),
    "not an event at all": ([["TEXT_MESSAGE_START"]], "an event is an ag_ui.core event model"),
}


def scripted(thread_id: str, run_id: str, events: list[Any], **props: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [],
            "forwardedProps": {"events": events, **props}}


async def stored(served: InProcess, run_id: str) -> list[dict[str, Any]]:
    _, frames = await collect(served.client, "GET", f"/runs/{run_id}/events",
                              params={"follow": "false"})
    assert all(f.id is not None for f in frames)
    return [f.event for f in frames]


@pytest.mark.parametrize("keep_going", [False, True], ids=["raises", "swallows"])
@pytest.mark.parametrize("case", list(CASES))
async def test_a_broken_event_fails_the_run_and_is_never_stored(
        served: InProcess, case: str, keep_going: bool) -> None:
    broken, rule = CASES[case]
    t, r = uid("t"), uid("r")
    # Valid work before the broken event, and more after it that must not be stored.
    events = [start("ok"), content("ok", "fine"), end("ok"), *broken,
              start("late"), content("late"), end("late")]
    _, frames = await collect(served.client, "POST", "/agents/scripted",
                              json=scripted(t, r, events, keepGoing=keep_going))
    last = frames[-1].event
    assert last["type"] == "RUN_ERROR" and last["code"] == "agent_protocol_error", last
    assert rule in last["message"], last["message"]
    record = await wait_final(served.client, r)
    assert record["status"] == "failed"
    assert record["error"]["code"] == "agent_protocol_error"

    log = await stored(served, r)
    types = [e["type"] for e in log]
    assert "NOT_A_TYPE" not in types and types.count("RUN_FINISHED") == 0
    assert not any(e.get("messageId") == "late" for e in log)
    # Nothing left open: the stock client accepts the whole stored run.
    folded = stock_client_runs([log])
    assert folded["errors"] == [None], folded
    ids = [m["id"] for m in folded["messages"]]
    assert "ok" in ids and "late" not in ids

    # The thread goes on: the next run on it succeeds and folds onto the first.
    r2 = uid("r")
    _, frames = await collect(served.client, "POST", "/agents/scripted",
                              json=scripted(t, r2, [start("m2"), content("m2"), end("m2")]))
    assert frames[-1].event["type"] == "RUN_FINISHED"
    both = stock_client_runs([log, await stored(served, r2)])
    assert both["errors"][1] is None, both
    assert any(m["id"] == "m2" for m in both["messages"])


async def test_valid_streams_of_every_construct_pass(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    events = [
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "REASONING_START", "messageId": "rz"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "think"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
        {"type": "REASONING_END", "messageId": "rz"},
        start("a1"), content("a1", "calling"), end("a1"),
        tool_start("c1"), {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "x"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "role": "assistant", "delta": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "delta": "b"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        {"type": "CUSTOM", "name": "x", "value": 1},
    ]
    _, frames = await collect(served.client, "POST", "/agents/scripted",
                              json=scripted(t, r, events, result={"finishReason": "stop"}))
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
    assert frames[-1].event["result"] == {"finishReason": "stop"}
    record = await wait_final(served.client, r)
    assert record["status"] == "succeeded"
    assert record["outcome"]["result"] == {"finishReason": "stop"}
    folded = stock_client_runs([await stored(served, r)])
    assert folded["errors"] == [None], folded
    assert folded["state"] == {"n": 1}


async def test_a_tool_result_for_no_known_call_is_refused_at_admission(
        served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    body = demo_input(t, r, messages=[
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "x1", "role": "tool", "toolCallId": "ghost", "content": "42"}])
    resp = await served.client.post("/agents/demo", json=body)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_request" and "ghost" in error["message"]
    assert (await served.client.get(f"/threads/{t}")).status_code == 404
    assert (await served.client.get(f"/runs/{r}")).status_code == 404
    # A result answering a call of the same input is fine.
    body = demo_input(t, r, messages=[
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": "", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"id": "x1", "role": "tool", "toolCallId": "c1", "content": "42"}])
    _, frames = await collect(served.client, "POST", "/agents/demo", json=body)
    assert frames[-1].event["type"] == "RUN_FINISHED"
    # And one answering a call the thread already holds.
    r2 = uid("r")
    body = demo_input(t, r2, messages=[
        {"id": "x2", "role": "tool", "toolCallId": "c1", "content": "43"},
        {"id": "u2", "role": "user", "content": "again"}])
    _, frames = await collect(served.client, "POST", "/agents/demo", json=body)
    assert frames[-1].event["type"] == "RUN_FINISHED"
