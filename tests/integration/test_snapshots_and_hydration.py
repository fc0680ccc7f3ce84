"""Snapshots follow the run and reloads never roll back (G5); hydration streams the thread
without running anything (spec §3); snapshot policies and the snapshot hook.

Most tests use a real ``outlast serve``; the snapshot hook is Python, so its tests serve an
in-process Engine with uvicorn on loopback (still real HTTP and a real SQLite file).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.inprocess import in_process_server
from tests.support.runs import fold_of, stream_into, wait_final
from tests.support.server import Frame, ServerProcess, collect, demo_input, wait_for

# One server for the whole module (``module_server``, which ``client`` then talks to):
# the tests share its store, so each uses its own thread and run ids.
pytestmark = pytest.mark.usefixtures("module_server")


def hydration(thread_id: str, run_id: str) -> dict[str, Any]:
    """A RunAgentInput with no messages and no resume: stream the thread, run nothing."""
    return demo_input(thread_id, run_id, messages=[])


async def run_ids(client: httpx.AsyncClient, thread_id: str) -> list[str]:
    runs = (await client.get(f"/threads/{thread_id}/runs")).json()["runs"]
    return [r["runId"] for r in runs]


async def log_of(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    _, frames = await collect(client, "GET", f"/runs/{run_id}/events?follow=false")
    assert all(f.id is not None for f in frames)
    return [f.event for f in frames]


async def test_the_thread_snapshot_follows_the_run_boundary_by_boundary(
        client: httpx.AsyncClient) -> None:
    _, first = await collect(client, "POST", "/agents/demo",
                             json=demo_input("follow-t", "follow-r1", steps=1))
    before = (await client.get("/threads/follow-t")).json()
    assert before["activeRun"] is None

    live: list[Frame] = []
    body = demo_input("follow-t", "follow-r2", "again", steps=3, step_delay_ms=120,
                      token_delay_ms=10)
    task = asyncio.create_task(stream_into(client, "POST", "/agents/demo", live, json=body))
    views: list[dict[str, Any]] = []
    while not task.done():
        resp = await client.get("/threads/follow-t")
        assert "session_state" not in resp.text and "sessionState" not in resp.text
        views.append(resp.json())
        await asyncio.sleep(0.005)
    await task
    after = (await client.get("/threads/follow-t")).json()

    during = [v for v in views if v["activeRun"] is not None]
    assert len(during) > 10
    assert {v["activeRun"]["runId"] for v in during} == {"follow-r2"}
    assert {v["status"] for v in during} == {"busy"}
    # The snapshot's coordinate only moves forward, and it moves boundary by boundary.
    coords = [(v["asOf"]["runId"] == "follow-r2", v["asOf"]["seq"]) for v in views]
    assert coords == sorted(coords)
    seen = {seq for in_r2, seq in coords if in_r2}
    assert len(seen) >= 5
    # Messages never go backwards: what was shown stays, in the same order.
    previous = [m["id"] for m in before["messages"]]
    for view in [*views, after]:
        ids = [m["id"] for m in view["messages"]]
        assert ids[:len(previous)] == previous
        previous = ids
    # Every snapshot is the fold of the log up to its coordinate.
    log = [f.event for f in first]
    for view in during[:: max(1, len(during) // 8)]:
        if view["asOf"]["runId"] == "follow-r2":
            upto = fold_of([f.event for f in live[:view["asOf"]["seq"]]], fold_of(log))
            assert view["messages"] == upto.messages
            assert view["state"] == upto.state

    assert after["activeRun"] is None and after["status"] == "idle"
    assert after["asOf"] == {"runId": "follow-r2", "seq": len(live)}
    final = fold_of([f.event for f in live], fold_of(log))
    assert after["messages"] == final.messages and after["state"] == final.state


async def test_hydrating_an_idle_thread_streams_its_snapshot_and_runs_nothing(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    await collect(client, "POST", "/agents/demo", json=demo_input("idle-t", "idle-r1", steps=2))
    thread = (await client.get("/threads/idle-t")).json()
    effects = module_server.effects()

    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=hydration("idle-t", "idle-h1"))
    assert resp.status_code == 200
    assert resp.headers["Outlast-Thread-Id"] == "idle-t"
    assert [f.event["type"] for f in frames] == [
        "RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert all(f.id is None for f in frames)  # nothing of it is in any log
    assert frames[1].event["snapshot"] == thread["state"]
    assert frames[2].event["messages"] == thread["messages"]
    folded = fold_of([f.event for f in frames])
    assert folded.messages == thread["messages"] and folded.state == thread["state"]
    assert folded.interrupts == []

    assert await run_ids(client, "idle-t") == ["idle-r1"]
    assert (await client.get("/runs/idle-h1")).status_code == 404
    assert module_server.effects() == effects
    assert (await client.get("/threads/idle-t")).json() == thread

    # Hydrating a thread nobody created streams an empty one and creates nothing.
    _, empty = await collect(client, "POST", "/agents/demo", json=hydration("nobody-t", "n-h"))
    assert [f.event["type"] for f in empty] == [
        "RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert empty[2].event["messages"] == []
    assert (await client.get("/threads/nobody-t")).status_code == 404


async def test_hydrating_an_interrupted_thread_carries_its_pending_interrupts(
        client: httpx.AsyncClient) -> None:
    await collect(client, "POST", "/agents/demo",
                  json=demo_input("ask-t", "ask-r1", steps=2, approve_at=[1]))
    thread = (await client.get("/threads/ask-t")).json()
    assert thread["status"] == "interrupted" and len(thread["interrupts"]) == 1
    _, frames = await collect(client, "POST", "/agents/demo", json=hydration("ask-t", "ask-h"))
    end = frames[-1].event
    assert end["type"] == "RUN_FINISHED"
    assert end["outcome"]["type"] == "interrupt"
    assert [i["id"] for i in end["outcome"]["interrupts"]] == [
        i["id"] for i in thread["interrupts"]]
    folded = fold_of([f.event for f in frames])
    assert folded.messages == thread["messages"]
    assert [i["id"] for i in folded.interrupts] == [i["id"] for i in thread["interrupts"]]
    assert await run_ids(client, "ask-t") == ["ask-r1"]


async def test_reload_mid_run_never_rolls_back(client: httpx.AsyncClient) -> None:
    _, first = await collect(client, "POST", "/agents/demo",
                             json=demo_input("reload-t", "reload-r1", steps=1))
    previous_end = (await client.get("/threads/reload-t")).json()

    # The second run: its creating client reads a little, then goes away.
    body = demo_input("reload-t", "reload-r2", "more", steps=4, step_delay_ms=150,
                      token_delay_ms=10)
    resp, seen = await collect(client, "POST", "/agents/demo", json=body, limit=3)
    assert resp.status_code == 200 and len(seen) == 3

    async def some_boundaries_in() -> dict[str, Any] | None:
        view: dict[str, Any] = (await client.get("/threads/reload-t")).json()
        as_of = view["asOf"]
        return view if as_of["runId"] == "reload-r2" and as_of["seq"] > 15 else None

    view = await wait_for(some_boundaries_in)
    assert view["activeRun"]["runId"] == "reload-r2"
    assert view["status"] == "busy"
    assert len(view["messages"]) > len(previous_end["messages"])

    # A reload during the run: the latest boundary, the run marked active, then live.
    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=hydration("reload-t", "reload-h1"))
    assert resp.headers["Outlast-Run-Id"] == "reload-r2"
    head = [f.event["type"] for f in frames[:3]]
    assert head == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    assert all(f.id is None for f in frames[:3])
    assert frames[0].event["runId"] == "reload-r2"
    shown = frames[2].event["messages"]
    assert len(shown) >= len(view["messages"])  # not the previous run's end
    assert [m["id"] for m in shown[:len(view["messages"])]] == [m["id"] for m in view["messages"]]
    tail = [f for f in frames[3:]]
    assert tail and all(f.id is not None for f in tail)
    start = tail[0].id
    assert start is not None and start > view["asOf"]["seq"]
    assert [f.id for f in tail] == list(range(start, start + len(tail)))
    assert tail[-1].event["type"] == "RUN_FINISHED"

    run = await wait_final(client, "reload-r2")
    assert run["status"] == "succeeded" and run["lastSeq"] == tail[-1].id
    log1, log2 = [f.event for f in first], await log_of(client, "reload-r2")
    # The snapshot it started from is the fold of the log up to the boundary before `start`.
    at = fold_of(log2[:start - 1], fold_of(log1))
    assert shown == at.messages and frames[1].event["snapshot"] == at.state
    assert [e for e in log2[start - 1:]] == [f.event for f in tail]
    final = (await client.get("/threads/reload-t")).json()
    folded = fold_of([f.event for f in frames])
    assert folded.messages == final["messages"] and folded.state == final["state"]

    # After the run, a reload is the final state.
    _, again = await collect(client, "POST", "/agents/demo",
                             json=hydration("reload-t", "reload-h2"))
    assert [f.event["type"] for f in again] == [
        "RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert again[2].event["messages"] == final["messages"]
    assert final["asOf"] == {"runId": "reload-r2", "seq": run["lastSeq"]}
    assert final["activeRun"] is None
    assert await run_ids(client, "reload-t") == ["reload-r2", "reload-r1"]


async def test_reload_just_before_the_run_finishes_shows_the_live_run_or_its_final_state(
        client: httpx.AsyncClient) -> None:
    # The first run ends waiting for an approval; the second answers it. From the moment
    # the second is admitted, no reload may show that interrupt pending again, nor a
    # snapshot older than the run it shows as active.
    await collect(client, "POST", "/agents/demo",
                  json=demo_input("edge-t", "edge-r1", steps=1, approve_at=[1]))
    asked = (await client.get("/threads/edge-t")).json()
    [interrupt] = asked["interrupts"]

    answer = demo_input("edge-t", "edge-r2", messages=[], steps=1, step_delay_ms=600)
    answer["resume"] = [{"interruptId": interrupt["id"], "status": "resolved",
                         "payload": {"approved": True}}]
    live: list[Frame] = []
    task = asyncio.create_task(stream_into(client, "POST", "/agents/demo", live, json=answer))
    await wait_for(lambda: _true(bool(live)), interval=0.002)

    # Reloads keep coming, a view every few ms and a new hydration every 15 ms (each
    # follows the run to its end), until a while after the run ended, six at least
    # (a loaded machine makes each slower, not the run).
    views: list[dict[str, Any]] = []
    reloads: list[asyncio.Task[tuple[httpx.Response, list[Frame]]]] = []
    quiet_until = None
    while quiet_until is None or time.monotonic() < quiet_until or len(reloads) < 6:
        reloads.append(asyncio.create_task(collect(
            client, "POST", "/agents/demo", json=hydration("edge-t", f"edge-h{len(reloads)}"))))
        for _ in range(3):
            views.append((await client.get("/threads/edge-t")).json())
            await asyncio.sleep(0.005)
        if task.done() and quiet_until is None:
            quiet_until = time.monotonic() + 0.2
    await task
    streams = [frames for _, frames in await asyncio.gather(*reloads)]
    final = (await client.get("/threads/edge-t")).json()
    assert final["activeRun"] is None and final["interrupts"] == []
    assert final["asOf"]["runId"] == "edge-r2"
    live_views = [v for v in views if v["activeRun"] is not None]
    assert live_views and len(live_views) < len(views)  # both sides of the end were seen

    for view in views:
        assert view["interrupts"] == []  # never the superseded interrupt
        if view["activeRun"] is None:
            assert (view["asOf"], view["messages"], view["state"]) == (
                final["asOf"], final["messages"], final["state"])
        else:
            assert view["activeRun"]["runId"] == "edge-r2"
    assert len(streams) > 5
    assert any(f.id is not None for frames in streams for f in frames)  # some followed live
    for i, frames in enumerate(streams):
        assert frames[0].event["runId"] in ("edge-r2", f"edge-h{i}")
        assert frames[-1].event["type"] == "RUN_FINISHED"
        assert (frames[-1].event.get("outcome") or {}).get("type") != "interrupt"
        folded = fold_of([f.event for f in frames])
        assert folded.interrupts == []
        assert folded.messages == final["messages"] and folded.state == final["state"]


async def _true(value: bool) -> bool:
    return value


def boundaries_in(log: list[dict[str, Any]]) -> int:
    fold = ThreadFold()
    count = 0
    for event in log:
        fold.apply(event)
        count += fold.at_boundary
    return count


async def poll_while_running(client: httpx.AsyncClient, thread_id: str, body: dict[str, Any],
                             ) -> tuple[list[dict[str, Any]], float]:
    started = time.monotonic()
    task = asyncio.create_task(collect(client, "POST", "/agents/demo", json=body))
    views = []
    while not task.done():
        resp = await client.get(f"/threads/{thread_id}")
        if resp.status_code == 200:
            views.append(resp.json())
        await asyncio.sleep(0.003)
    await task
    # A new thread has no snapshot until its first run's first commit (asOf null).
    return ([v for v in views if v["activeRun"] is not None and v["asOf"] is not None],
            time.monotonic() - started)


async def test_run_end_snapshot_mode_saves_only_at_start_and_end(server_factory: Any) -> None:
    srv: ServerProcess = server_factory("--snapshot-mode", "run_end")
    async with srv.client() as client:
        body = demo_input("end-t", "end-r", steps=3, step_delay_ms=100, token_delay_ms=10)
        during, _ = await poll_while_running(client, "end-t", body)
        log = await log_of(client, "end-r")
        final = (await client.get("/threads/end-t")).json()
    assert boundaries_in(log) > 10  # boundary mode would have saved at each of these
    assert len(during) > 10
    # The start is saved (the new input shows at once); nothing else until the end.
    assert {(v["asOf"]["runId"], v["asOf"]["seq"]) for v in during} <= {
        ("end-r", 1), ("end-r", len(log))}
    assert ("end-r", 1) in {(v["asOf"]["runId"], v["asOf"]["seq"]) for v in during}
    assert all([m["id"] for m in v["messages"]] == ["user-end-r"] for v in during
               if v["asOf"]["seq"] == 1)
    assert final["asOf"] == {"runId": "end-r", "seq": len(log)}
    folded = fold_of(log)
    assert final["messages"] == folded.messages and final["state"] == folded.state


async def test_a_snapshot_min_interval_throttles_boundary_snapshots(server_factory: Any) -> None:
    srv: ServerProcess = server_factory("--snapshot-min-interval", "0.4")
    async with srv.client() as client:
        body = demo_input("slow-t", "slow-r", steps=4, step_delay_ms=150, token_delay_ms=10)
        during, elapsed = await poll_while_running(client, "slow-t", body)
        log = await log_of(client, "slow-r")
        final = (await client.get("/threads/slow-t")).json()
    saves = {v["asOf"]["seq"] for v in during if v["asOf"]["runId"] == "slow-r"}
    allowed = int(elapsed / 0.4) + 3  # the forced first and last, one per interval
    print(f"throttled: {len(saves)} snapshots seen in {elapsed:.2f} s, "
          f"{boundaries_in(log)} boundaries")
    assert boundaries_in(log) > 2 * allowed
    assert 2 <= len(saves) <= allowed
    # Throttled saves still keep the thread whole: the end is the fold of the log.
    assert final["asOf"] == {"runId": "slow-r", "seq": len(log)}
    folded = fold_of(log)
    assert final["messages"] == folded.messages and final["state"] == folded.state


# -- the snapshot hook, in-process ---------------------------------------------------


async def test_the_snapshot_hook_gets_every_saved_snapshot(tmp_path: Path) -> None:
    saved: list[dict[str, Any]] = []

    async def hook(snapshot: dict[str, Any]) -> None:
        saved.append(snapshot)

    async with in_process_server(tmp_path, snapshot_hook=hook) as served:
        client = served.client
        _, frames = await collect(client, "POST", "/agents/demo",
                                  json=demo_input("hook-t", "hook-r", steps=2))
        final = (await client.get("/threads/hook-t")).json()
        await wait_for(lambda: _true(bool(saved) and saved[-1]["asOf"] == len(frames)))
    assert len(saved) >= 5
    assert {(s["threadId"], s["runId"]) for s in saved} == {("hook-t", "hook-r")}
    as_of = [s["asOf"] for s in saved]
    assert as_of == sorted(set(as_of)) and as_of[0] == 1 and as_of[-1] == len(frames)
    log = [f.event for f in frames]
    for snapshot in saved:
        upto = fold_of(log[:snapshot["asOf"]])
        assert snapshot["messages"] == upto.messages and snapshot["state"] == upto.state
    assert saved[-1]["messages"] == final["messages"] and saved[-1]["state"] == final["state"]
    assert all("session_state" not in s and "sessionState" not in s for s in saved)


async def test_a_failing_snapshot_hook_does_not_break_the_run(tmp_path: Path) -> None:
    calls: list[int] = []

    def hook(snapshot: dict[str, Any]) -> None:
        calls.append(snapshot["asOf"])
        raise RuntimeError("the mirror is down")

    async with in_process_server(tmp_path, snapshot_hook=hook) as served:
        client = served.client
        resp, frames = await collect(client, "POST", "/agents/demo",
                                     json=demo_input("fail-hook-t", "fail-hook-r", steps=2))
        run = (await client.get("/runs/fail-hook-r")).json()
        final = (await client.get("/threads/fail-hook-t")).json()
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
    assert run["status"] == "succeeded"
    assert len(calls) >= 5 and calls[-1] == len(frames)
    folded = fold_of([f.event for f in frames])
    assert final["messages"] == folded.messages and final["state"] == folded.state
    assert final["asOf"] == {"runId": "fail-hook-r", "seq": len(frames)}
