"""What the Strands host does beyond the host contract suite, driven by the real
``strands-agents`` package through a real ``outlast serve``: one served ``Agent`` runs
many threads at once (Strands refuses concurrent calls on one agent), the agent's own
state (``agent.state``) continues in a new process, a tool that asks a person from
inside its body, the SDK's ``HumanInTheLoop`` intervention answered after a restart,
structured output as the run's result, and a call a crash cut off before its approval
hook asked handed back to Strands' own loop (never run unasked)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import FEATURES, HOSTS, Host, body, executed, model, start
from tests.support.runs import one_result_per_call, wait_final
from tests.support.server import collect, wait_for

__all__ = ["model"]  # the scripted model each test gets (a fixture)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("strands") is None,
                                reason="strands-agents is not installed")

HITL = Host("strands", "strands", "outlast.agents.strands:factory", "OUTLAST_STRANDS_AGENT",
            "tests.support.strands_agents:hitl_agent", ())


async def test_one_served_agent_runs_two_threads_at_once(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    srv = start(server_factory, HOSTS["strands"], model, tmp_path / "tools.log")
    slow = " ".join(f"w{i}" for i in range(40))
    model.replies = [Reply(text=slow, token_delay=0.02), Reply(text=slow, token_delay=0.02)]
    async with srv.client() as c:
        (_, first), (_, second) = await asyncio.gather(
            collect(c, "POST", "/agents/strands", json=body("s-a", "s-a1", "from a")),
            collect(c, "POST", "/agents/strands", json=body("s-b", "s-b1", "from b")))
        threads = [(await c.get(f"/threads/{t}")).json() for t in ("s-a", "s-b")]
    for frames in (first, second):
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        assert_valid([f.event for f in frames], FEATURES)
    # Each model request holds its own thread's conversation, nothing of the other's.
    said = sorted(str(r["messages"][1:]) for r in model.requests)
    assert "from a" in said[0] and "from b" not in said[0], said
    assert "from b" in said[1] and "from a" not in said[1], said
    for thread in threads:
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
        assert thread["messages"][-1]["content"] == slow


async def test_the_agents_own_state_continues_in_a_new_process(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, HITL, model, log, data_dir=data)
    model.replies = [Reply(calls=[Call("count", {}, id="c-1")]), Reply(text="One.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-n", "s-n1", "1"))
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
    srv.stop()
    srv = start(server_factory, HITL, model, log, data_dir=data)  # its memory is gone
    model.replies = [Reply(calls=[Call("count", {}, id="c-2")]), Reply(text="Two.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-n", "s-n2", "2"))
        thread = (await c.get("/threads/s-n")).json()
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
    assert executed(log) == ["count 1", "count 2"], "agent.state came back from the thread"
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant",
                     "tool"], roles
    one_result_per_call(thread["messages"])
    assert [m["content"] for m in thread["messages"] if m["role"] == "tool"] == [
        "count is 1", "count is 2"]


async def test_a_tool_that_asks_from_inside_runs_on_when_answered(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, HITL, model, log, data_dir=data)
    model.replies = [Reply(calls=[Call("deploy", {"target": "prod"}, id="dp-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-d", "s-d1", "go"))
    finished = frames[-1].event
    assert finished["outcome"]["type"] == "interrupt", finished
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "dp-1" and interrupt["message"] == "Deploy to prod?"
    assert executed(log) == ["deploy asks prod"]
    srv.stop()
    srv = start(server_factory, HITL, model, log, data_dir=data)
    model.replies = [Reply(text="Deployed.")]
    async with srv.client() as c:
        r = await c.post("/threads/s-d/resume", json={"runId": "s-d2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "s-d2")
        thread = (await c.get("/threads/s-d")).json()
    assert done["status"] == "succeeded", done
    # Its body runs again from the start, as in Strands, and on past the question once.
    assert executed(log) == ["deploy asks prod", "deploy asks prod", "deploy prod"]
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "dp-1"]
    assert result == "deployed to prod"
    assert thread["messages"][-1]["content"] == "Deployed."


@pytest.mark.parametrize(("approved", "runs", "said"), [
    (True, ["send_email ann@example.com Hi"], "sent to ann@example.com"),
    (False, [], "CONFIRMATION_FAILED"),
])
async def test_human_in_the_loop_answered_after_a_restart(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, approved: bool,
        runs: list[str], said: str) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, HITL, model, log, data_dir=data)
    model.replies = [Reply(text="Sending.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="h-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-h", "s-h1", "mail"))
    [interrupt] = frames[-1].event["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "h-1"
    assert interrupt["metadata"]["name"] == "strands:human-in-the-loop"
    assert "send_email" in interrupt["message"]
    srv.stop()
    srv = start(server_factory, HITL, model, log, data_dir=data)
    model.replies = [Reply(text="Done.")]
    async with srv.client() as c:
        r = await c.post("/threads/s-h/resume", json={"runId": "s-h2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": approved}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "s-h2")
        thread = (await c.get("/threads/s-h")).json()
    assert done["status"] == "succeeded", done
    assert executed(log) == runs
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "h-1"]
    assert said in result
    # The model was told in Strands' own words.
    assert any(m.get("tool_call_id") == "h-1" and said in str(m.get("content"))
               for m in model.requests[-1]["messages"])


async def test_structured_output_is_the_runs_result(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    host = Host("strands", "strands", "outlast.agents.strands:factory",
                "OUTLAST_STRANDS_AGENT", "tests.support.strands_agents:forecast_agent", ())
    srv = start(server_factory, host, model, tmp_path / "tools.log")
    model.replies = [Reply(calls=[Call("Forecast", {"city": "Oslo", "sky": "sunny"},
                                       id="so-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-o", "s-o1", "?"))
    events = [f.event for f in frames]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["result"] == {"city": "Oslo", "sky": "sunny"}
    assert_valid(events, FEATURES)


async def test_a_call_cut_off_before_its_approval_is_asked_about_after_a_crash(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    """SIGKILL after the model proposed ``send_email`` but before the approval hook
    asked: the resumed run hands the call back to Strands' own loop, whose hook asks the
    person; the email is never sent unasked."""
    data, log = tmp_path / "data", tmp_path / "tools.log"
    gated = Host("strands", "strands", "outlast.agents.strands:factory",
                 "OUTLAST_STRANDS_AGENT", "tests.support.strands_agents:gated_agent", ())
    env = {gated.variable: gated.target, "OUTLAST_OPENAI_BASE_URL": model.url,
           "HOST_TOOL_LOG": str(log)}
    srv = server_factory("--agent", f"strands={gated.factory}", data_dir=data,
                         env={**env, "HOST_SLOW_SECONDS": "60"})
    model.replies = [Reply(text="Sending.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="g-1")])]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/strands", limit=1, json=body("s-g", "s-g1", "mail"))

        async def at_the_gate() -> bool:
            return executed(log) == ["gate send_email"]

        await wait_for(at_the_gate)
    srv.kill()
    srv = server_factory("--agent", f"strands={gated.factory}", data_dir=data, env=env)
    async with srv.client() as c:
        record = await wait_final(c, "s-g1")
        assert record["status"] == "interrupted" and record["attempts"] == 2, record
        [interrupt] = (await c.get("/threads/s-g")).json()["interrupts"]
        assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == "g-1"
        assert interrupt["metadata"]["kind"] == "strands_interrupt", interrupt
        assert executed(log) == ["gate send_email", "gate send_email"], "nothing sent unasked"
        model.replies = [Reply(text="Sent.")]
        r = await c.post("/threads/s-g/resume", json={"runId": "s-g2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "s-g2")
        thread = (await c.get("/threads/s-g")).json()
    assert done["status"] == "succeeded", done
    assert executed(log)[-1:] == ["send_email ann@example.com Hi"]
    assert executed(log).count("send_email ann@example.com Hi") == 1
    one_result_per_call(thread["messages"])
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "g-1"]
    assert result == "sent to ann@example.com"
    assert thread["messages"][-1]["content"] == "Sent."


async def test_human_in_the_loop_runs_nothing_for_an_edited_approval(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, HITL, model, log)
    model.replies = [Reply(calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="e-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/strands", json=body("s-e", "s-e1", "mail"))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        model.replies = [Reply(text="Not sent.")]
        r = await c.post("/threads/s-e/resume", json={"runId": "s-e2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved", "payload": {
                "approved": True, "editedArgs": {"to": "bo@example.com", "subject": "Hi"}}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "s-e2")
        thread = (await c.get("/threads/s-e")).json()
    assert done["status"] == "succeeded", done
    assert executed(log) == [], "the intervention runs a call only as the model made it"
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "e-1"]
    assert "CONFIRMATION_FAILED" in result
