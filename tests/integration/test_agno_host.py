"""What only the Agno host has, driven by the real ``agno`` package through a real
``outlast serve``: Agno's own session (its ``session_state``) kept in the thread, so a
new process continues it, one thread's never another's, even at once; the model's
reasoning streamed and kept out of the next request; a client's own (front-end) tool
left for it and its answer taken; a continuation of a confirmed
call cut off by SIGKILL, mid-reply or while the confirmed tool runs; and a served
object that is not an Agno agent refused with a clear error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import FEATURES, HOSTS, body, executed, model, params
from tests.support.runs import one_result_per_call, stored_log, wait_final, wait_streamed
from tests.support.server import ServerProcess, collect, wait_for

__all__ = ["model"]  # the scripted model each test gets (a fixture)

pytestmark = pytest.mark.parametrize("host", params("agno"))


def _serve(server_factory: Any, model: FakeOpenAI, log: Path, data: Path,
           target: str) -> ServerProcess:
    host = HOSTS["agno"]
    srv: ServerProcess = server_factory(
        "--agent", f"{host.name}={host.factory}", data_dir=data,
        env={host.variable: target, "OUTLAST_OPENAI_BASE_URL": model.url,
             "HOST_TOOL_LOG": str(log)})
    return srv


async def _visit(srv: ServerProcess, model: FakeOpenAI, thread: str, run: str) -> str:
    model.replies = [Reply(calls=[Call("note_visit", {}, id=f"call_{run}")]),
                     Reply(text="Noted.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno", json=body(thread, run, "visit"))
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
    [result] = [f.event["content"] for f in frames if f.event["type"] == "TOOL_CALL_RESULT"]
    return str(result)


async def test_agnos_session_state_continues_in_a_new_process(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    target = "tests.support.agno_agents:visits_agent"
    srv = _serve(server_factory, model, log, data, target)
    assert await _visit(srv, model, "v-a", "v-1") == "visit 1"
    srv.stop()
    srv = _serve(server_factory, model, log, data, target)  # its memory is gone
    assert await _visit(srv, model, "v-a", "v-2") == "visit 2"
    # Another thread has its own session.
    assert await _visit(srv, model, "v-b", "v-3") == "visit 1"
    assert executed(log) == ["note_visit 1", "note_visit 2", "note_visit 1"]
    async with srv.client() as c:  # the thread's AG-UI state is Agno's session_state
        assert (await c.get("/threads/v-a")).json()["state"] == {"visits": 2}
    # The conversation went on too: the model saw the first turn in the second.
    second = model.requests[2]["messages"]
    assert [m["role"] for m in second].count("user") == 2, json.dumps(second)


async def test_a_clients_state_is_the_runs_session_state(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    """As Agno's own AGUI interface does: the run's AG-UI state goes in as Agno's
    ``session_state`` (over the stored one), and what the run leaves comes back."""
    srv = _serve(server_factory, model, tmp_path / "tools.log", tmp_path / "data",
                 "tests.support.agno_agents:visits_agent")
    model.replies = [Reply(calls=[Call("note_visit", {}, id="call_s1")]), Reply(text="Noted.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno", json={
            **body("st-a", "st-1", "visit"), "state": {"visits": 10, "theme": "dark"}})
        events = [f.event for f in frames]
        thread = (await c.get("/threads/st-a")).json()
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["visit 11"]
    snapshot = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"][-1]
    assert snapshot == thread["state"] == {"visits": 11, "theme": "dark"}
    assert_valid(events, FEATURES)


async def test_the_models_reasoning_streams_and_stays_out_of_the_next_request(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    srv = _serve(server_factory, model, tmp_path / "tools.log", tmp_path / "data",
                 HOSTS["agno"].target)
    model.replies = [Reply(reasoning="Oslo is in Norway.", text="Sunny.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno", json=body("r-t", "r-1", "hi"))
        events = [f.event for f in frames]
        model.replies = [Reply(text="More.")]
        _, more = await collect(c, "POST", "/agents/agno", json=body("r-t", "r-2", "and?"))
        thread = (await c.get("/threads/r-t")).json()
    assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
    assert_valid(events, FEATURES)
    kinds = [e["type"] for e in events]
    assert kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START"), kinds
    assert "".join(e["delta"] for e in events
                   if e["type"] == "REASONING_MESSAGE_CONTENT") == "Oslo is in Norway."
    assert [(m["role"], m["content"]) for m in thread["messages"]] == [
        ("user", "hi"), ("reasoning", "Oslo is in Norway."), ("assistant", "Sunny."),
        ("user", "and?"), ("assistant", "More.")]
    # The reasoning is the thread's, not the next request's.
    assert "Norway" not in json.dumps(model.requests[-1]["messages"])


async def test_a_clients_own_tool_is_left_for_the_client_then_answered(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    """An AG-UI front-end tool, as Agno's own AGUI interface takes it (an external tool):
    the run ends with the call pending; the client's result, sent with the next run,
    goes to the model."""
    srv = _serve(server_factory, model, tmp_path / "tools.log", tmp_path / "data",
                 HOSTS["agno"].target)
    pick = {"name": "pick_color", "description": "Ask the person for a color",
            "parameters": {"type": "object", "properties": {}}}
    model.replies = [Reply(text="Asking.", calls=[Call("pick_color", {}, id="f-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno",
                                  json={**body("fe-t", "fe-1", "pick"), "tools": [pick]})
        finished = frames[-1].event
        assert finished["type"] == "RUN_FINISHED", finished
        assert finished["outcome"]["pendingToolCallIds"] == ["f-1"], finished
        assert "pick_color" in {t["function"]["name"] for t in model.requests[0]["tools"]}
        assert_valid([f.event for f in frames], FEATURES)
        held = (await c.get("/threads/fe-t")).json()["messages"]
        model.replies = [Reply(text="Blue it is.")]
        _, frames = await collect(c, "POST", "/agents/agno", json={
            **body("fe-t", "fe-2", "unused"), "tools": [pick], "messages": [
                *held, {"id": "fe-r", "role": "tool", "toolCallId": "f-1", "content": "blue"}]})
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        thread = (await c.get("/threads/fe-t")).json()
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert thread["messages"][-1]["content"] == "Blue it is."
    assert model.requests[-1]["messages"][-1] == {
        "role": "tool", "tool_call_id": HOSTS["agno"].sent_call_id("f-1"), "content": "blue"}
    assert executed(tmp_path / "tools.log") == []


async def test_one_served_agent_runs_two_threads_at_once(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    log = tmp_path / "tools.log"
    srv = _serve(server_factory, model, log, tmp_path / "data",
                 "tests.support.agno_agents:visits_agent")
    slow = " ".join(f"w{i}" for i in range(40))
    model.replies = [Reply(calls=[Call("note_visit", {})]), Reply(calls=[Call("note_visit", {})]),
                     Reply(text=slow, token_delay=0.02), Reply(text=slow, token_delay=0.02)]
    async with srv.client() as c:
        runs = await asyncio.gather(
            collect(c, "POST", "/agents/agno", json=body("o-a", "o-a1", "from a")),
            collect(c, "POST", "/agents/agno", json=body("o-b", "o-b1", "from b")))
        threads = [(await c.get(f"/threads/{t}")).json() for t in ("o-a", "o-b")]
    for _, frames in runs:
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        assert_valid([f.event for f in frames], FEATURES)
    # Each model request holds its own thread's conversation, nothing of the other's.
    for request in model.requests:
        said = str(request["messages"])
        assert ("from a" in said) != ("from b" in said), said
    for thread in threads:  # each thread's Agno session_state is its own
        assert [(m["role"], m.get("content")) for m in thread["messages"][2:]] == [
            ("tool", "visit 1"), ("assistant", slow)]
    assert executed(log) == ["note_visit 1", "note_visit 1"]


async def _confirm(srv: ServerProcess, model: FakeOpenAI, call: Call, thread: str) -> str:
    """A run that stops for ``call``'s confirmation, confirmed: the continuation's id."""
    model.replies = [Reply(text="Asking first.", calls=[call])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno", json=body(thread, "c-1", "go"))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        r = await c.post(f"/threads/{thread}/resume", json={"runId": "c-2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
    return "c-2"


async def test_a_continuation_killed_mid_reply_resumes_with_one_answer(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    target = HOSTS["agno"].target
    srv = _serve(server_factory, model, log, data, target)
    await _confirm(srv, model, Call("send_email", {"to": "ann@example.com", "subject": "Hi"},
                                    id="c-mail"), "c-t")
    model.replies = [Reply(text=" ".join(f"word{i}" for i in range(300)), token_delay=0.05),
                     Reply(text="The one final answer.")]
    async with srv.client() as c:
        await wait_streamed(c, "c-2", "word5")
    srv.kill()
    srv = _serve(server_factory, model, log, data, target)
    async with srv.client() as c:
        done = await wait_final(c, "c-2")
        assert done["status"] == "succeeded" and done["attempts"] == 2, done
        thread = (await c.get("/threads/c-t")).json()
        events = [f.event for f in await stored_log(c, "c-2")]
    assert executed(log) == ["send_email ann@example.com Hi"], "the tool ran once"
    messages = thread["messages"]
    one_result_per_call(messages)
    said = [(m["content"], (m.get("metadata") or {}).get("finishReason"))
            for m in messages if m["role"] == "assistant" and not m.get("toolCalls")]
    assert said[-1] == ("The one final answer.", None), said
    assert said[-2][0].startswith("word0 word1") and said[-2][1] == "interrupted", said
    last = model.requests[-1]["messages"]
    assert not any("word0" in str(m.get("content")) for m in last)
    assert [m["content"] for m in last if m["role"] == "tool"] == ["sent to ann@example.com"]
    assert thread["interrupts"] == []
    assert_valid(events, FEATURES, allowed={("AGUI207", next(
        i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_RESULT"))})


@pytest.mark.parametrize("said", ["run_again", "fail"])
async def test_a_confirmed_tool_cut_off_by_sigkill_asks_a_person(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any,
        monkeypatch: pytest.MonkeyPatch, said: str) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    target = HOSTS["agno"].target
    monkeypatch.setenv("HOST_SLOW_SECONDS", "60")  # the first server's tool never ends
    srv = _serve(server_factory, model, log, data, target)
    await _confirm(srv, model, Call("slow_confirmed", {"label": "B"}, id="c-slow"), "s-t")

    async def in_the_tool() -> bool:
        return executed(log) == ["slow_step start B"]

    await wait_for(in_the_tool)
    srv.kill()
    monkeypatch.delenv("HOST_SLOW_SECONDS")
    srv = _serve(server_factory, model, log, data, target)
    async with srv.client() as c:
        record = await wait_final(c, "c-2")
        assert record["status"] == "interrupted", (record, "\n".join(srv.log[-30:]))
        [question] = (await c.get("/threads/s-t")).json()["interrupts"]
        assert question["reason"] == "confirmation" and question["toolCallId"] == "c-slow"
        model.replies = [Reply(text="Settled.")]
        r = await c.post("/threads/s-t/resume", json={"runId": "c-3", "resume": [{
            "interruptId": question["id"], "status": "resolved",
            "payload": {"answer": said}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "c-3")
        thread = (await c.get("/threads/s-t")).json()
    if said == "fail":  # nothing runs again, and the run says why
        assert done["status"] == "failed", done
        assert done["error"]["code"] == "effect_uncertain", done
        assert executed(log) == ["slow_step start B"]
        return
    assert done["status"] == "succeeded", (done, "\n".join(srv.log[-30:]))
    assert executed(log) == ["slow_step start B", "slow_step start B", "slow_step done B"]
    one_result_per_call(thread["messages"])
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "c-slow"]
    assert result == "B done"
    assert thread["messages"][-1]["content"] == "Settled."
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"] == [
        "B done"]


async def test_an_object_that_is_not_an_agno_agent_is_refused(host: Any) -> None:
    from outlast.agents.agno import AgnoHost, serves

    assert not serves(object())
    with pytest.raises(TypeError, match=r"agno\.agent\.Agent"):
        AgnoHost(object())
