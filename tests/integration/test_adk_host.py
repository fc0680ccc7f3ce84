"""The Google ADK host beyond the contract suite, driven by the real ``google-adk``
through a real ``outlast serve``: ADK's session lives in the thread, so a new process
continues the conversation and the session's state (each message held once, whatever
history a client sends), and a denied call is told in ADK's words with the reason."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import FEATURES, HOSTS, body, executed, model, start
from tests.support.runs import one_result_per_call, stored_log, wait_final, wait_streamed
from tests.support.server import collect

pytest.importorskip("google.adk")

__all__ = ["model"]  # the scripted model each test gets (a fixture)

HOST = HOSTS["adk"]
MEMO = dataclasses.replace(HOST, target="tests.support.adk_agents:memo_agent")


def test_the_host_serves_an_llm_agent_and_shows_results_unwrapped() -> None:
    from google.adk.agents import LlmAgent

    from outlast.agents.adk import AdkAgent, result_text, serves

    agent = LlmAgent(name="assistant", instruction="Be brief.")
    assert serves(agent) and isinstance(AdkAgent(agent), AdkAgent)
    assert not serves(object()) and not serves(lambda settings: agent)
    assert result_text({"result": "sunny"}) == "sunny"
    assert result_text({"result": {"t": 21}}) == '{"t": 21}'
    assert json.loads(result_text({"error": "This tool call is rejected.", "reason": "no"})) \
        == {"error": "This tool call is rejected.", "reason": "no"}


async def test_a_new_process_continues_the_conversation_from_the_session(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, MEMO, model, log, data_dir=data)
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Oslo"}, id="a-w1")]),
        Reply(text="Sunny in Oslo."),
    ]
    async with srv.client() as c:
        _, first = await collect(c, "POST", "/agents/adk", json=body("a-t", "a-r1", "oslo?"))
        thread = (await c.get("/threads/a-t")).json()
    assert first[-1].event["type"] == "RUN_FINISHED", first[-1].event
    srv.stop()
    srv = start(server_factory, MEMO, model, log, data_dir=data)  # its memory is gone
    model.replies = [Reply(text="Still sunny.")]
    # The client sends the whole history again, as AG-UI clients do, and a new question.
    again = body("a-t", "a-r2", "and now?")
    again["messages"] = [*thread["messages"], *again["messages"]]
    async with srv.client() as c:
        _, second = await collect(c, "POST", "/agents/adk", json=again)
        final = (await c.get("/threads/a-t")).json()
    events = [f.event for f in second]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert_valid(events, FEATURES)
    assert executed(log) == ["get_weather Oslo"]
    sent = model.requests[-1]["messages"]
    # ADK's own history, from the session the thread kept: every message once.
    # ADK's session state too: the reply its output_key kept, in the instruction.
    said = sent[0]["content"].split("\n")[0]
    assert said.startswith("Be brief. You said before: ") and said.endswith("Sunny in Oslo.")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant",
                                         "user"], sent
    assert [m.get("content") for m in sent[1:]] == [
        "oslo?", "Checking.", json.dumps({"result": "sunny in Oslo"}), "Sunny in Oslo.",
        "and now?"]
    assert sent[2]["tool_calls"][0]["id"] == "a-w1"
    one_result_per_call(final["messages"])
    assert [m["content"] for m in final["messages"] if m["role"] == "tool"] == ["sunny in Oslo"]
    assert final["messages"][-1]["content"] == "Still sunny."


async def test_a_denied_call_tells_the_model_in_adks_words_with_the_reason(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    log = tmp_path / "tools.log"
    srv = start(server_factory, HOST, model, log)
    model.replies = [Reply(calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="a-m1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/adk", json=body("a-d", "a-d1", "mail"))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        assert interrupt["metadata"]["kind"] == "adk_confirmation"
        assert interrupt["metadata"]["args"] == {"to": "ann@example.com", "subject": "Hi"}
        # ADK's stand-in result for the call awaiting a person is not shown.
        assert not any(f.event["type"] == "TOOL_CALL_RESULT" for f in frames)
        model.replies = [Reply(text="Not sent.")]
        _, more = await collect(c, "POST", "/agents/adk", json={
            **body("a-d", "a-d2", ""), "messages": [], "resume": [{
                "interruptId": interrupt["id"], "status": "resolved",
                "payload": {"approved": False, "reason": "wrong person"}}]})
        thread = (await c.get("/threads/a-d")).json()
    assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
    assert executed(log) == []
    told = [m for m in model.requests[-1]["messages"] if m.get("tool_call_id") == "a-m1"]
    assert [json.loads(m["content"]) for m in told] == [
        {"error": "This tool call is rejected.", "reason": "wrong person"}]
    one_result_per_call(thread["messages"])


async def test_a_failed_turn_is_held_once_in_the_session(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    srv = start(server_factory, HOST, model, tmp_path / "tools.log")
    model.replies = [Reply(status=400, error_body=json.dumps({"error": {
        "message": "bad request", "type": "invalid_request_error"}})), Reply(text="Hello.")]
    async with srv.client() as c:
        _, failed = await collect(c, "POST", "/agents/adk", json=body("a-f", "a-f1", "hi"))
        _, more = await collect(c, "POST", "/agents/adk", json=body("a-f", "a-f2", "again"))
    assert failed[-1].event["type"] == "RUN_ERROR", failed[-1].event
    assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
    sent = model.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["hi", "again"], sent


async def test_sigkill_in_an_approved_continuation_runs_the_tool_once(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    """The continuation that ran the confirmed call dies mid-reply: its resumed attempt
    does not hand ADK the confirmation again, and the call keeps its one result."""
    data, log = tmp_path / "data", tmp_path / "tools.log"
    srv = start(server_factory, HOST, model, log, data_dir=data)
    model.replies = [Reply(calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="a-k1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/adk", json=body("a-k", "a-k1", "mail"))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        model.replies = [Reply(text=" ".join(f"word{i}" for i in range(300)),
                               token_delay=0.05), Reply(text="Sent, once.")]
        r = await c.post("/threads/a-k/resume", json={"runId": "a-k2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        await wait_streamed(c, "a-k2", "word5")
    srv.kill()
    assert executed(log) == ["send_email ann@example.com Hi"]
    srv = start(server_factory, HOST, model, log, data_dir=data)
    async with srv.client() as c:
        done = await wait_final(c, "a-k2")
        thread = (await c.get("/threads/a-k")).json()
        events = [f.event for f in await stored_log(c, "a-k2")]
    assert done["status"] == "succeeded" and done["attempts"] == 2, done
    assert executed(log) == ["send_email ann@example.com Hi"], "the tool ran once"
    one_result_per_call(thread["messages"])
    assert thread["messages"][-1]["content"] == "Sent, once."
    sent = model.requests[-1]["messages"]
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["a-k1"]
    assert not any("word0" in str(m.get("content")) for m in sent)
    first = next(i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_RESULT")
    assert_valid(events, FEATURES, allowed={("AGUI207", first)})


async def test_parallel_calls_one_waiting_for_a_person(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    """Two calls in one response: the one that needs no confirmation runs and shows its
    result; the other waits for the person, then runs once."""
    log = tmp_path / "tools.log"
    srv = start(server_factory, HOST, model, log)
    model.replies = [Reply(text="Both.", calls=[
        Call("get_weather", {"city": "Rome"}, id="a-p1"),
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="a-p2")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/adk", json=body("a-p", "a-p1", "go"))
        events = [f.event for f in frames]
        [interrupt] = events[-1]["outcome"]["interrupts"]
        assert interrupt["toolCallId"] == "a-p2"
        assert [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["a-p1"]
        assert_valid(events, (*FEATURES, "human-in-the-loop"))
        model.replies = [Reply(text="Done both.")]
        r = await c.post("/threads/a-p/resume", json={"runId": "a-p2", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "a-p2")
        thread = (await c.get("/threads/a-p")).json()
    assert done["status"] == "succeeded", done
    assert executed(log) == ["get_weather Rome", "send_email ann@example.com Hi"]
    one_result_per_call(thread["messages"])
    results = {m["toolCallId"]: m["content"] for m in thread["messages"] if m["role"] == "tool"}
    assert results == {"a-p1": "sunny in Rome", "a-p2": "sent to ann@example.com"}
    assert thread["messages"][-1]["content"] == "Done both."


async def test_the_session_kept_event_by_event_is_the_session_whole() -> None:
    """What ``ThreadSessions`` keeps, one event at a time, is ADK's own serialization of
    the whole session, and a new service (a new process) reads the same session back."""
    from google.adk.events import Event, EventActions
    from google.genai import types

    from outlast.agents.adk.session import ThreadSessions

    store: dict[str, Any] = {}
    sessions = ThreadSessions(store)
    session = await sessions.create_session(app_name="a", user_id="u", session_id="t")
    for i in range(3):
        await sessions.append_event(session, Event(
            author="user", invocation_id="i", content=types.Content(
                role="user", parts=[types.Part(text=f"turn {i}")]),
            actions=EventActions(state_delta={"turns": i + 1})))
    await sessions.append_event(session, Event(author="user", partial=True))  # not kept
    assert store["session"] == json.loads(session.model_dump_json(exclude_none=True))
    again = ThreadSessions(json.loads(json.dumps(store)))
    assert again.session is not None and again.session.state == {"turns": 3}
    assert [e.content.parts[0].text for e in again.session.events if e.content] == [
        "turn 0", "turn 1", "turn 2"]


async def test_a_fork_continues_the_conversation_as_it_was_where_it_forked(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    """A fork at an older boundary holds no ADK session (only the latest boundary keeps
    session_state): the host builds the session from the fork's messages; a fork at the
    latest boundary carries the session itself."""
    srv = start(server_factory, HOST, model, tmp_path / "tools.log")
    model.replies = [Reply(text="One."), Reply(text="Two."), Reply(text="Three."),
                     Reply(text="Four.")]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/adk", json=body("a-o", "a-o1", "first"))
        log1 = await stored_log(c, "a-o1")
        await collect(c, "POST", "/agents/adk", json=body("a-o", "a-o2", "second"))
        older = await c.post("/threads/a-o/fork", json={"asOf": {"runId": "a-o1",
                                                                 "seq": len(log1)}})
        latest = await c.post("/threads/a-o/fork", json={})
        assert older.status_code == latest.status_code == 201, (older.text, latest.text)
        _, a = await collect(c, "POST", "/agents/adk",
                             json=body(older.json()["threadId"], "a-o3", "third"))
        at_older = model.requests[-1]["messages"]
        _, b = await collect(c, "POST", "/agents/adk",
                             json=body(latest.json()["threadId"], "a-o4", "fourth"))
        at_latest = model.requests[-1]["messages"]
    assert a[-1].event["type"] == b[-1].event["type"] == "RUN_FINISHED"
    assert [m.get("content") for m in at_older[1:]] == ["first", "One.", "third"]
    assert [m.get("content") for m in at_latest[1:]] == [
        "first", "One.", "second", "Two.", "fourth"]
