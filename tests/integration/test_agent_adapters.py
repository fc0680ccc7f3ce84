"""The shipped adapters against real peers: an OpenAI-compatible model server
(a scripted one on loopback) and a remote AG-UI endpoint (another outlast)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.server import ServerProcess, collect, demo_input

WEATHER_TOOL = {"name": "get_weather", "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture
async def fake_model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.005).start()
    yield fake
    await fake.stop()


def chat_input(thread: str, run: str, messages: list[dict[str, Any]],
               tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0", "messages": messages,
            "tools": tools or [], "context": [], "state": {}}


async def test_chat_agent_streams_text_and_the_thread_keeps_it(
        server_factory: Any, fake_model: FakeOpenAI) -> None:
    srv: ServerProcess = server_factory("--agent", "chat=outlast.agents.openai:factory", env={
        "OUTLAST_OPENAI_BASE_URL": fake_model.url, "OUTLAST_OPENAI_MODEL": "fake"})
    async with srv.client() as c:
        agents = {a["name"] for a in (await c.get("/agents")).json()["agents"]}
        assert agents == {"demo", "chat"}
        resp, frames = await collect(c, "POST", "/agents/chat", json=chat_input(
            "chat-1", "chat-r1", [{"id": "u1", "role": "user", "content": "hello there"}]))
        assert resp.status_code == 200
        kinds = [f.event["type"] for f in frames]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert kinds.count("TEXT_MESSAGE_CONTENT") >= 3, "streamed token by token"
        thread = (await c.get("/threads/chat-1")).json()
        assert thread["messages"][-1]["content"] == "You said: hello there"
        assert fake_model.requests[0]["model"] == "fake"
        assert fake_model.requests[0]["messages"] == [{"role": "user", "content": "hello there"}]


async def test_chat_agent_front_end_tool_call_round_trip(
        server_factory: Any, fake_model: FakeOpenAI) -> None:
    srv: ServerProcess = server_factory("--agent", "chat=outlast.agents.openai:factory", env={
        "OUTLAST_OPENAI_BASE_URL": fake_model.url, "OUTLAST_OPENAI_MODEL": "fake"})
    async with srv.client() as c:
        history = [{"id": "u1", "role": "user", "content": "what is the weather?"}]
        _, frames = await collect(c, "POST", "/agents/chat", json=chat_input(
            "chat-2", "chat-r2", history, [WEATHER_TOOL]))
        finished = frames[-1].event
        assert finished["type"] == "RUN_FINISHED"
        assert finished["outcome"]["pendingToolCallIds"] == ["call_w1"]
        fold = ThreadFold()
        for f in frames:
            fold.apply(f.event)
        call = fold.messages[-1]["toolCalls"][0]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        # The front end runs the tool and sends the result with the next input.
        history = [*fold.messages, {"id": "t1", "role": "tool", "toolCallId": "call_w1",
                                    "content": "sunny, 21C"}]
        _, frames = await collect(c, "POST", "/agents/chat", json=chat_input(
            "chat-2", "chat-r3", history, [WEATHER_TOOL]))
        assert frames[-1].event["type"] == "RUN_FINISHED"
        thread = (await c.get("/threads/chat-2")).json()
        roles = [m["role"] for m in thread["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"], "merged by id, no duplicates"
        assert thread["messages"][-1]["content"] == "The tool said: sunny, 21C"


async def test_chat_agent_reports_an_unreachable_model_clearly(server_factory: Any) -> None:
    srv: ServerProcess = server_factory("--agent", "chat=outlast.agents.openai:factory", env={
        "OUTLAST_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OUTLAST_OPENAI_MODEL": "x"})
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat", json=chat_input(
            "chat-3", "chat-r4", [{"id": "u1", "role": "user", "content": "hi"}]))
        assert frames[-1].event["type"] == "RUN_ERROR"
        assert frames[-1].event["code"] == "model_unreachable"
        run = (await c.get("/runs/chat-r4")).json()
        assert run["status"] == "failed" and "could not be reached" in run["error"]["message"]
        assert (await c.get("/threads/chat-3")).json()["status"] == "error"


async def test_proxy_agent_makes_a_remote_ag_ui_endpoint_durable(server_factory: Any) -> None:
    remote: ServerProcess = server_factory()
    front: ServerProcess = server_factory("--agent", "remote=outlast.agents.proxy:factory",
                           env={"OUTLAST_PROXY_URL": f"{remote.url}/agents/demo"})
    async with front.client() as c:
        _, frames = await collect(c, "POST", "/agents/remote", json=demo_input(
            "px-1", "px-r1", steps=2))
        kinds = [f.event["type"] for f in frames]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert kinds.count("RUN_STARTED") == 1, "the remote's own run events are not relayed"
        assert [f.id for f in frames] == list(range(1, len(frames) + 1))
        assert len(remote.effects()) == 2
        thread = (await c.get("/threads/px-1")).json()
        assert thread["state"]["todos"][-1]["status"] == "done"
        # Interrupts raised remotely become stored interrupts here.
        _, frames = await collect(c, "POST", "/agents/remote", json=demo_input(
            "px-2", "px-r2", steps=2, approve_at=[1]))
        assert frames[-1].event["outcome"]["type"] == "interrupt"
        thread = (await c.get("/threads/px-2")).json()
        assert thread["status"] == "interrupted" and len(thread["interrupts"]) == 1


async def test_maf_agent_streams_and_runs_its_tool_once(
        server_factory: Any, fake_model: FakeOpenAI, tmp_path: Any) -> None:
    pytest.importorskip("agent_framework_openai")
    tool_log = tmp_path / "maf-tools.log"
    srv: ServerProcess = server_factory("--agent", "maf=outlast.agents.maf:factory", env={
        "OUTLAST_MAF_AGENT": "tests.support.maf_agents:weather_agent",
        "OUTLAST_OPENAI_BASE_URL": fake_model.url, "MAF_TOOL_LOG": str(tool_log)})
    body = chat_input("maf-1", "maf-r1",
                      [{"id": "u1", "role": "user", "content": "what is the weather?"}])
    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    fake_model.replies = [
        Reply(text="Let me check.", calls=[Call("get_weather", {"city": "Paris"}, id="call_w1")],
              usage=usage),
        Reply(text="The tool said: sunny in Paris", usage=usage)]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/maf", json=body)
        kinds = [f.event["type"] for f in frames]
        assert kinds[-1] == "RUN_FINISHED", kinds
        assert_valid([f.event for f in frames], ("agentic-chat", "backend-tool-rendering"))
        # AG-UI 1.0: both model calls' tokens, on the final event.
        [counted] = frames[-1].event["usage"]
        assert (counted["inputTokens"], counted["outputTokens"]) == (22, 6), counted
        assert "TOOL_CALL_START" in kinds and "TOOL_CALL_RESULT" in kinds
        fold = ThreadFold()
        for f in frames:
            fold.apply(f.event)
        thread = (await c.get("/threads/maf-1")).json()
        assert thread["messages"] == fold.messages
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool",
                                                           "assistant"]
        assert thread["messages"][2]["content"] == "sunny in Paris"
        assert thread["messages"][3]["content"] == "The tool said: sunny in Paris"
        # A retry of the same request attaches: the tool ran once.
        resp, again = await collect(c, "POST", "/agents/maf", json=body)
        assert resp.headers["outlast-replayed"] == "true"
        assert [f.event for f in again] == [f.event for f in frames]
    assert tool_log.read_text().splitlines() == ["Paris"]
