"""One contract, every framework host: Pydantic AI, the OpenAI Agents SDK and LangGraph,
each driven by its real package through a real ``outlast serve``, its model the
framework's own OpenAI-compatible client against the scripted server on loopback.

For each host: a tool loop (the stock ``@ag-ui/client`` folds the stream to the thread
the server stores, usage on the final event, a retry attaches, a reattach after every
seq), an approval answered after a restart (and a later turn), a SIGKILL mid-reply
(the tool's side effect counted once, one answer), cancel reaching the model request,
and a model error; every stream checked by the independent AG-UI validator. Then what
only one host has: a malformed answer (Pydantic AI), a handoff (OpenAI Agents SDK)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_client import stock_client_runs
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import ServerProcess, collect, wait_for

FEATURES = ("agentic-chat", "backend-tool-rendering")
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


@dataclass(frozen=True)
class Host:
    """A framework host and the test agent it serves."""

    name: str  # the agent's name: POST /agents/<name>
    module: str  # the framework's package
    factory: str  # outlast.agents.<host>:factory
    variable: str  # the factory's environment variable
    target: str  # the test agent, module:attr
    # Approval answers and what follows: payload, tool lines run, text in the result.
    answers: tuple[tuple[str, dict[str, Any], list[str], str], ...]


APPROVED = ("approved", {"approved": True}, ["send_email ann@example.com Hi"],
            "sent to ann@example.com")
DENIED = ("denied", {"approved": False, "reason": "not now"}, [], "not now")
EDITED = {"approved": True, "editedArgs": {"to": "bo@example.com", "subject": "Hi"}}
HOSTS = {
    "pydantic-ai": Host(
        "pyd", "pydantic_ai", "outlast.agents.pydantic_ai:factory",
        "OUTLAST_PYDANTIC_AI_AGENT", "tests.support.pydantic_ai_agents:weather_agent",
        (APPROVED, DENIED,
         ("edited", EDITED, ["send_email bo@example.com Hi"], "sent to bo@example.com"))),
    "openai-agents": Host(
        "oa", "agents", "outlast.agents.openai_agents:factory",
        "OUTLAST_OPENAI_AGENTS_AGENT", "tests.support.openai_agents_agents:triage_agent",
        # The SDK approves a call as the model made it: edited arguments are refused.
        (APPROVED, DENIED, ("edited", EDITED, [], "edited"))),
    "langgraph": Host(
        "lg", "langgraph", "outlast.agents.langgraph:factory",
        "OUTLAST_LANGGRAPH_GRAPH", "tests.support.langgraph_agents:graph",
        (APPROVED, DENIED)),
}


# With Microsoft Agent Framework's adapter: every shipped host of a framework's agent.
WITH_MAF = {**HOSTS, "maf": Host(
    "maf", "agent_framework", "outlast.agents.maf:factory", "OUTLAST_MAF_AGENT",
    "tests.support.maf_agents:slow_agent", ())}


def params(*names: str) -> list[Any]:
    """The hosts, each skipped without its package (the test extra installs them all)."""
    return [pytest.param(HOSTS[n], id=n, marks=pytest.mark.skipif(
        importlib.util.find_spec(HOSTS[n].module) is None, reason=f"{HOSTS[n].module} "
        "is not installed")) for n in (names or HOSTS)]


def answers() -> list[Any]:
    return [pytest.param(host, payload, runs, said, id=f"{key}-{case}",
                         marks=p.marks)
            for key, host in HOSTS.items() for p in params(key)
            for case, payload, runs, said in host.answers]


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.002).start()
    yield fake
    await fake.stop()


def start(server_factory: Any, host: Host, model: FakeOpenAI, log: Path, *,
          data_dir: Path | None = None) -> ServerProcess:
    srv: ServerProcess = server_factory(
        "--agent", f"{host.name}={host.factory}", data_dir=data_dir,
        env={host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
             "HOST_TOOL_LOG": str(log)})
    return srv


def body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


def executed(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


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
    assert model.requests[1]["messages"][-1]["tool_call_id"] == "p-w1"
    assert model.requests[1]["messages"][-1]["content"] == "sunny in Oslo"


@pytest.mark.parametrize(("host", "payload", "runs", "said"), answers())
async def test_an_approval_survives_a_restart(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host,
        payload: dict[str, Any], runs: list[str], said: str) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    path = f"/agents/{host.name}"
    srv = start(server_factory, host, model, log, data_dir=data)
    model.replies = [Reply(text="I will send it.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="p-mail")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", path, json=body("p-ap", "p-ap1", "email ann"))
    finished = frames[-1].event
    assert finished["outcome"]["type"] == "interrupt", finished
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "p-mail"
    assert "ann@example.com" in json.dumps(interrupt)
    assert_valid([f.event for f in frames], (*FEATURES, "human-in-the-loop"))
    assert executed(log) == [], "nothing runs before the person answers"
    srv.stop()
    srv = start(server_factory, host, model, log, data_dir=data)  # its memory is gone
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
        # A later turn: the model sees the whole conversation once.
        model.replies = [Reply(text="Anything else?")]
        _, more = await collect(c, "POST", path, json=body("p-ap", "p-ap3", "thanks"))
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


@pytest.mark.parametrize("host", params())
async def test_sigkill_mid_reply_resumes_with_the_tool_run_once_and_one_answer(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    data, log = tmp_path / "kill-data", tmp_path / "tools.log"
    srv = start(server_factory, host, model, log, data_dir=data)
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Lima"}, id="p-k1")]),
        Reply(text=" ".join(f"word{i}" for i in range(300)), token_delay=0.05),
        Reply(text="The one final answer."),
    ]
    async with srv.client() as c:
        await collect(c, "POST", f"/agents/{host.name}", limit=1,
                      json=body("p-kill", "p-k", "go"))

        async def cut_mid_reply() -> bool:
            text = "".join(f.event.get("delta", "") for f in await stored_log(c, "p-k"))
            return "word5" in text

        await wait_for(cut_mid_reply)
    srv.kill()
    assert executed(log) == ["get_weather Lima"]
    srv = start(server_factory, host, model, log, data_dir=data)
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
    mark = [(m.get("metadata") or {}).get("finishReason") for m in answers]
    final = [m["content"] for m, f in zip(answers, mark, strict=True) if f != "interrupted"]
    assert final == ["The one final answer."], "one answer"
    cut = [m["content"] for m, f in zip(answers, mark, strict=True) if f == "interrupted"]
    assert len(cut) == 1 and cut[0].startswith("word0 word1")
    # The cut reply never went back to the model; the tool's result did.
    last = model.requests[-1]["messages"]
    assert not any("word0" in str(m.get("content")) for m in last)
    assert any(m.get("tool_call_id") == "p-k1" for m in last)
    assert_valid(events, FEATURES)


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


@pytest.mark.parametrize("said", ["happened", "run_again"])
@pytest.mark.parametrize("host", [pytest.param(
    h, id=key, marks=pytest.mark.skipif(importlib.util.find_spec(h.module) is None,
                                         reason=f"{h.module} is not installed"))
    for key, h in WITH_MAF.items()])
async def test_a_tool_cut_off_by_sigkill_asks_a_person(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host,
        said: str) -> None:
    """SIGKILL while a tool runs: the resumed run asks whether it happened; the answer
    decides (the person's result, or one more run), through the framework's own loop."""
    data, log = tmp_path / "doubt-data", tmp_path / "tools.log"
    slow = {"HOST_SLOW_SECONDS": "60"}
    srv = server_factory("--agent", f"{host.name}={host.factory}", data_dir=data, env={
        host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
        "HOST_TOOL_LOG": str(log), **slow})
    model.replies = [Reply(calls=[Call("slow_step", {"label": "A"}, id="d-1")])]
    async with srv.client() as c:
        await collect(c, "POST", f"/agents/{host.name}", limit=1,
                      json=body("d-t", "d-r", "go"))

        async def in_the_tool() -> bool:
            return executed(log) == ["slow_step start A"]

        await wait_for(in_the_tool)
    srv.kill()
    srv = server_factory("--agent", f"{host.name}={host.factory}", data_dir=data, env={
        host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
        "HOST_TOOL_LOG": str(log)})
    async with srv.client() as c:
        record = await wait_final(c, "d-r")
        assert record["status"] == "interrupted" and record["attempts"] == 2, (
            record, executed(log), (await c.get("/threads/d-t")).json()["messages"],
            "\n".join(srv.log[-30:]))
        [question] = (await c.get("/threads/d-t")).json()["interrupts"]
        assert question["reason"] == "confirmation" and question["toolCallId"] == "d-1"
        assert question["metadata"]["tool"] == "slow_step"
        assert question["metadata"]["args"] == {"label": "A"}
        assert executed(log) == ["slow_step start A"]
        model.replies = [Reply(text="Settled.")]
        payload = {"answer": "happened", "result": "done by hand"} if said == "happened" \
            else {"answer": "run_again"}
        r = await c.post("/threads/d-t/resume", json={"runId": "d-c", "resume": [
            {"interruptId": question["id"], "status": "resolved", "payload": payload}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "d-c")
        assert done["status"] == "succeeded", (done, "\n".join(srv.log[-30:]))
        thread = (await c.get("/threads/d-t")).json()
        events = [f.event for f in await stored_log(c, "d-c")]
    one_result_per_call(thread["messages"])
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "d-1"]
    if said == "happened":
        assert executed(log) == ["slow_step start A"], "never ran again"
        assert "done by hand" in result
    else:
        assert executed(log) == ["slow_step start A", "slow_step start A",
                                 "slow_step done A"], "ran once more"
        assert "A done" in result
    assert thread["messages"][-1]["content"] == "Settled."
    sent = model.requests[-1]["messages"]
    assert any(m.get("tool_call_id") == "d-1" and result in str(m.get("content"))
               for m in sent), "the model saw the settled result"
    assert_valid(events, FEATURES)
