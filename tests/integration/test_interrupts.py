"""Durable interrupts (G7): a pending approval is a record that can be found and
answered from anywhere, exactly once, even after the client left or the server restarted.

Every test runs a real ``outlast serve`` on loopback with the demo agent (and the
``ask`` test agent from ``tests/support/agents.py``) and checks exactly-once through
the demo's ``effects.log``.
"""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import httpx
import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.agents import AGENT_ENV, ASK_AGENT
from tests.support.runs import run_record, steps_run, uid, wait_final
from tests.support.server import Frame, ServerProcess, collect, demo_input

# Fields the HTTP views add to a stored interrupt; the wire shape has none of them.
RECORD_FIELDS = ("status", "runId", "answeredBy", "answeredAt", "resolution")


@pytest.fixture(scope="module")
def server(module_server_factory: Any) -> ServerProcess:
    """One server for the module's tests, each with its own thread and run ids (the restart
    test starts servers of its own)."""
    return module_server_factory(  # type: ignore[no-any-return]
        "--keepalive", "2", "--agent", ASK_AGENT, env=AGENT_ENV)


def wire(interrupt: dict[str, Any]) -> dict[str, Any]:
    """An interrupt as the agent raised it, without the record's fields."""
    return {k: v for k, v in interrupt.items() if k not in RECORD_FIELDS}


def resume_input(thread_id: str, run_id: str, answers: list[dict[str, Any]],
                 messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A RunAgentInput that answers interrupts through AG-UI ``resume[]``."""
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": messages or [], "state": {}, "tools": [], "context": [],
            "resume": answers}


def answer(interrupt_id: str, approved: bool = True, status: str = "resolved",
           edited: dict[str, Any] | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"approved": approved}
    if edited is not None:
        payload["editedArgs"] = edited
    return {"interruptId": interrupt_id, "status": status, "payload": payload}


async def interrupted_thread(c: httpx.AsyncClient, thread_id: str, run_id: str,
                             approve_at: int = 2, **knobs: Any) -> list[Frame]:
    """Run the demo to its approval and return the whole stream the client read."""
    resp, frames = await collect(c, "POST", "/agents/demo",
                                 json=demo_input(thread_id, run_id, approve_at=[approve_at],
                                                 **knobs))
    assert resp.status_code == 200
    last = frames[-1].event
    assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "interrupt", last
    return frames


async def pending(c: httpx.AsyncClient, thread_id: str) -> list[dict[str, Any]]:
    r = await c.get(f"/threads/{thread_id}")
    assert r.status_code == 200, r.text
    return r.json()["interrupts"]  # type: ignore[no-any-return]


def events(frames: list[Frame], kind: str) -> list[dict[str, Any]]:
    return [f.event for f in frames if f.event["type"] == kind]


def texts(frames: list[Frame]) -> str:
    return "".join(e["delta"] for e in events(frames, "TEXT_MESSAGE_CONTENT"))


async def find_and_answer(c: httpx.AsyncClient, server: ServerProcess, thread_id: str,
                          run_id: str) -> None:
    """Discover the pending approval through every resource, answer it, check the tool ran once."""
    thread = (await c.get(f"/threads/{thread_id}")).json()
    assert thread["status"] == "interrupted"
    assert thread["activeRun"] is None
    [interrupt] = thread["interrupts"]
    assert interrupt["status"] == "pending" and interrupt["runId"] == run_id
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"]
    assert interrupt["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert interrupt["metadata"]["tool"] == "read_file"
    assert interrupt["metadata"]["step"] == 2
    assert interrupt["metadata"]["args"] == {"step": 2, "target": "module_2.py"}
    # The proposed tool call is in the transcript, waiting for its result.
    calls = [call for m in thread["messages"] for call in m.get("toolCalls") or ()]
    assert interrupt["toolCallId"] in {call["id"] for call in calls}

    run = await run_record(c, run_id)
    assert run["status"] == "interrupted"
    assert run["outcome"]["type"] == "interrupt"
    assert [i["id"] for i in run["interrupts"]] == [interrupt["id"]]

    listed = (await c.get("/threads", params={"status": "interrupted"})).json()["threads"]
    assert thread_id in [t["threadId"] for t in listed]
    busy = (await c.get("/threads", params={"status": "busy"})).json()["threads"]
    assert thread_id not in [t["threadId"] for t in busy]

    r = await c.post(f"/threads/{thread_id}/resume",
                     json={"resume": [answer(interrupt["id"])]})
    assert r.status_code == 200, r.text
    continuation = r.json()["run"]["runId"]
    done = await wait_final(c, continuation)
    assert done["status"] == "succeeded", done

    thread = (await c.get(f"/threads/{thread_id}")).json()
    assert thread["status"] == "idle"
    assert thread["interrupts"] == []
    results = [m for m in thread["messages"] if m.get("toolCallId") == interrupt["toolCallId"]]
    assert len(results) == 1 and "read_file finished step 2" in results[0]["content"]
    assert steps_run(server.effects_log, run_id, continuation) == {1: 1, 2: 1, 3: 1}
    assert steps_run(server.effects_log, continuation) == {2: 1, 3: 1}
    answered = (await run_record(c, run_id))["interrupts"]
    assert answered == []  # the run resource lists pending interrupts only


async def test_detached_run_waiting_for_approval_is_found_and_answered(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    # The client reads the first event and leaves long before the approval is needed.
    resp, seen = await collect(client, "POST", "/agents/demo", limit=1,
                               json=demo_input(thread_id, run_id, approve_at=[2],
                                               step_delay_ms=300))
    assert resp.status_code == 200 and [f.id for f in seen] == [1]

    run = await wait_final(client, run_id)
    assert run["status"] == "interrupted"
    assert run["lastSeq"] > 1
    await find_and_answer(client, server, thread_id, run_id)


async def test_pending_approval_survives_a_server_restart(server_factory: Any) -> None:
    first: ServerProcess = server_factory("--keepalive", "2")
    thread_id, run_id = uid("t"), uid("r")
    async with first.client() as c:
        resp, _ = await collect(c, "POST", "/agents/demo", limit=1,
                                json=demo_input(thread_id, run_id, approve_at=[2]))
        assert resp.status_code == 200
        assert (await wait_final(c, run_id))["status"] == "interrupted"
    # SIGTERM: a clean exit (uvicorn re-raises the signal once it has shut down).
    assert first.stop() in (0, -signal.SIGTERM)

    second: ServerProcess = server_factory("--keepalive", "2", data_dir=first.data_dir)
    async with second.client() as c:
        await find_and_answer(c, second, thread_id, run_id)


async def test_concurrent_answers_one_wins(server: ServerProcess,
                                           client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    await interrupted_thread(client, thread_id, run_id)
    [interrupt] = await pending(client, thread_id)
    entry = answer(interrupt["id"])

    async def via_resume_endpoint(i: int) -> httpx.Response:
        return await client.post(f"/threads/{thread_id}/resume",
                                 json={"resume": [entry], "runId": f"{run_id}-answer{i}"})

    async def via_agui(i: int) -> httpx.Response:
        resp, _ = await collect(client, "POST", "/agents/demo",
                                json=resume_input(thread_id, f"{run_id}-answer{i}", [entry]),
                                limit=1)
        return resp

    responses = await asyncio.gather(*[
        via_resume_endpoint(i) if i % 2 == 0 else via_agui(i) for i in range(5)])
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 409, 409, 409, 409], statuses
    for r in responses:
        if r.status_code == 409:
            assert r.json()["error"]["code"] == "interrupt_not_pending"
    [winner] = [r for r in responses if r.status_code == 200]
    continuation = winner.headers.get("Outlast-Run-Id") or winner.json()["run"]["runId"]
    assert (await wait_final(client, continuation))["status"] == "succeeded"

    runs = (await client.get(f"/threads/{thread_id}/runs")).json()["runs"]
    assert sorted(r["runId"] for r in runs) == sorted([run_id, continuation])
    assert steps_run(server.effects_log, *(r["runId"] for r in runs)) == {1: 1, 2: 1, 3: 1}


@pytest.mark.parametrize("verdict", ["approve", "deny", "edit"])
async def test_agui_resume_answers_the_approval(server: ServerProcess,
                                                client: httpx.AsyncClient,
                                                verdict: str) -> None:
    thread_id, run_id = uid("t"), uid("r")
    await interrupted_thread(client, thread_id, run_id)
    [interrupt] = await pending(client, thread_id)
    call_id = interrupt["toolCallId"]
    edited = {"step": 2, "target": "edited_by_a_person.py"}
    entry = {"approve": answer(interrupt["id"]),
             "deny": answer(interrupt["id"], approved=False),
             "edit": answer(interrupt["id"], edited=edited)}[verdict]

    cont_id = uid("cont")
    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=resume_input(thread_id, cont_id, [entry]))
    assert resp.status_code == 200
    assert resp.headers["Outlast-Run-Id"] == cont_id
    assert frames[-1].event["type"] == "RUN_FINISHED"
    assert (await run_record(client, cont_id))["status"] == "succeeded"

    [result] = [e for e in events(frames, "TOOL_CALL_RESULT") if e["toolCallId"] == call_id]
    ran = steps_run(server.effects_log, run_id, cont_id)
    if verdict == "deny":
        assert result["content"] == "Not run: the person did not approve it."
        assert "Skipped step 2" in texts(frames)
        assert ran == {1: 1, 3: 1}
        todos = (await client.get(f"/threads/{thread_id}")).json()["state"]["todos"]
        assert todos[1]["status"] == "skipped"
    else:
        args = edited if verdict == "edit" else interrupt["metadata"]["args"]
        assert result["content"] == (
            f"read_file finished step 2 with {json.dumps(args, sort_keys=True)}")
        assert ran == {1: 1, 2: 1, 3: 1}
        [line] = [ln for ln in server.effects() if ln.startswith(f"{cont_id} 2 ")]
        assert line == f"{cont_id} 2 {call_id}"
    assert await pending(client, thread_id) == []


async def test_answering_a_settled_interrupt_is_refused(server: ServerProcess,
                                                        client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    await interrupted_thread(client, thread_id, run_id)
    [interrupt] = await pending(client, thread_id)
    r = await client.post(f"/threads/{thread_id}/resume",
                          json={"resume": [answer(interrupt["id"])]})
    assert r.status_code == 200
    await wait_final(client, r.json()["run"]["runId"])

    late = await client.post(f"/threads/{thread_id}/resume",
                             json={"resume": [answer(interrupt["id"], approved=False)]})
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "interrupt_not_pending"
    resp, _ = await collect(client, "POST", "/agents/demo",
                            json=resume_input(thread_id, uid("late"), [answer(interrupt["id"])]))
    assert resp.status_code == 409
    assert resp.json()["error"]["code"] == "interrupt_not_pending"
    unknown = await client.post(f"/threads/{thread_id}/resume",
                                json={"resume": [answer("no-such-interrupt")]})
    assert unknown.status_code == 409
    assert len((await client.get(f"/threads/{thread_id}/runs")).json()["runs"]) == 2


async def test_new_input_that_ignores_a_pending_interrupt_is_refused(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    await interrupted_thread(client, thread_id, run_id)
    before = (await client.get(f"/threads/{thread_id}")).json()

    resp, _ = await collect(client, "POST", "/agents/demo",
                            json=demo_input(thread_id, uid("r"), "never mind, do this"))
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["code"] == "resume_incomplete"
    assert error["missing"] == [i["id"] for i in before["interrupts"]]

    after = (await client.get(f"/threads/{thread_id}")).json()
    assert after == before  # nothing stored
    assert len((await client.get(f"/threads/{thread_id}/runs")).json()["runs"]) == 1


async def test_resume_must_answer_every_pending_interrupt(server: ServerProcess,
                                                          client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    asks = {"interrupts": [{"id": "first"}, {"id": "second"}]}
    body = demo_input(thread_id, run_id)
    body["forwardedProps"] = {"ask": asks}
    resp, _ = await collect(client, "POST", "/agents/ask", json=body)
    assert resp.status_code == 200
    assert [i["id"] for i in await pending(client, thread_id)] == ["first", "second"]

    for partial in (
        client.post(f"/threads/{thread_id}/resume",
                    json={"resume": [answer("first")]}),
        client.post("/agents/ask",
                    json=resume_input(thread_id, uid("r"), [answer("second")])),
    ):
        r = await partial
        assert r.status_code == 422, r.text
        assert r.json()["error"]["code"] == "resume_incomplete"
        assert len(r.json()["error"]["missing"]) == 1
    assert [i["id"] for i in await pending(client, thread_id)] == ["first", "second"]

    cont_id = uid("cont")
    resp, frames = await collect(client, "POST", "/agents/ask", json=resume_input(
        thread_id, cont_id, [answer("first"), answer("second", status="cancelled")]))
    assert resp.status_code == 200
    assert "answers: first=resolved, second=cancelled" in texts(frames)
    assert await pending(client, thread_id) == []


async def test_resending_the_winning_resume_attaches_to_the_continuation(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    await interrupted_thread(client, thread_id, run_id)
    [interrupt] = await pending(client, thread_id)
    cont_id = uid("cont")
    body = resume_input(thread_id, cont_id, [answer(interrupt["id"])])

    first, first_frames = await collect(client, "POST", "/agents/demo", json=body)
    again, again_frames = await collect(client, "POST", "/agents/demo", json=body)
    assert first.status_code == again.status_code == 200
    assert "Outlast-Replayed" not in first.headers
    assert again.headers["Outlast-Replayed"] == "true"
    assert again.headers["Outlast-Run-Id"] == cont_id
    assert [f.event for f in again_frames] == [f.event for f in first_frames]

    # The same through the resume endpoint, keyed by its runId.
    thread_id2, run_id2 = uid("t"), uid("r")
    await interrupted_thread(client, thread_id2, run_id2)
    [interrupt2] = await pending(client, thread_id2)
    cont2 = uid("cont")
    resume_body = {"resume": [answer(interrupt2["id"])], "runId": cont2}
    r1 = await client.post(f"/threads/{thread_id2}/resume", json=resume_body)
    r2 = await client.post(f"/threads/{thread_id2}/resume", json=resume_body)
    assert r1.status_code == r2.status_code == 200
    assert r1.json()["replayed"] is False and r2.json()["replayed"] is True
    assert r2.json()["run"]["runId"] == cont2
    await wait_final(client, cont2)

    runs = (await client.get(f"/threads/{thread_id}/runs")).json()["runs"]
    assert sorted(r["runId"] for r in runs) == sorted([run_id, cont_id])
    assert steps_run(server.effects_log, run_id, cont_id) == {1: 1, 2: 1, 3: 1}
    assert steps_run(server.effects_log, run_id2, cont2) == {1: 1, 2: 1, 3: 1}


async def test_an_expired_interrupt_can_only_be_cancelled(server: ServerProcess,
                                                          client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    body = demo_input(thread_id, run_id)
    body["forwardedProps"] = {"ask": {"interrupts": [
        {"id": "late", "expiresAt": "2001-01-01T00:00:00Z"},
        {"id": "open", "expiresAt": "2999-01-01T00:00:00Z"},
    ]}}
    resp, _ = await collect(client, "POST", "/agents/ask", json=body)
    assert resp.status_code == 200
    listed = await pending(client, thread_id)
    assert [(i["id"], i["expiresAt"]) for i in listed] == [
        ("late", "2001-01-01T00:00:00Z"), ("open", "2999-01-01T00:00:00Z")]

    refused = await client.post(f"/threads/{thread_id}/resume",
                                json={"resume": [answer("late"), answer("open")]})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "interrupt_expired" and error["interruptId"] == "late"
    resp, _ = await collect(client, "POST", "/agents/ask", json=resume_input(
        thread_id, uid("r"), [answer("late"), answer("open")]))
    assert resp.status_code == 409 and resp.json()["error"]["code"] == "interrupt_expired"
    assert [i["id"] for i in await pending(client, thread_id)] == ["late", "open"]

    cont_id = uid("cont")
    accepted = await client.post(f"/threads/{thread_id}/resume", json={
        "resume": [answer("late", status="cancelled"), answer("open")], "runId": cont_id})
    assert accepted.status_code == 200, accepted.text
    assert (await wait_final(client, cont_id))["status"] == "succeeded"
    thread = (await client.get(f"/threads/{thread_id}")).json()
    assert thread["interrupts"] == [] and thread["status"] == "idle"
    assert "answers: late=cancelled, open=resolved" in thread["messages"][-1]["content"]


async def test_folded_stream_leaves_the_threads_pending_interrupts(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    thread_id, run_id = uid("t"), uid("r")
    live = await interrupted_thread(client, thread_id, run_id, approve_at=3)
    thread = (await client.get(f"/threads/{thread_id}")).json()
    expected = [wire(i) for i in thread["interrupts"]]
    assert len(expected) == 1

    _, replay = await collect(client, "GET", f"/runs/{run_id}/events",
                              params={"follow": "false"})
    _, hydration = await collect(client, "POST", "/agents/demo",
                                 json=resume_input(thread_id, uid("hydrate"), []))
    for frames in (live, replay, hydration):
        fold = ThreadFold()
        for f in frames:
            fold.apply(f.event)
        assert fold.interrupts == expected
        assert fold.messages == thread["messages"]
        assert fold.state == thread["state"]
