"""spec §4: every stream carries the shared state it continues from.

A reattach that starts after a state change opens with a ``STATE_SNAPSHOT`` of the
run's state as of its cursor (from the log's state index), and a fresh run whose
thread or input has state opens with one (the engine's), so a client that joins in
the middle or did not send its state still converges on what the server stores. The
stock ``@ag-ui/client`` folds every such stream, from every position, to exactly the
thread's stored state, on both stores; the independent validator, with the
``shared-state`` feature declared, finds nothing in fresh, interrupted, continued and
reattached streams.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from outlast.agents.demo import DemoAgent
from outlast.protocol.fold import fold_events
from tests.support.agui_client import stock_client_scenarios
from tests.support.agui_validator import assert_every_reattach_valid, assert_valid, continued
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import uid
from tests.support.scripted_agent import ScriptedAgent
from tests.support.server import collect, demo_input

SHARED = ["shared-state"]
STALE = {"stale": "a client's state from another time"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[InProcess]:
    store_url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    agents = {"scripted": ScriptedAgent(), "demo": DemoAgent(tmp_path / "workspace")}
    async with in_process_server(tmp_path, store_url=store_url, agents=agents) as s:
        yield s


def scripted(thread_id: str, run_id: str, events: list[dict[str, Any]],
             state: Any = None) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
            "state": {} if state is None else state, "tools": [], "context": [],
            "forwardedProps": {"events": events}}


def text(message_id: str, words: int) -> list[dict[str, Any]]:
    return [{"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": f"w{i} "}
              for i in range(words)),
            {"type": "TEXT_MESSAGE_END", "messageId": message_id}]


def stateful() -> list[dict[str, Any]]:
    """State changes of every kind between and inside other constructs."""
    return [
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/plan", "value": []}]},
        *text("a1", 3)[:2],
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/plan/-", "value": "look"}]},
        *text("a1", 3)[2:],
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/plan/-", "value": "do"},
                                          {"op": "replace", "path": "/n", "value": 2}]},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "lookup",
         "parentMessageId": "a1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": 1}'},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/busy", "value": True}]},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "42"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 3, "plan": ["done"], "nested": {"a": [1]}}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/nested/a/-", "value": 2}]},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 4}]},
        # A state event closes a chunk lane: a chunked message comes after them.
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "role": "assistant", "delta": "x"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a2", "delta": "y"},
    ]


async def test_a_reattach_from_every_seq_carries_the_state_as_of_its_cursor(
        served: InProcess) -> None:
    c = served.client
    t = uid("t")
    # The thread has state before this run; the run starts from it (no state sent).
    _, first = await collect(c, "POST", "/agents/scripted", json=scripted(
        t, uid("r"), [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}]))
    assert first[-1].event["type"] == "RUN_FINISHED"
    r = uid("r")
    _, live = await collect(c, "POST", "/agents/scripted", json=scripted(t, r, stateful()))
    assert live[-1].event["type"] == "RUN_FINISHED", live[-1].event
    # The engine's snapshot of the state the run starts from comes right after RUN_STARTED.
    assert live[1].event == {**live[1].event, "type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}
    events = [f.event for f in live]
    thread = (await c.get(f"/threads/{t}")).json()
    assert thread["state"] == {"n": 4, "plan": ["done"], "nested": {"a": [1, 2]}}

    scenarios = []
    for k in range(1, len(events) + 1):
        _, frames = await collect(c, "GET", f"/runs/{r}/events",
                                  headers={"Last-Event-ID": str(k)})
        joined = [f.event for f in frames]
        assert joined[0]["type"] == "RUN_STARTED"
        stated = any(e["type"].startswith("STATE_") for e in events[:k])
        expected = [fold_events(events[:k], [], None).state] if stated else []
        snapshots = [e for e, f in zip(joined, frames, strict=True)
                     if f.id is None and e["type"] == "STATE_SNAPSHOT"]
        assert [s["snapshot"] for s in snapshots] == expected, k  # as of the cursor
        if stated:
            assert joined[1]["type"] == "STATE_SNAPSHOT", k  # before anything re-opened
        held = fold_events(events[:k], [], None)
        # A client that holds the conversation but another state, and one that holds
        # nothing at all (a second tab, a phone), both end on the stored state.
        scenarios.append({"threadId": t, "messages": held.messages, "state": STALE,
                          "runs": [{"events": joined}]})
        scenarios.append({"threadId": t, "runs": [{"events": joined}]})
    for i, result in enumerate(stock_client_scenarios(scenarios)):
        assert result["errors"] == [None], (i, result["errors"])
        assert result["state"] == thread["state"], i


async def test_state_events_spread_over_a_long_commit_fold_from_the_nearest_row(
        served: InProcess) -> None:
    """One commit of 600 events with a state change every 7: the index keeps a row
    within every 64 events, and each reattach folds from the nearest one."""
    c = served.client
    t, r = uid("t"), uid("r")
    events: list[dict[str, Any]] = [{"type": "STATE_SNAPSHOT", "snapshot": {"log": []}}]
    for i in range(100):
        events += text(f"m{i}", 4)
        events.append({"type": "STATE_DELTA",
                       "delta": [{"op": "add", "path": "/log/-", "value": i}]})
    _, live = await collect(c, "POST", "/agents/scripted", json=scripted(t, r, events))
    logged = [f.event for f in live]
    record = await served.engine.store.get_run("local", r)
    assert record is not None
    marks = {await served.engine.store.state_mark(record.rid, k) for k in range(2, len(logged))}
    assert len(marks) >= len(logged) // 64  # not one row for the whole commit
    assert all(m is not None and m[1] - m[0] <= 64 for m in marks)
    for k in range(2, len(logged) + 1, 5):
        _, frames = await collect(c, "GET", f"/runs/{r}/events",
                                  headers={"Last-Event-ID": str(k)})
        assert frames[1].event["type"] == "STATE_SNAPSHOT", k
        assert frames[1].event["snapshot"] == fold_events(logged[:k], [], None).state, k


async def test_a_reattach_before_any_state_event_sends_no_state(served: InProcess) -> None:
    c = served.client
    t, r = uid("t"), uid("r")
    events = [*text("a1", 4), {"type": "STATE_SNAPSHOT", "snapshot": {"late": True}}]
    await collect(c, "POST", "/agents/scripted", json=scripted(t, r, events))
    _, frames = await collect(c, "GET", f"/runs/{r}/events", headers={"Last-Event-ID": "3"})
    types = [f.event["type"] for f in frames if f.id is None]
    assert "STATE_SNAPSHOT" not in types  # nothing to say yet: the replay brings it
    assert [f.event for f in frames if f.id is not None][-2] == {
        **frames[-2].event, "type": "STATE_SNAPSHOT", "snapshot": {"late": True}}


async def test_a_fresh_run_opens_with_the_state_it_starts_from(served: InProcess) -> None:
    c = served.client
    t = uid("t")
    # A new thread without state sent: nothing to establish.
    _, frames = await collect(c, "POST", "/agents/scripted", json=scripted(t, uid("r"), [
        {"type": "STATE_SNAPSHOT", "snapshot": {"k": "v"}}]))
    assert [f.event["type"] for f in frames][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert frames[1].event["snapshot"] == {"k": "v"}  # the agent's own, not the engine's

    # The thread has state: the next run opens with it, whatever the client sent.
    _, frames = await collect(c, "POST", "/agents/scripted", json=scripted(t, uid("r"), [
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/k2", "value": 1}]}]))
    assert frames[1].event["type"] == "STATE_SNAPSHOT"
    assert frames[1].event["snapshot"] == {"k": "v"}
    assert (await c.get(f"/threads/{t}")).json()["state"] == {"k": "v", "k2": 1}

    # A client that sends its state: the run starts from that (AG-UI: the client's
    # state is the run's input), and the thread follows.
    sent = {"edited": "by the person", "k": "w"}
    _, frames = await collect(c, "POST", "/agents/scripted", json=scripted(t, uid("r"), [
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/k3", "value": 3}]}],
        state=sent))
    assert frames[1].event["snapshot"] == sent
    assert (await c.get(f"/threads/{t}")).json()["state"] == {**sent, "k3": 3}
    result = stock_client_scenarios([{"threadId": t, "state": STALE,
                                      "runs": [{"events": [f.event for f in frames]}]}])[0]
    assert result["errors"] == [None] and result["state"] == {**sent, "k3": 3}

    # No state anywhere: no snapshot.
    _, frames = await collect(c, "POST", "/agents/scripted", json=scripted(
        uid("t"), uid("r"), text("a1", 1)))
    assert "STATE_SNAPSHOT" not in [f.event["type"] for f in frames]


async def test_a_retried_post_that_attaches_carries_the_state(served: InProcess) -> None:
    c = served.client
    t, r = uid("t"), uid("r")
    body = scripted(t, r, stateful())
    _, live = await collect(c, "POST", "/agents/scripted", json=body)
    events = [f.event for f in live]
    cursor = 8
    _, frames = await collect(c, "POST", "/agents/scripted", json=body,
                              headers={"Last-Event-ID": str(cursor)})
    assert frames[1].event["type"] == "STATE_SNAPSHOT"
    assert frames[1].event["snapshot"] == fold_events(events[:cursor], [], None).state


async def test_demo_streams_are_valid_shared_state_fresh_interrupted_and_reattached(
        served: InProcess) -> None:
    c = served.client
    t = uid("t")
    body = demo_input(t, uid("r"), steps=2, approve_at=[2], step_delay_ms=0,
                      tokens_per_message=2, token_delay_ms=0)
    _, frames = await collect(c, "POST", "/agents/demo", json=body)
    assert frames[-1].event.get("outcome", {}).get("type") == "interrupt"
    assert_valid([f.event for f in frames], SHARED)
    assert await assert_every_reattach_valid(c, body["runId"], SHARED) > 10

    interrupt = frames[-1].event["outcome"]["interrupts"][0]
    resp = await c.post(f"/threads/{t}/resume", json={"resume": [
        {"interruptId": interrupt["id"], "status": "resolved",
         "payload": {"approved": True}}]})
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["run"]["runId"]
    _, cont = await collect(c, "GET", f"/runs/{run_id}/events")
    assert cont[-1].event["type"] == "RUN_FINISHED", cont[-1].event
    events = [f.event for f in cont]
    assert events[1]["type"] == "STATE_SNAPSHOT"  # the engine's: the thread's todos
    owed = [interrupt["toolCallId"]]
    assert_valid(events, SHARED, allowed=continued([], events, owed))
    assert await assert_every_reattach_valid(c, run_id, SHARED, owed=owed) > 5
    thread = (await c.get(f"/threads/{t}")).json()
    result = stock_client_scenarios([{"threadId": t, "runs": [
        {"events": [f.event for f in frames]},
        {"events": events, "params": {"resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]}}]}])[0]
    assert result["errors"] == [None, None], result["errors"]
    assert result["state"] == thread["state"]
    assert [todo["status"] for todo in thread["state"]["todos"]] == ["done", "done"]


@pytest.mark.parametrize("batch", [1000, 5], ids=["whole runs", "a long log in batches"])
async def test_the_state_index_goes_with_the_log(served: InProcess, batch: int) -> None:
    """Retention removes a run's state index with its events."""
    c = served.client
    r = uid("r")
    await collect(c, "POST", "/agents/scripted", json=scripted(uid("t"), r, stateful()))
    store = served.engine.store
    record = await store.get_run("local", r)
    assert record is not None
    assert await store.state_mark(record.rid, record.last_seq) is not None
    cutoff = time.time() + 3600
    while await store.compact(cutoff, time.time(), 100, batch) is not None:
        pass
    assert await store.state_mark(record.rid, record.last_seq) is None
