"""The Agent Framework adapter's approvals: the framework's function-approval request
becomes a durable interrupt, answered after a restart of outlast, and the tool runs
once (approved) or never (denied, or arguments edited)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import ServerProcess, collect

pytest.importorskip("agent_framework")

AGENT = "maf=outlast.agents.maf:factory"
FEATURES = ("agentic-chat", "backend-tool-rendering", "human-in-the-loop")


def start(server_factory: Any, data: Path, log: Path) -> ServerProcess:
    srv: ServerProcess = server_factory("--agent", AGENT, data_dir=data, env={
        "OUTLAST_MAF_AGENT": "tests.support.maf_agents:approval_agent",
        "MAF_TOOL_LOG": str(log)})
    return srv


async def propose(srv: ServerProcess, thread: str) -> dict[str, Any]:
    body = {"threadId": thread, "runId": f"{thread}-r1", "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "email ann"}],
            "tools": [], "context": [], "state": {}}
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/maf", json=body)
    finished = frames[-1].event
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt", finished
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["metadata"]["tool"] == "send_email"
    assert interrupt["metadata"]["args"] == {"to": "ann@example.com", "subject": "Hi"}
    kinds = [f.event["type"] for f in frames]
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"} <= set(kinds)
    assert "TOOL_CALL_RESULT" not in kinds
    assert_valid([f.event for f in frames], FEATURES)
    return dict(interrupt)


@pytest.mark.parametrize(("payload", "runs"), [
    ({"approved": True}, ["send_email ann@example.com Hi"]),
    ({"approved": False}, []),
    ({"approved": True, "editedArgs": {"to": "eve@example.com", "subject": "Hi"}}, []),
])
async def test_an_approval_survives_a_restart_and_applies_to_the_proposed_call(
        server_factory: Any, tmp_path: Path, payload: dict[str, Any], runs: list[str]) -> None:
    data, log = tmp_path / "maf-data", tmp_path / "maf-tools.log"
    srv = start(server_factory, data, log)
    interrupt = await propose(srv, "maf-ap")
    assert not log.exists(), "nothing runs before the person answers"
    srv.stop()
    srv = start(server_factory, data, log)  # a new process: the framework's memory is gone
    async with srv.client() as c:
        thread = (await c.get("/threads/maf-ap")).json()
        assert [i["id"] for i in thread["interrupts"]] == [interrupt["id"]]
        r = await c.post("/threads/maf-ap/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved", "payload": payload}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, r.json()["run"]["runId"])
        assert done["status"] == "succeeded", done
        thread = (await c.get("/threads/maf-ap")).json()
        continuation = [f.event for f in await stored_log(c, done["runId"])]
    # It opens with the result owed to the previous run's call (docs/spec.md, "Streams
    # a client continues"): the one finding allowed.
    assert continuation[1]["type"] == "TOOL_CALL_RESULT"
    assert_valid(continuation, FEATURES, allowed={("AGUI207", 1)})
    async with srv.client() as c:
        await assert_every_reattach_valid(c, "maf-ap-r1", FEATURES)
        await assert_every_reattach_valid(c, done["runId"], FEATURES,
                                          owed=[interrupt["toolCallId"]])
    assert (log.read_text().splitlines() if log.exists() else []) == runs
    messages = thread["messages"]
    one_result_per_call(messages)
    [result] = [m for m in messages if m.get("toolCallId") == interrupt["toolCallId"]]
    if runs:
        assert result["content"] == "sent to ann@example.com"
    else:
        assert "rejected" in result["content"]
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == f"Done: {result['content']}"
