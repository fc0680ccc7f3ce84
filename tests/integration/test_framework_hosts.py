"""One contract, every framework host: Pydantic AI, the OpenAI Agents SDK and LangGraph,
each driven by its real package through a real ``outlast serve``, its model the
framework's own OpenAI-compatible client against the scripted server on loopback.

For each host: a tool loop (the stock ``@ag-ui/client`` folds the stream to the thread
the server stores, usage on the final event, a retry attaches, a reattach after every
seq), cancel reaching the model request, and a model error; every stream checked by
the independent AG-UI validator. Then what only one host has: a malformed answer
(Pydantic AI), a handoff (OpenAI Agents SDK).

Across restarts: test_framework_hosts_restarts.py and test_framework_hosts_sigkill.py; a
tool cut off by a crash: test_framework_hosts_in_doubt.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_client import stock_client_runs
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import (
    FEATURES,
    USAGE,
    Host,
    body,
    executed,
    model,
    params,
    start,
)
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import collect, wait_for

__all__ = ["model"]  # the scripted model each test gets (a fixture)


@pytest.mark.parametrize("host", params())
async def test_a_tool_loop_runs_its_tool_once_and_folds_as_stored(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, host, model, log)
    model.replies = [
        Reply(text="Let me check.", calls=[Call("get_weather", {"city": "Oslo"}, id="p-w1")],
              usage=USAGE),
        Reply(text="It is sunny in Oslo.", usage=USAGE),
    ]
    path = f"/agents/{host.name}"
    async with srv.client() as c:
        _, frames = await collect(c, "POST", path, json=body("p-loop", "p-r1", "hi"))
        events = [f.event for f in frames]
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        assert_valid(events, FEATURES)
        kinds = [e["type"] for e in events]
        assert {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_RESULT"} <= set(kinds)
        assert kinds.count("RUN_STARTED") == 1  # the engine's, never the framework's
        # AG-UI 1.0: both model calls' tokens on the final event.
        [usage] = events[-1]["usage"]
        assert (usage["inputTokens"], usage["outputTokens"]) == (24, 10)
        thread = (await c.get("/threads/p-loop")).json()
        # A retry attaches: nothing runs again.
        resp, again = await collect(c, "POST", path, json=body("p-loop", "p-r1", "hi"))
        assert resp.headers["outlast-replayed"] == "true"
        assert [f.event for f in again] == events
        await assert_every_reattach_valid(c, "p-r1", FEATURES)
        log_events = [f.event for f in await stored_log(c, "p-r1")]
    assert executed(log) == ["get_weather Oslo"]
    messages = thread["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2]["content"] == "sunny in Oslo"
    assert messages[-1]["content"] == "It is sunny in Oslo."
    folded = stock_client_runs([log_events])
    assert folded["errors"] == [None], folded
    assert folded["messages"] == messages
    # The model saw the tool's result in the framework's own history.
    assert model.requests[1]["messages"][-1]["tool_call_id"] == host.sent_call_id("p-w1")
    assert model.requests[1]["messages"][-1]["content"] == host.model_sees("sunny in Oslo")


@pytest.mark.parametrize("host", params())
async def test_cancel_reaches_the_model_request(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    srv = start(server_factory, host, model, tmp_path / "tools.log")
    model.replies = [Reply(text=" ".join(["slow"] * 500), token_delay=0.05)]
    async with srv.client() as c:
        await collect(c, "POST", f"/agents/{host.name}", limit=1,
                      json=body("p-cx", "p-cx1", "talk"))

        async def streaming() -> bool:
            return any(f.event["type"] == "TEXT_MESSAGE_CONTENT"
                       for f in await stored_log(c, "p-cx1"))

        await wait_for(streaming)
        assert model.disconnects == 0
        assert (await c.post("/runs/p-cx1/cancel")).status_code in (200, 202)
        done = await wait_final(c, "p-cx1")
        assert done["status"] == "cancelled"
        assert_valid([f.event for f in await stored_log(c, "p-cx1")], FEATURES)

    async def closed() -> bool:
        return model.disconnects == 1

    await wait_for(closed, timeout=10)


@pytest.mark.parametrize("host", params())
async def test_a_model_error_fails_the_run(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    srv = start(server_factory, host, model, tmp_path / "tools.log")
    model.replies = [Reply(status=400, error_body=json.dumps({"error": {
        "message": "bad request", "type": "invalid_request_error"}}))]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", f"/agents/{host.name}",
                                  json=body("p-err", "p-e1", "hi"))
        record = await wait_final(c, "p-e1")
    assert frames[-1].event["type"] == "RUN_ERROR", frames[-1].event
    assert record["status"] == "failed"
    assert_valid([f.event for f in frames], FEATURES)


@pytest.mark.parametrize("host", params("pydantic-ai"))
async def test_a_malformed_answer_fails_the_continuation_and_runs_nothing(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, host, model, log)
    model.replies = [Reply(calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="p-bad")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", f"/agents/{host.name}",
                                  json=body("p-bad", "p-b1", "mail"))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        r = await c.post("/threads/p-bad/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": "yes"}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, r.json()["run"]["runId"])
    assert done["status"] == "failed", done
    assert "responseSchema" in done["error"]["message"]
    assert executed(log) == []


@pytest.mark.parametrize("host", params("openai-agents"))
async def test_a_handoff_names_the_steps_of_the_agent_handed_to(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, host, model, log)
    model.replies = [
        Reply(calls=[Call("transfer_to_forecaster", {}, id="h-1")]),
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Rome"}, id="h-2")]),
        Reply(text="Sunny in Rome."),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", f"/agents/{host.name}",
                                  json=body("h-t", "h-r1", "forecast"))
        thread = (await c.get("/threads/h-t")).json()
    events = [f.event for f in frames]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["result"] == "Sunny in Rome."  # the SDK's final output
    assert_valid(events, FEATURES)
    # One step per model response, named after the agent that has the turn.
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps == ["triage", "forecaster", "forecaster"]
    assert len(steps) == sum(e["type"] == "STEP_FINISHED" for e in events)
    assert executed(log) == ["get_weather Rome"]
    one_result_per_call(thread["messages"])
    assert thread["messages"][-1]["content"] == "Sunny in Rome."
