"""OpenTelemetry traces, with the real SDK and a real OTLP/HTTP receiver on loopback
that decodes what it receives: a run joins the trace of the request that created it
(W3C ``traceparent``); its run span, attempts, model calls (GenAI conventions), tool
calls, interrupt waits and commits arrive as spans with the run and thread ids; a run
resumed by another process after SIGKILL continues the same trace; with no ``OTEL_*``
variable nothing is sent at all."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.otlp_receiver import OtlpReceiver, Span
from tests.support.runs import uid, wait_final
from tests.support.server import ServerProcess, collect, wait_for

AGENT = "chat=tests.support.chat_agents:factory"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.001).start()
    yield fake
    await fake.stop()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    yield r
    r.stop()


def start(server_factory: Any, model: FakeOpenAI, tmp_path: Path, receiver: OtlpReceiver |
          None, data: Path | None = None, **env: str) -> ServerProcess:
    server: ServerProcess = server_factory(
        "--agent", AGENT, data_dir=data, env={
            "OUTLAST_OPENAI_BASE_URL": model.url, "CHAT_TOOL_LOG": str(tmp_path / "tools"),
            **(receiver.env() if receiver else {}), **env})
    return server


def body(thread: str, run: str, text: str = "weather?") -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


def one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


async def test_a_run_is_traced_in_its_requests_trace(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path,
        receiver: OtlpReceiver) -> None:
    server = start(server_factory, model, tmp_path, receiver)
    model.replies = [Reply(calls=[Call("get_weather", {"city": "Lima"}, id="c1")],
                           usage=USAGE),
                     Reply(text="Sunny.", usage=USAGE)]
    thread, run = uid("t"), uid("r")
    async with server.client() as c:
        await collect(c, "POST", "/agents/chat", json=body(thread, run),
                      headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
        assert (await wait_final(c, run))["status"] == "succeeded"
    server.stop()  # a clean stop exports what is pending
    spans = receiver.of_run(run)
    assert {s.trace_id for s in spans} == {TRACE}
    assert {s.service for s in spans} == {"outlast-test"}
    assert all(s.attributes["outlast.thread_id"] == thread for s in spans)
    root = one(spans, "invoke_agent chat")
    assert root.parent_id == PARENT
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["outlast.status"] == "succeeded"
    attempt = one(spans, "outlast.attempt")
    assert attempt.parent_id == root.span_id and attempt.attributes["outlast.attempt"] == 1
    assert root.start <= attempt.start <= attempt.end <= root.end
    chats = sorted((s for s in spans if s.name == "chat fake"), key=lambda s: s.start)
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ["tool_calls"], ["stop"]]
    for chat in chats:
        assert chat.parent_id == attempt.span_id
        assert (chat.attributes["gen_ai.usage.input_tokens"],
                chat.attributes["gen_ai.usage.output_tokens"]) == (12, 5)
        assert chat.attributes["gen_ai.request.model"] == "fake"
        assert chat.end > chat.start
    tool = one(spans, "execute_tool get_weather")
    assert tool.parent_id == attempt.span_id
    assert (tool.attributes["gen_ai.tool.name"], tool.attributes["gen_ai.tool.call.id"]) == (
        "get_weather", "c1")
    assert chats[0].end <= tool.start + 0.05 and tool.end <= chats[1].end
    assert any(s.name == "outlast.commit" and s.attributes["outlast.commit.events"] > 0
               for s in receiver.spans)


async def test_a_run_resumed_after_sigkill_continues_its_trace(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path,
        receiver: OtlpReceiver) -> None:
    data = tmp_path / "data"
    server = start(server_factory, model, tmp_path, receiver, data)
    model.replies = [Reply(text=" ".join(f"w{i}" for i in range(300)), token_delay=0.05),
                     Reply(text="Done.", usage=USAGE)]
    thread, run = uid("t"), uid("r")
    async with server.client() as c:
        await collect(c, "POST", "/agents/chat", limit=3, json=body(thread, run))
    server.kill()
    server = start(server_factory, model, tmp_path, receiver, data)
    async with server.client() as c:
        done = await wait_final(c, run)
        assert done["status"] == "succeeded" and done["attempts"] == 2
    server.stop()
    spans = receiver.of_run(run)
    root = one(spans, "invoke_agent chat")
    assert root.parent_id == "" and root.attributes["outlast.attempts"] == 2
    assert {s.trace_id for s in spans} == {root.trace_id}  # one trace, two processes
    second = [s for s in spans if s.name == "outlast.attempt"
              and s.attributes["outlast.attempt"] == 2]
    assert len(second) == 1 and second[0].parent_id == root.span_id
    assert second[0].links == [(root.trace_id, root.span_id)]


async def test_an_interrupt_wait_is_a_span_of_the_continuation(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path,
        receiver: OtlpReceiver) -> None:
    server = start(server_factory, model, tmp_path, receiver)
    model.replies = [Reply(calls=[Call("send_email", {"to": "a@b.c", "subject": "Hi"},
                                       id="m1")]),
                     Reply(text="Sent.")]
    thread, run = uid("t"), uid("r")
    async with server.client() as c:
        await collect(c, "POST", "/agents/chat", json=body(thread, run))
        assert (await wait_final(c, run))["status"] == "interrupted"
        [interrupt] = (await c.get(f"/threads/{thread}")).json()["interrupts"]
        r = await c.post(f"/threads/{thread}/resume", json={"runId": "cont-" + run, "resume": [
            {"interruptId": interrupt["id"], "status": "resolved",
             "payload": {"approved": True}}]})
        assert r.status_code == 200
        await wait_final(c, "cont-" + run)
    server.stop()
    wait = one(receiver.of_run("cont-" + run), "outlast.interrupt.wait")
    assert wait.attributes["outlast.interrupt_id"] == interrupt["id"]
    assert wait.attributes["outlast.interrupted_run_id"] == run
    assert wait.attributes["outlast.interrupt.status"] == "resolved"
    attempt = one(receiver.of_run("cont-" + run), "outlast.attempt")
    assert wait.parent_id == attempt.span_id and wait.end >= wait.start


async def test_without_otel_variables_nothing_is_sent(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path,
        receiver: OtlpReceiver) -> None:
    # The receiver listens, but the server is not told: tracing stays off.
    server = start(server_factory, model, tmp_path, None,
                   OTEL_SERVICE_NAME="outlast-test", OTEL_TRACES_EXPORTER="none",
                   OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    model.replies = [Reply(text="Hi.", usage=USAGE)]
    async with server.client() as c:
        await collect(c, "POST", "/agents/chat", json=body(uid("t"), uid("r")))
    server.stop()

    async def anything() -> bool:
        return receiver.requests > 0

    with pytest.raises(AssertionError, match="not reached"):
        await wait_for(anything, timeout=1)


@pytest.mark.parametrize("header", ["garbage", f"00-{'0' * 32}-{PARENT}-01",
                                    f"00-{TRACE}-xyz-01", "x" * 2000])
async def test_a_bad_traceparent_starts_a_trace_of_its_own(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, receiver: OtlpReceiver,
        header: str) -> None:
    server = start(server_factory, model, tmp_path, receiver)
    model.replies = [Reply(text="Hi.", usage=USAGE)]
    run = uid("r")
    async with server.client() as c:
        resp, _ = await collect(c, "POST", "/agents/chat", json=body(uid("t"), run),
                                headers={"traceparent": header})
        assert resp.status_code == 200
        assert (await wait_final(c, run))["status"] == "succeeded"
    server.stop()
    root = one(receiver.of_run(run), "invoke_agent chat")
    assert root.parent_id == "" and root.trace_id not in (TRACE, "0" * 32)
