"""The LangGraph host (``outlast.agents.langgraph``) driven by the real
``pydantic-ai`` package through a real ``outlast serve``, its model the framework's own
OpenAI chat model against the scripted OpenAI-compatible server on loopback: a tool loop,
approvals answered after a restart, a SIGKILL mid-loop with the tool's side effect
counted once, cancel, and the stock ``@ag-ui/client`` folding the stream to the thread
the server stores; every stream checked by the independent AG-UI validator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_client import stock_client_runs
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import ServerProcess, collect, wait_for

pytest.importorskip("langgraph")

AGENT = "lg=outlast.agents.langgraph:factory"
FEATURES = ("agentic-chat", "backend-tool-rendering")
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.002).start()
    yield fake
    await fake.stop()


def start(server_factory: Any, model: FakeOpenAI, log: Path, *,
          data_dir: Path | None = None) -> ServerProcess:
    srv: ServerProcess = server_factory("--agent", AGENT, data_dir=data_dir, env={
        "OUTLAST_LANGGRAPH_GRAPH": "tests.support.langgraph_agents:graph",
        "OUTLAST_OPENAI_BASE_URL": model.url, "LANGGRAPH_TOOL_LOG": str(log)})
    return srv


def body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


def executed(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def test_a_tool_loop_streams_runs_its_tool_once_and_folds_as_stored(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, model, log)
    model.replies = [
        Reply(text="Let me check.", calls=[Call("get_weather", {"city": "Oslo"}, id="p-w1")],
              usage=USAGE),
        Reply(text="It is sunny in Oslo.", usage=USAGE),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/lg", json=body("p-loop", "p-r1", "hi"))
        events = [f.event for f in frames]
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        assert_valid(events, FEATURES)
        kinds = [e["type"] for e in events]
        assert {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_RESULT"} <= set(kinds)
        assert kinds.count("RUN_STARTED") == 1  # the engine's, never the adapter's
        # AG-UI 1.0: both model calls' tokens on the final event.
        [usage] = events[-1]["usage"]
        assert (usage["inputTokens"], usage["outputTokens"]) == (24, 10)
        thread = (await c.get("/threads/p-loop")).json()
        # A retry attaches: nothing runs again.
        resp, again = await collect(c, "POST", "/agents/lg", json=body("p-loop", "p-r1", "hi"))
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
    # The model saw the tool's result in the graph's own state.
    assert model.requests[1]["messages"][-1]["tool_call_id"] == "p-w1"
    assert model.requests[1]["messages"][-1]["content"] == "sunny in Oslo"


@pytest.mark.parametrize(("payload", "runs", "said"), [
    ({"approved": True}, ["send_email ann@example.com Hi"], "sent to ann@example.com"),
    ({"approved": False, "reason": "not now"}, [], "not now"),
], ids=["approved", "denied"])
async def test_an_approval_survives_a_restart(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, payload: dict[str, Any],
        runs: list[str], said: str) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, model, log, data_dir=data)
    model.replies = [Reply(text="I will send it.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="p-mail")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/lg",
                                  json=body("p-ap", "p-ap1", "email ann"))
    finished = frames[-1].event
    assert finished["outcome"]["type"] == "interrupt", finished
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required"
    assert interrupt["message"] == "Send an email to ann@example.com?"
    assert interrupt["metadata"]["value"]["args"] == {"to": "ann@example.com", "subject": "Hi"}
    assert_valid([f.event for f in frames], (*FEATURES, "human-in-the-loop"))
    assert executed(log) == [], "nothing runs before the person answers"
    srv.stop()
    srv = start(server_factory, model, log, data_dir=data)  # the framework's memory is gone
    model.replies = [Reply(text="Done.")]
    async with srv.client() as c:
        r = await c.post("/threads/p-ap/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved", "payload": payload}]})
        assert r.status_code == 200, r.text
        run_id = r.json()["run"]["runId"]
        done = await wait_final(c, run_id)
        assert done["status"] == "succeeded", done
        thread = (await c.get("/threads/p-ap")).json()
        continuation = [f.event for f in await stored_log(c, run_id)]
        await assert_every_reattach_valid(c, run_id, FEATURES, owed=["p-mail"])
        # A second turn hands the graph only the new message (its checkpoint holds the
        # rest) and the model sees the whole conversation once.
        model.replies = [Reply(text="Anything else?")]
        _, more = await collect(c, "POST", "/agents/lg", json=body("p-ap", "p-ap3", "thanks"))
        assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles.count("user") == 2 and roles[-1] == "user", roles
    assert executed(log) == runs
    # It answers the previous run's call (docs/spec.md, "Streams a client continues").
    first = next(i for i, e in enumerate(continuation) if e["type"] == "TOOL_CALL_RESULT")
    assert_valid(continuation, FEATURES, allowed={("AGUI207", first)})
    one_result_per_call(thread["messages"])
    [result] = [m for m in thread["messages"] if m.get("toolCallId") == "p-mail"]
    assert said in result["content"]
    assert thread["messages"][-1]["content"] == "Done."
    assert thread["interrupts"] == []


async def test_sigkill_mid_loop_resumes_with_the_tool_run_once_and_one_answer(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    data, log = tmp_path / "kill-data", tmp_path / "tools.log"
    srv = start(server_factory, model, log, data_dir=data)
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Lima"}, id="p-k1")]),
        Reply(text=" ".join(f"word{i}" for i in range(300)), token_delay=0.05),
        Reply(text="The one final answer."),
    ]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/lg", limit=1, json=body("p-kill", "p-k", "go"))

        async def cut_mid_reply() -> bool:
            text = "".join(f.event.get("delta", "") for f in await stored_log(c, "p-k"))
            return "word5" in text

        await wait_for(cut_mid_reply)
    srv.kill()
    assert executed(log) == ["get_weather Lima"]
    srv = start(server_factory, model, log, data_dir=data)
    async with srv.client() as c:
        done = await wait_final(c, "p-k")
        assert done["status"] == "succeeded" and done["attempts"] == 2, done["error"]
        thread = (await c.get("/threads/p-kill")).json()
        events = [f.event for f in await stored_log(c, "p-k")]
    assert executed(log) == ["get_weather Lima"], "the tool ran once"
    messages = thread["messages"]
    one_result_per_call(messages)
    answers = [m for m in messages if m["role"] == "assistant" and m.get("content")
               and not m.get("toolCalls")]
    final = [m for m in answers if (m.get("metadata") or {}).get("finishReason") != "interrupted"]
    assert [m["content"] for m in final] == ["The one final answer."], "one answer"
    cut = [m for m in answers if (m.get("metadata") or {}).get("finishReason") == "interrupted"]
    assert len(cut) == 1 and cut[0]["content"].startswith("word0 word1")
    # The cut reply never went back to the model; the tool's result did.
    last = model.requests[-1]["messages"]
    assert not any("word0" in str(m.get("content")) for m in last)
    assert any(m.get("tool_call_id") == "p-k1" for m in last)
    assert_valid(events, FEATURES)


async def test_cancel_reaches_the_model_request(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    srv = start(server_factory, model, tmp_path / "tools.log")
    model.replies = [Reply(text=" ".join(["slow"] * 500), token_delay=0.05)]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/lg", limit=1, json=body("p-cx", "p-cx1", "talk"))

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


async def test_a_model_error_fails_the_run_with_the_frameworks_message(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    srv = start(server_factory, model, tmp_path / "tools.log")
    model.replies = [Reply(status=400, error_body=json.dumps({"error": {
        "message": "bad request", "type": "invalid_request_error"}}))]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/lg", json=body("p-err", "p-e1", "hi"))
    last = frames[-1].event
    assert last["type"] == "RUN_ERROR", last
    assert_valid([f.event for f in frames], FEATURES)
