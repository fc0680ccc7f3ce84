"""G10: a run that has ended leaves nothing behind in the process, however it ended.

Each test drives one way a run can end through real HTTP against an in-process engine,
then checks what the engine still holds for runs (feeds, executions, write channels,
tasks): nothing, once the run is final and nobody watches it.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import uid, wait_final
from tests.support.server import ServerProcess, collect, demo_input, wait_for

SLOW = {"steps": 4, "step_delay_ms": 150, "tokens_per_message": 8, "token_delay_ms": 10}


async def nothing_held(served: InProcess) -> dict[str, int]:
    """Wait until the engine holds nothing for any run; return what it holds then."""
    async def empty() -> bool:
        return not any(served.engine.resident().values())

    try:
        await wait_for(empty, timeout=10)
    except AssertionError:
        pass
    return served.engine.resident()


def zero(held: dict[str, int]) -> bool:
    return not any(held.values())


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    async with in_process_server(tmp_path) as s:
        yield s


async def start_and_leave(served: InProcess, body: dict[str, Any], frames: int = 3) -> None:
    """Start a run, read a few frames, then drop the connection (G1: the run goes on)."""
    await collect(served.client, "POST", "/agents/demo", json=body, limit=frames)


async def answer(served: InProcess, thread_id: str, approved: bool = True) -> list[dict[str, Any]]:
    thread = (await served.client.get(f"/threads/{thread_id}")).json()
    assert thread["interrupts"], thread
    return [{"interruptId": i["id"], "status": "resolved", "payload": {"approved": approved}}
            for i in thread["interrupts"]]


async def test_watched_to_the_end(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    _, frames = await collect(served.client, "POST", "/agents/demo", json=demo_input(t, r))
    assert frames[-1].event["type"] == "RUN_FINISHED"
    assert zero(await nothing_held(served))


async def test_abandoned_mid_run(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    await start_and_leave(served, demo_input(t, r, **SLOW))
    assert (await wait_final(served.client, r))["status"] == "succeeded"
    assert zero(await nothing_held(served))


async def test_never_watched_at_all(served: InProcess) -> None:
    """A run whose client leaves after the first frame: the leak the operator saw."""
    runs = [(uid("t"), uid("r")) for _ in range(5)]
    for t, r in runs:
        await start_and_leave(served, demo_input(t, r, **SLOW), frames=1)
    for _, r in runs:
        await wait_final(served.client, r)
    assert zero(await nothing_held(served))


@pytest.mark.parametrize("wait", [False, True])
async def test_cancelled(served: InProcess, wait: bool) -> None:
    t, r = uid("t"), uid("r")
    await start_and_leave(served, demo_input(t, r, **SLOW))
    resp = await served.client.post(f"/runs/{r}/cancel", params={"wait": str(wait).lower()})
    assert resp.status_code in (200, 202), resp.text
    assert (await wait_final(served.client, r))["status"] == "cancelled"
    assert zero(await nothing_held(served))


async def test_failed(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    await start_and_leave(served, demo_input(t, r, fail_at=2, **SLOW))
    assert (await wait_final(served.client, r))["status"] == "failed"
    assert zero(await nothing_held(served))


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
async def test_interrupted_then_answered(served: InProcess, accept: str) -> None:
    t, r = uid("t"), uid("r")
    await collect(served.client, "POST", "/agents/demo", json=demo_input(t, r, approve_at=[1]))
    assert (await wait_final(served.client, r))["status"] == "interrupted"
    assert zero(await nothing_held(served))
    body = {"resume": await answer(served, t)}
    if accept == "text/event-stream":
        _, frames = await collect(served.client, "POST", f"/threads/{t}/resume", json=body,
                                  headers={"accept": accept})
        continuation = frames[0].event["runId"]
    else:
        resp = await served.client.post(f"/threads/{t}/resume", json=body)
        assert resp.status_code in (200, 201, 202), resp.text
        continuation = resp.json()["run"]["runId"]
    assert (await wait_final(served.client, continuation))["status"] == "succeeded"
    assert zero(await nothing_held(served))


async def test_attached_by_a_retry(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    body = demo_input(t, r, **SLOW)
    await start_and_leave(served, body)
    resp, frames = await collect(served.client, "POST", "/agents/demo", json=body)
    assert resp.headers["outlast-replayed"] == "true"
    assert frames[-1].event["type"] == "RUN_FINISHED"
    assert zero(await nothing_held(served))


async def test_reattached_mid_run(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    await start_and_leave(served, demo_input(t, r, **SLOW))
    await collect(served.client, "GET", f"/runs/{r}/events", headers={"last-event-id": "2"},
                  limit=3)
    _, rest = await collect(served.client, "GET", f"/runs/{r}/events",
                            headers={"last-event-id": "3"})
    assert rest[-1].event["type"] == "RUN_FINISHED"
    assert zero(await nothing_held(served))


async def test_deleted(served: InProcess) -> None:
    t, r = uid("t"), uid("r")
    await collect(served.client, "POST", "/agents/demo", json=demo_input(t, r))
    await wait_final(served.client, r)
    assert (await served.client.delete(f"/threads/{t}")).status_code in (200, 204)
    assert zero(await nothing_held(served))


async def test_crashed_and_taken_over(tmp_path: Path) -> None:
    """A process killed mid-run; this process takes the run over and finishes it."""
    dead = ServerProcess(tmp_path, ["--lease-ttl", "1"]).start()
    t, r = uid("t"), uid("r")
    try:
        import httpx

        async with httpx.AsyncClient(base_url=dead.url, timeout=30) as c:
            await collect(c, "POST", "/agents/demo", json=demo_input(t, r, **SLOW), limit=6)
    finally:
        dead.signal(signal.SIGKILL)
        assert dead.proc is not None
        dead.proc.wait(10)
    async with in_process_server(tmp_path, lease_ttl=1.0) as served:
        assert (await wait_final(served.client, r))["status"] == "succeeded"
        await asyncio.sleep(0)
        assert zero(await nothing_held(served))
