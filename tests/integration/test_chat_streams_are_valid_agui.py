"""The ChatAgent's streams, checked by the independent AG-UI validator (``ag-ui-validate``):
text before tool calls, parallel calls, an approval and its continuation, a model error,
a cancel, a crash resume, and a reattach after every seq, all through a real
``outlast serve`` against the scripted OpenAI-compatible model server.

A reattach and a continuation run are not whole runs: they continue what the client
already holds. The two findings that follow from that (docs/spec.md, "Streams a client
continues") are the only ones allowed, and only where they must occur."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_chat_agent import body, executed, model, start, tool_log, user
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid, findings
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import stored_log, wait_final, wait_streamed
from tests.support.server import ServerProcess, collect, wait_for

__all__ = ["model", "tool_log"]  # the fixtures, shared with test_chat_agent.py

CHAT = ("agentic-chat", "backend-tool-rendering")


async def run_stream(srv: ServerProcess, thread: str, run: str,
                     messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat", json=body(thread, run, messages))
    return [f.event for f in frames]


async def test_text_before_a_tool_call_is_one_message_started_once(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [
        Reply(text="Let me check the weather.", calls=[Call("get_weather", {"city": "Oslo"})]),
        Reply(text="Now the sum.", calls=[Call("add", {"a": 2, "b": 3})]),
        Reply(text="Sunny in Oslo, and 5."),
    ]
    events = await run_stream(srv, "v-text", "v-text-r", [user("weather and a sum")])
    assert_valid(events, CHAT)
    starts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert len(starts) == len(set(starts)) == 3, starts
    # The finish reason is set while the message is open, on its one end.
    ends = [e for e in events if e["type"] == "TEXT_MESSAGE_END"]
    assert [e["metadata"]["finishReason"] for e in ends] == ["tool_calls", "tool_calls", "stop"]
    assert executed(tool_log) == ["get_weather Oslo", "add 2 3"]
    async with srv.client() as c:
        thread = (await c.get("/threads/v-text")).json()
    first = thread["messages"][1]
    assert first["content"] == "Let me check the weather."
    assert [call["function"]["name"] for call in first["toolCalls"]] == ["get_weather"]


async def test_parallel_calls_with_text_and_text_after_the_calls(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [
        Reply(text="Two things at once.", calls=[Call("get_weather", {"city": "Rome"}),
                                                 Call("add", {"a": 1, "b": 2})],
              style="llamacpp", interleave=True),
        Reply(text="Both done."),
    ]
    events = await run_stream(srv, "v-par", "v-par-r", [user("two at once")])
    assert_valid(events, CHAT)
    assert sorted(executed(tool_log)) == ["add 1 2", "get_weather Rome"]


async def test_an_approval_and_its_continuation_after_a_restart(
        server_factory: Any, model: FakeOpenAI, tool_log: Path, tmp_path: Path) -> None:
    data = tmp_path / "approval-data"
    srv = start(server_factory, model, tool_log, data_dir=data)
    model.replies = [Reply(text="I will send it.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id="v-mail")])]
    events = await run_stream(srv, "v-ap", "v-ap-r1", [user("email ann")])
    assert events[-1]["outcome"]["type"] == "interrupt"
    assert_valid(events, (*CHAT, "human-in-the-loop"))
    srv.stop()
    srv = start(server_factory, model, tool_log, data_dir=data)
    model.replies = [Reply(text="Sent.")]
    async with srv.client() as c:
        r = await c.post("/threads/v-ap/resume", json={"resume": [{
            "interruptId": "approve-v-mail", "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        run_id = r.json()["run"]["runId"]
        assert (await wait_final(c, run_id))["status"] == "succeeded"
        continuation = [f.event for f in await stored_log(c, run_id)]
        await assert_every_reattach_valid(c, "v-ap-r1", (*CHAT, "human-in-the-loop"))
        await assert_every_reattach_valid(c, run_id, CHAT, owed=["v-mail"])
    assert executed(tool_log) == ["send_email ann@example.com Hi"]
    # The continuation opens with the result owed to the previous run's call.
    assert continuation[1]["type"] == "TOOL_CALL_RESULT"
    assert_valid(continuation, CHAT, allowed={("AGUI207", 1)})


async def test_a_model_error_and_a_cancel_end_valid_streams(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [Reply(status=500, error_body='{"error": "overloaded"}')]
    events = await run_stream(srv, "v-err", "v-err-r", [user("hi")])
    assert events[-1]["type"] == "RUN_ERROR"
    assert_valid(events, CHAT)

    model.replies = [Reply(text="I start, then " + " ".join(["slow"] * 400),
                           calls=[Call("add", {"a": 1, "b": 1})], token_delay=0.03)]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/chat", limit=1,
                      json=body("v-cx", "v-cx-r", [user("talk")]))

        async def streaming() -> bool:
            log = await stored_log(c, "v-cx-r")
            return any(f.event["type"] == "TEXT_MESSAGE_CONTENT" for f in log)

        await wait_for(streaming)
        assert (await c.post("/runs/v-cx-r/cancel")).status_code in (200, 202)
        assert (await wait_final(c, "v-cx-r"))["status"] == "cancelled"
        cancelled = [f.event for f in await stored_log(c, "v-cx-r")]
    assert_valid(cancelled, CHAT)


async def test_a_crash_resume_marks_the_cut_off_reply_without_restarting_it(
        server_factory: Any, model: FakeOpenAI, tool_log: Path, tmp_path: Path) -> None:
    data = tmp_path / "crash-data"
    srv = start(server_factory, model, tool_log, data_dir=data)
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Lima"}, id="v-k1")]),
        Reply(text=" ".join(f"word{i}" for i in range(200)), token_delay=0.05),
        Reply(text="The one final answer."),
    ]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/chat", limit=1,
                      json=body("v-kill", "v-kill-r", [user("go")]))
        await wait_streamed(c, "v-kill-r", "word5")
    srv.kill()
    srv = start(server_factory, model, tool_log, data_dir=data)
    async with srv.client() as c:
        assert (await wait_final(c, "v-kill-r"))["status"] == "succeeded"
        events = [f.event for f in await stored_log(c, "v-kill-r")]
    assert executed(tool_log) == ["get_weather Lima"]
    assert "MESSAGES_SNAPSHOT" in [e["type"] for e in events]
    assert_valid(events, CHAT)


async def test_a_reattach_after_every_seq_is_valid_but_for_what_the_client_holds(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [
        Reply(text="Let me look.", calls=[Call("get_weather", {"city": "Bern"}, id="v-r1"),
                                          Call("add", {"a": 7, "b": 8}, id="v-r2")]),
        Reply(text="Done: sunny and 15."),
    ]
    whole = await run_stream(srv, "v-re", "v-re-r", [user("look")])
    assert_valid(whole, CHAT)
    async with srv.client() as c:
        assert await assert_every_reattach_valid(c, "v-re-r", CHAT) > 20


def test_the_checker_refuses_what_the_old_chat_stream_sent() -> None:
    """The helper is not a rubber stamp: the shape the ChatAgent used to send (an ended
    message started again to set its finish reason) is refused."""
    old = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Let me check."},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f",
         "parentMessageId": "m"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": {"finishReason": "stop"}},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    assert {rule for rule, _ in findings(old, CHAT)} >= {"AGUI104", "AGUI102"}
    with pytest.raises(AssertionError, match="AGUI104"):
        assert_valid(old, CHAT)
