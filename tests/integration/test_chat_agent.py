"""ChatAgent (outlast.agents.openai) through a real ``outlast serve`` against a scripted
OpenAI-compatible server on loopback: the tool loop, approvals, front-end tools,
crash resume, cancel, upstream failures, and the request body the model receives (a tool
cut off by a crash: tests/e2e/test_effects_in_doubt.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import ServerProcess, collect, wait_for

AGENT = "chat=tests.support.chat_agents:factory"
KEY = "sk-test-secret-key-123456"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.002).start()
    yield fake
    await fake.stop()


@pytest.fixture
def tool_log(tmp_path: Path) -> Path:
    return tmp_path / "tools.log"


def start(server_factory: Any, model: FakeOpenAI, tool_log: Path, *,
          data_dir: Path | None = None, **env: str) -> ServerProcess:
    variables = {"OUTLAST_OPENAI_BASE_URL": model.url, "CHAT_TOOL_LOG": str(tool_log),
                 "OUTLAST_OPENAI_API_KEY": KEY, **env}
    srv: ServerProcess = server_factory("--agent", AGENT, data_dir=data_dir, env=variables)
    return srv


def body(thread: str, run: str, messages: list[dict[str, Any]],
         tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": messages,
            "tools": tools or [], "context": [], "state": {}}


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


def executed(tool_log: Path) -> list[str]:
    return tool_log.read_text().splitlines() if tool_log.exists() else []


def assistant_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def no_null_content(request: dict[str, Any]) -> None:
    for m in request["messages"]:
        assert isinstance(m["content"], str), m


async def test_streams_text_with_params_and_reports_usage(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log, OUTLAST_OPENAI_SYSTEM_PROMPT="Be brief.",
                OUTLAST_OPENAI_PARAMS=json.dumps({"temperature": 0.2, "max_tokens": 64}))
    model.replies = [Reply(text="Hello there my friend",
                           usage={"prompt_tokens": 7, "completion_tokens": 4,
                                  "total_tokens": 11})]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-text", "r-text", [user("hi")]))
        kinds = [f.event["type"] for f in frames]
        assert kinds.count("TEXT_MESSAGE_CONTENT") == 4, kinds
        result = {"finishReason": "stop",
                  "usage": {"inputTokens": 7, "outputTokens": 4, "totalTokens": 11}}
        assert frames[-1].event["type"] == "RUN_FINISHED"
        assert frames[-1].event["result"] == result
        # AG-UI 1.0: the final event's usage, one entry per model.
        assert frames[-1].event["usage"] == [
            {"model": "fake", "inputTokens": 7, "outputTokens": 4, "totalTokens": 11}]
        run = (await c.get("/runs/r-text")).json()
        assert run["outcome"]["result"] == result
        thread = (await c.get("/threads/t-text")).json()
        assert thread["messages"][-1]["content"] == "Hello there my friend"
        assert thread["messages"][-1]["metadata"] == {"finishReason": "stop"}
    [request] = model.requests
    assert request["temperature"] == 0.2 and request["max_tokens"] == 64
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "hi"}]
    assert model.headers[0]["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("style", ["openai", "llamacpp"])
async def test_a_loop_of_two_server_tools_and_the_history_the_model_receives(
        server_factory: Any, model: FakeOpenAI, tool_log: Path, style: str) -> None:
    srv = start(server_factory, model, tool_log)
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Oslo"}, id="c-1")],
              style=style, usage=usage),
        Reply(calls=[Call("add", {"a": 2, "b": 3}, id="c-2")], style=style),  # no usage
        Reply(text="Oslo is sunny and 2+3=5.", usage=usage),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-loop", "r-loop", [user("weather and sum")]))
        assert frames[-1].event["result"] == {
            "finishReason": "stop",
            "usage": {"inputTokens": 20, "outputTokens": 10, "totalTokens": 30}}
        assert frames[-1].event["usage"] == [
            {"model": "fake", "inputTokens": 20, "outputTokens": 10, "totalTokens": 30}]
        results = [f.event for f in frames if f.event["type"] == "TOOL_CALL_RESULT"]
        assert [(r["toolCallId"], r["content"]) for r in results] == [
            ("c-1", "sunny in Oslo"), ("c-2", '{"sum": 5}')]
        thread = (await c.get("/threads/t-loop")).json()
    assert executed(tool_log) == ["get_weather Oslo", "add 2 3"]
    messages = thread["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool",
                                             "assistant"]
    assert messages[-1]["content"] == "Oslo is sunny and 2+3=5."
    one_result_per_call(messages)
    # Turn by turn, the model receives the whole history in order, never a null content.
    first = [{"role": "user", "content": "weather and sum"}]
    second = [
        *first,
        {"role": "assistant", "content": "Checking.",
         "tool_calls": [assistant_call("c-1", "get_weather", {"city": "Oslo"})]},
        {"role": "tool", "tool_call_id": "c-1", "content": "sunny in Oslo"}]
    third = [
        *second,
        {"role": "assistant", "content": "",
         "tool_calls": [assistant_call("c-2", "add", {"a": 2, "b": 3})]},
        {"role": "tool", "tool_call_id": "c-2", "content": '{"sum": 5}'}]
    assert [r["messages"] for r in model.requests] == [first, second, third]
    for request in model.requests:
        no_null_content(request)
        assert {t["function"]["name"] for t in request["tools"]} == {
            "get_weather", "add", "slow_step", "send_email"}


async def test_parallel_calls_by_index(server_factory: Any, model: FakeOpenAI,
                                       tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [
        Reply(calls=[Call("get_weather", {"city": "Rome"}, id="p-1"),
                     Call("add", {"a": 1, "b": 2}, id="p-2")], style="llamacpp",
              interleave=True),
        Reply(text="Both done."),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-par", "r-par", [user("two at once")]))
        assert frames[-1].event["result"]["finishReason"] == "stop"
        thread = (await c.get("/threads/t-par")).json()
    assert sorted(executed(tool_log)) == ["add 1 2", "get_weather Rome"]
    calls = thread["messages"][1]["toolCalls"]
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("p-1", {"city": "Rome"}), ("p-2", {"a": 1, "b": 2})]
    second = model.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in second[2:]] == ["p-1", "p-2"]
    assert second[1]["content"] == ""


async def propose_email(c: Any, model: FakeOpenAI, thread: str, run: str) -> dict[str, Any]:
    model.replies = [Reply(text="I will send it.", calls=[
        Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id=f"e-{thread}")])]
    _, frames = await collect(c, "POST", "/agents/chat",
                              json=body(thread, run, [user("email ann")]))
    finished = frames[-1].event
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == f"e-{thread}"
    assert interrupt["reason"] == "tool_call"
    assert interrupt["metadata"] == {"kind": "tool_approval", "tool": "send_email",
                                     "args": {"to": "ann@example.com", "subject": "Hi"}}
    assert "send_email" in interrupt["message"]
    kinds = [f.event["type"] for f in frames]
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"} <= set(kinds)
    return dict(interrupt)


async def test_approval_with_edited_arguments_runs_once_with_them(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    async with srv.client() as c:
        interrupt = await propose_email(c, model, "t-ok", "r-ok")
        assert executed(tool_log) == [], "nothing runs before the person answers"
        model.replies = [Reply(text="Sent.")]
        # Edited arguments that break the schema are refused without running anything.
        r = await c.post("/threads/t-ok/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True, "editedArgs": {"to": "bob@example.com",
                                                         "subject": "Hello"}}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, r.json()["run"]["runId"])
        assert done["status"] == "succeeded", done
        thread = (await c.get("/threads/t-ok")).json()
    assert executed(tool_log) == ["send_email bob@example.com Hello"]
    results = [m for m in thread["messages"] if m.get("toolCallId") == "e-t-ok"]
    assert [m["content"] for m in results] == ["sent to bob@example.com"]
    assert thread["messages"][-1]["content"] == "Sent."
    assert model.requests[-1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "e-t-ok", "content": "sent to bob@example.com"}


async def test_denied_approval_tells_the_model(server_factory: Any, model: FakeOpenAI,
                                               tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    async with srv.client() as c:
        interrupt = await propose_email(c, model, "t-no", "r-no")
        # A call that was never proposed cannot be approved.
        forged = await c.post("/threads/t-no/resume", json={"resume": [{
            "interruptId": "approve-forged", "status": "resolved",
            "payload": {"approved": True}}]})
        assert forged.status_code in (409, 422), forged.text
        model.replies = [Reply(text="Understood, not sent.")]
        r = await c.post("/threads/t-no/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": False}}]})
        done = await wait_final(c, r.json()["run"]["runId"])
        assert done["status"] == "succeeded", done
    assert executed(tool_log) == []
    told = model.requests[-1]["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "e-t-no"
    assert "declined" in told["content"]


async def test_invalid_edited_arguments_are_not_run(server_factory: Any, model: FakeOpenAI,
                                                    tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    async with srv.client() as c:
        interrupt = await propose_email(c, model, "t-bad", "r-bad")
        model.replies = [Reply(text="The edit was invalid.")]
        r = await c.post("/threads/t-bad/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True, "editedArgs": {"to": 5}}}]})
        await wait_final(c, r.json()["run"]["runId"])
    assert executed(tool_log) == []
    assert "invalid" in model.requests[-1]["messages"][-1]["content"]


async def test_approval_answered_after_a_restart(server_factory: Any, model: FakeOpenAI,
                                                 tool_log: Path, tmp_path: Path) -> None:
    data = tmp_path / "restart-data"
    srv = start(server_factory, model, tool_log, data_dir=data)
    async with srv.client() as c:
        interrupt = await propose_email(c, model, "t-rs", "r-rs")
    srv.stop()
    srv = start(server_factory, model, tool_log, data_dir=data)
    model.replies = [Reply(text="Sent after the restart.")]
    async with srv.client() as c:
        thread = (await c.get("/threads/t-rs")).json()
        assert thread["status"] == "interrupted"
        assert [i["id"] for i in thread["interrupts"]] == [interrupt["id"]]
        r = await c.post("/threads/t-rs/resume", json={"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        done = await wait_final(c, r.json()["run"]["runId"])
        assert done["status"] == "succeeded", done
        thread = (await c.get("/threads/t-rs")).json()
    assert executed(tool_log) == ["send_email ann@example.com Hi"]
    one_result_per_call(thread["messages"])
    assert thread["messages"][-1]["content"] == "Sent after the restart."


async def test_front_end_tool_left_pending_then_answered(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    pick = {"name": "pick_color", "description": "Ask the person for a color",
            "parameters": {"type": "object", "properties": {}}}
    model.replies = [Reply(calls=[Call("pick_color", {}, id="f-1")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-fe", "r-fe1", [user("pick")], [pick]))
        finished = frames[-1].event
        assert finished["outcome"]["pendingToolCallIds"] == ["f-1"]
        assert finished["result"]["finishReason"] == "tool_calls"
        assert {t["function"]["name"] for t in model.requests[0]["tools"]} >= {"pick_color"}
        fold = ThreadFold()
        for f in frames:
            fold.apply(f.event)
        model.replies = [Reply(text="Blue it is.")]
        history = [*fold.messages, {"id": "t-r1", "role": "tool", "toolCallId": "f-1",
                                    "content": "blue"}]
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-fe", "r-fe2", history, [pick]))
        assert frames[-1].event["result"]["finishReason"] == "stop"
        thread = (await c.get("/threads/t-fe")).json()
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert model.requests[1]["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [assistant_call("f-1", "pick_color",
                                                                           {})]},
        {"role": "tool", "tool_call_id": "f-1", "content": "blue"}]


async def test_sigkill_in_the_tool_loop_resumes_with_one_answer(
        server_factory: Any, model: FakeOpenAI, tool_log: Path, tmp_path: Path) -> None:
    data = tmp_path / "kill-data"
    srv = start(server_factory, model, tool_log, data_dir=data)
    long_text = " ".join(f"word{i}" for i in range(200))
    spent = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    model.replies = [
        Reply(calls=[Call("get_weather", {"city": "Lima"}, id="k-1")], usage=spent),
        Reply(calls=[Call("add", {"a": 4, "b": 5}, id="k-2")], usage=spent),
        Reply(text=long_text, token_delay=0.05, usage=spent),  # killed while this streams
        Reply(text="The one final answer.", usage=spent),
    ]
    async with srv.client() as c:
        # The run goes on without the connection that started it (G1).
        await collect(c, "POST", "/agents/chat", limit=1,
                      json=body("t-kill", "r-kill", [user("go")]))

        async def streamed() -> bool:
            frames = await stored_log(c, "r-kill")
            text = "".join(f.event.get("delta", "") for f in frames
                           if f.event["type"] == "TEXT_MESSAGE_CONTENT")
            return len(model.requests) == 3 and "word5" in text

        await wait_for(streamed)
    srv.kill()
    assert executed(tool_log) == ["get_weather Lima", "add 4 5"]
    srv = start(server_factory, model, tool_log, data_dir=data)
    async with srv.client() as c:
        done = await wait_final(c, "r-kill")
        assert done["status"] == "succeeded", done
        assert done["outcome"]["result"]["finishReason"] == "stop"
        thread = (await c.get("/threads/t-kill")).json()
        final = (await stored_log(c, "r-kill"))[-1].event
    # The dead attempt's two model calls stay counted (the ledger kept them with their
    # events); the reply it was cut off in never reported its usage.
    [ledger] = done["usage"]
    assert (ledger["calls"], ledger["inputTokens"], ledger["totalTokens"]) == (3, 30, 36)
    assert final["type"] == "RUN_FINISHED"
    assert [(u["inputTokens"], u["totalTokens"]) for u in final["usage"]] == [(30, 36)]
    assert executed(tool_log) == ["get_weather Lima", "add 4 5"], "each tool ran once"
    messages = thread["messages"]
    one_result_per_call(messages)
    texts = [m for m in messages if m["role"] == "assistant" and m.get("content")]
    finished = [m for m in texts if m["metadata"]["finishReason"] == "stop"]
    assert [m["content"] for m in finished] == ["The one final answer."], "one answer"
    cut = [m for m in texts if m["metadata"]["finishReason"] == "interrupted"]
    assert len(cut) == 1 and cut[0]["content"].startswith("word0 word1")
    # The cut-off reply is never sent back to the model as a finished turn.
    last_request = model.requests[-1]["messages"]
    assert all("word0" not in m["content"] for m in last_request)
    assert [m["role"] for m in last_request] == ["user", "assistant", "tool", "assistant",
                                                 "tool"]
    no_null_content(model.requests[-1])


async def test_cancel_closes_the_upstream_request(server_factory: Any, model: FakeOpenAI,
                                                  tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [Reply(text=" ".join(["slow"] * 500), token_delay=0.05)]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/chat", limit=1,
                      json=body("t-cx", "r-cx", [user("talk")]))

        async def streaming() -> bool:
            frames = await stored_log(c, "r-cx")
            return any(f.event["type"] == "TEXT_MESSAGE_CONTENT" for f in frames)

        await wait_for(streaming)
        assert model.disconnects == 0
        assert (await c.post("/runs/r-cx/cancel")).status_code in (200, 202)
        done = await wait_final(c, "r-cx")
        assert done["status"] == "cancelled"

    async def closed() -> bool:
        return model.disconnects == 1

    await wait_for(closed, timeout=10)


async def test_a_run_that_fails_after_a_model_call_reports_its_usage(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [
        Reply(calls=[Call("add", {"a": 1, "b": 1})],
              usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}),
        Reply(status=500, error_body='{"error": "overloaded"}'),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-used", "r-used", [user("add")]))
    last = frames[-1].event
    assert last["type"] == "RUN_ERROR", last
    assert last["usage"] == [
        {"model": "fake", "inputTokens": 5, "outputTokens": 2, "totalTokens": 7}]


async def test_model_server_down(server_factory: Any, model: FakeOpenAI,
                                 tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log,
                OUTLAST_OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-down", "r-down", [user("hi")]))
        assert frames[-1].event["type"] == "RUN_ERROR"
        assert frames[-1].event["code"] == "model_unreachable"
        run = (await c.get("/runs/r-down")).json()
        assert run["status"] == "failed" and "could not be reached" in run["error"]["message"]


async def test_a_500_with_a_body_is_logged_without_secrets(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    detail = {"error": {"message": "Input should be a valid string",
                        "echo": f"Authorization: Bearer {KEY} api_key={KEY}"}}
    model.replies = [Reply(status=500, error_body=json.dumps(detail))]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-500", "r-500", [user("hi")]))
        error = frames[-1].event
        assert error["type"] == "RUN_ERROR" and error["code"] == "model_error"
        assert "HTTP 500" in error["message"]
        assert "Input should be a valid string" in error["message"]
        run = (await c.get("/runs/r-500")).json()
        assert run["status"] == "failed"

    async def logged() -> list[str]:
        return [line for line in srv.log if "HTTP 500" in line]

    lines = await wait_for(logged)
    assert "Input should be a valid string" in lines[0]
    assert KEY not in "\n".join(srv.log)


async def test_a_frozen_model_server_times_out(server_factory: Any, model: FakeOpenAI,
                                               tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log, OUTLAST_OPENAI_TIMEOUT="0.5")
    model.replies = [Reply(text="this will freeze midway", freeze_after=2)]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-frz", "r-frz", [user("hi")]))
        assert frames[-1].event["type"] == "RUN_ERROR"
        assert frames[-1].event["code"] == "model_timeout"
        thread = (await c.get("/threads/t-frz")).json()
    # The partial reply stays, marked as cut off by the failure; it is not sent back as a
    # finished turn.
    assert thread["messages"][-1]["metadata"] == {"finishReason": "error"}
    model.replies = [Reply(text="Fresh answer.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat", json=body(
            "t-frz", "r-frz2", [user("again", "u2")]))
        assert frames[-1].event["type"] == "RUN_FINISHED"
    assert [m["role"] for m in model.requests[-1]["messages"]] == ["user", "user"]


async def test_a_reply_cut_by_the_length_limit_is_flagged(
        server_factory: Any, model: FakeOpenAI, tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [Reply(text="This answer was cut", finish="length")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-len", "r-len", [user("long please")]))
        assert frames[-1].event["result"] == {"finishReason": "length"}
        thread = (await c.get("/threads/t-len")).json()
    assert thread["messages"][-1]["metadata"] == {"finishReason": "length"}
    assert thread["messages"][-1]["content"] == "This answer was cut"


async def test_max_steps_ends_the_loop_clearly(server_factory: Any, model: FakeOpenAI,
                                               tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log, OUTLAST_OPENAI_MAX_STEPS="2")
    model.replies = [Reply(calls=[Call("add", {"a": i, "b": i}, id=f"m-{i}")])
                     for i in range(3)]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("t-max", "r-max", [user("loop forever")]))
        assert frames[-1].event["result"] == {"finishReason": "max_steps"}
        thread = (await c.get("/threads/t-max")).json()
    assert len(model.requests) == 2
    assert executed(tool_log) == ["add 0 0"]
    one_result_per_call(thread["messages"])
    assert "limit" in thread["messages"][-1]["content"]


async def test_repeated_call_ids_are_renamed(server_factory: Any, model: FakeOpenAI,
                                             tool_log: Path) -> None:
    srv = start(server_factory, model, tool_log)
    model.replies = [Reply(calls=[Call("add", {"a": 1, "b": 1}, id="call_0")]),
                     Reply(calls=[Call("add", {"a": 2, "b": 2}, id="call_0")]),
                     Reply(text="4")]
    async with srv.client() as c:
        await collect(c, "POST", "/agents/chat", json=body("t-dup", "r-dup", [user("x")]))
        thread = (await c.get("/threads/t-dup")).json()
    assert executed(tool_log) == ["add 1 1", "add 2 2"]
    one_result_per_call(thread["messages"])
