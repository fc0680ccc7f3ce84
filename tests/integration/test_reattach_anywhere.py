"""spec §4: a stream may start at any seq, and re-opens whatever is open there from the
log's construct index, so the joined stream passes the stock ``@ag-ui/client``'s
verification and folds to the thread — inside a text message, a tool call's arguments,
a reasoning message, a step, a chunked message or a subagent, and after the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_client import stock_client_scenarios
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import fold_of, uid
from tests.support.scripted_agent import ScriptedAgent
from tests.support.server import collect


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    async with in_process_server(tmp_path, agents={"scripted": ScriptedAgent()}) as s:
        yield s


def every_construct() -> list[dict[str, Any]]:
    text = [{"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": f"w{i} "}
              for i in range(5)),
            {"type": "TEXT_MESSAGE_END", "messageId": "a1"}]
    return [
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "REASONING_START", "messageId": "rz"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rm", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "think "},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rm", "delta": "more"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rm"},
        {"type": "REASONING_END", "messageId": "rz"},
        *text,
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "lookup",
         "parentMessageId": "a1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": ' "x"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "42"},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sa", "name": "helper"},
        {"type": "TEXT_MESSAGE_START", "messageId": "s1", "role": "assistant",
         "subagentRunId": "sa"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "s1", "delta": "sub",
         "subagentRunId": "sa"},
        {"type": "TEXT_MESSAGE_END", "messageId": "s1", "subagentRunId": "sa"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "sa"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "role": "assistant", "delta": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "delta": "b"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "delta": "c"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"done": True}},
    ]


async def test_a_stream_from_every_seq_folds_in_the_stock_client(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    body = {"threadId": t, "runId": r, "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "go"}], "state": {},
            "tools": [], "context": [], "forwardedProps": {"events": every_construct()}}
    _, live = await collect(served.client, "POST", "/agents/scripted", json=body)
    assert live[-1].event["type"] == "RUN_FINISHED", live[-1].event
    events = [f.event for f in live]
    thread = (await served.client.get(f"/threads/{t}")).json()
    scenarios = []
    for k in range(len(events) + 1):
        _, frames = await collect(served.client, "GET", f"/runs/{r}/events",
                                  headers={"Last-Event-ID": str(k)} if k else {})
        assert [f.id for f in frames if f.id is not None] == list(range(k + 1, len(events) + 1))
        had = fold_of(events[:k])
        scenarios.append({"threadId": t, "messages": had.messages, "state": had.state,
                          "runs": [{"events": [f.event for f in frames]}]})
    for k, result in enumerate(stock_client_scenarios(scenarios)):
        assert result["errors"] == [None], (k, events[k - 1] if k else None, result["errors"])
        assert result["messages"] == thread["messages"], k
        assert result["state"] == thread["state"], k


async def test_a_stream_mid_run_reopens_what_is_open(served: InProcess) -> None:
    """A stream from inside a message that was open there: the synthesized re-opening
    comes from the index, then the stored events to the end."""
    t, r = uid("t"), uid("r")
    gate = [{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
              for _ in range(50))]
    body = {"threadId": t, "runId": r, "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "go"}], "state": {},
            "tools": [], "context": [], "forwardedProps": {"events": gate}}
    await collect(served.client, "POST", "/agents/scripted", json=body)
    _, frames = await collect(served.client, "GET", f"/runs/{r}/events",
                              headers={"Last-Event-ID": "30"})
    synthesized = [f.event["type"] for f in frames if f.id is None]
    assert synthesized[:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert frames[-1].event["type"] == "RUN_FINISHED"
