"""Several ``outlast serve`` processes on one PostgreSQL database are one service.

Two real server processes share a throwaway database and one demo workspace
(so ``effects.log`` counts side effects over both). Which process executes a
run is the database's choice (whoever claims it first); the tests find the
executor through ``/metrics`` and talk to the other one.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.runs import run_record, uid, wait_final
from tests.support.server import Frame, ServerProcess, collect, demo_input, sse_frames, wait_for

pytestmark = pytest.mark.postgres


@dataclass
class Service:
    """Two server processes over one database and one demo workspace."""

    a: ServerProcess
    b: ServerProcess
    workspace: Path
    clients: dict[str, httpx.AsyncClient] = field(default_factory=dict)

    @property
    def ca(self) -> httpx.AsyncClient:
        return self.clients["a"]

    @property
    def cb(self) -> httpx.AsyncClient:
        return self.clients["b"]

    def effects(self, run_id: str) -> Counter[int]:
        """How many times each step's side effect ran for this run (``effects.log``)."""
        log = self.workspace / "effects.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return Counter(int(line.split()[1]) for line in lines if line.split()[0] == run_id)


def service_args(pg_url: str, workspace: Path) -> tuple[str, ...]:
    return ("--store", pg_url, "--demo-workspace", str(workspace), "--lease-ttl", "2",
            "--keepalive", "2")


@pytest.fixture(scope="module")
def shared_processes(module_server_factory: Any, pg_cluster: Any,
                     tmp_path_factory: pytest.TempPathFactory) -> Service:
    """A and B for the tests that neither stop nor kill them: each test its own thread and
    run ids, and every run it starts finished before it ends."""
    workspace = tmp_path_factory.mktemp("workspace")
    args = service_args(pg_cluster.fresh_database(), workspace)
    return Service(module_server_factory(*args), module_server_factory(*args), workspace)


@asynccontextmanager
async def clients_of(svc: Service) -> AsyncIterator[Service]:
    async with svc.a.client() as ca, svc.b.client() as cb:
        svc.clients = {"a": ca, "b": cb}
        yield svc


@pytest.fixture
async def service(shared_processes: Service) -> Any:
    async with clients_of(shared_processes) as svc:
        yield svc


@pytest.fixture
async def own_service(server_factory: Any, pg_url: str, tmp_path: Path) -> Any:
    """A and B of the test's own, for a test that kills one of them."""
    args = service_args(pg_url, tmp_path / "workspace")
    async with clients_of(Service(server_factory(*args), server_factory(*args),
                                  tmp_path / "workspace")) as svc:
        yield svc


@dataclass
class Reader:
    """An SSE connection read in the background; keeps frames and when they came."""

    frames: list[Frame] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    task: asyncio.Task[None] | None = None

    def start(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Reader:
        self.task = asyncio.create_task(self._read(c, method, url, **kwargs))
        return self

    async def _read(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> None:
        async with c.stream(method, url, **kwargs) as resp:
            self.status = resp.status_code
            self.headers = dict(resp.headers)
            async for f in sse_frames(resp):
                self.frames.append(f)
                self.times.append(time.time())

    async def done(self, timeout: float = 30) -> Reader:
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout)
        return self

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with suppress(asyncio.CancelledError, httpx.HTTPError):
                await self.task


def pairs(frames: list[Frame]) -> list[tuple[int | None, dict[str, Any]]]:
    return [(f.id, f.event) for f in frames]


async def executing(c: httpx.AsyncClient) -> int:
    """Runs executing in that process, from its metrics."""
    text = (await c.get("/metrics")).text
    m = re.search(r"^outlast_runs_executing (\S+)$", text, re.MULTILINE)
    assert m is not None
    return int(float(m.group(1)))


async def executor(svc: Service, run_id: str) -> tuple[str, str]:
    """Wait until the run executes somewhere; (executor, the other) as "a"/"b"."""
    async def found() -> tuple[str, str] | None:
        r = await svc.ca.get(f"/runs/{run_id}")
        if r.status_code != 200 or r.json()["status"] != "running" or r.json()["lastSeq"] < 3:
            return None
        a, b = await executing(svc.ca), await executing(svc.cb)
        if (a, b) == (1, 0):
            return "a", "b"
        if (a, b) == (0, 1):
            return "b", "a"
        return None
    return await wait_for(found, 20)  # type: ignore[no-any-return]


def contiguous(frames: list[Frame]) -> list[int]:
    ids = [f.id for f in frames if f.id is not None]
    assert ids == list(range(1, len(ids) + 1)), ids
    return ids


# -- streams ------------------------------------------------------------------


async def test_a_run_started_on_a_is_followed_live_and_replayed_from_b(
        service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=200, token_delay_ms=10)
    on_a = Reader().start(svc.ca, "POST", "/agents/demo", json=body)

    async def started() -> bool:
        r = await svc.cb.get(f"/runs/{body['runId']}")
        return r.status_code == 200 and r.json()["status"] == "running"

    await wait_for(started)
    live_b = Reader().start(svc.cb, "GET", f"/runs/{body['runId']}/events")
    await on_a.done()
    await live_b.done()
    run = await run_record(svc.cb, body["runId"])
    assert run["status"] == "succeeded"
    assert on_a.status == 200 and live_b.status == 200
    # B followed live: it had frames while the run was still going.
    assert live_b.times[0] < run["finishedAt"]
    assert pairs(live_b.frames) == pairs(on_a.frames)
    assert contiguous(on_a.frames)[-1] == run["lastSeq"]
    assert on_a.frames[-1].event["type"] == "RUN_FINISHED"

    _, replay = await collect(svc.cb, "GET", f"/runs/{body['runId']}/events?follow=false")
    assert pairs(replay) == pairs(on_a.frames)
    # Reattaching on B mid-log: the synthesized RUN_STARTED, then exactly A's tail.
    _, tail = await collect(svc.cb, "GET", f"/runs/{body['runId']}/events",
                            headers={"Last-Event-ID": "10"})
    assert tail[0].id is None and tail[0].event["type"] == "RUN_STARTED"
    assert pairs([f for f in tail if f.id is not None]) == pairs(on_a.frames[10:])


async def test_hydration_on_b_shows_a_run_executing_on_a(service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=300)
    on_a = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    _, other = await executor(svc, body["runId"])
    hydrate = {**body, "runId": uid("hyd"), "messages": []}
    _, frames = await collect(svc.clients[other], "POST", "/agents/demo", json=hydrate)
    types = [f.event["type"] for f in frames]
    assert types[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    assert frames[0].event["runId"] == body["runId"]
    assert types[-1] == "RUN_FINISHED"
    await on_a.done()
    thread = (await svc.clients[other].get(f"/threads/{body['threadId']}")).json()
    texts = [m.get("content") for m in thread["messages"]]
    assert "do the work" in texts and thread["activeRun"] is None


# -- cancel -------------------------------------------------------------------


async def test_cancel_sent_to_b_stops_a_run_executing_on_a_within_a_second(
        service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=20, step_delay_ms=300)
    stream = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    ran_on, other = await executor(svc, body["runId"])
    t0 = time.monotonic()
    r = await svc.clients[other].post(f"/runs/{body['runId']}/cancel", params={"wait": "true"})
    elapsed = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled"
    print(f"cancel via the other process: final after {elapsed * 1000:.0f} ms")
    assert elapsed < 3.0  # G6 asks for 1 s; generous bound for a loaded 2-core machine
    await stream.done()
    last = stream.frames[-1].event
    assert last["type"] == "RUN_FINISHED" and last["outcome"] == {"type": "cancelled"}
    assert sum(svc.effects(body["runId"]).values()) < 20
    assert await executing(svc.clients[ran_on]) == 0


# -- admission across processes ------------------------------------------------


async def test_a_retry_on_b_attaches_to_the_run_of_a(service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=200)
    first = Reader().start(svc.ca, "POST", "/agents/demo", json=body,
                           headers={"Idempotency-Key": body["runId"]})
    await executor(svc, body["runId"])
    retry = Reader().start(svc.cb, "POST", "/agents/demo", json=body,
                           headers={"Idempotency-Key": body["runId"]})
    await first.done()
    await retry.done()
    assert retry.status == 200 and retry.headers.get("outlast-replayed") == "true"
    assert "outlast-replayed" not in first.headers
    assert retry.headers["outlast-run-id"] == body["runId"]
    assert pairs(retry.frames) == pairs(first.frames)
    runs = (await svc.cb.get(f"/threads/{body['threadId']}/runs")).json()["runs"]
    assert [r["runId"] for r in runs] == [body["runId"]]
    assert svc.effects(body["runId"]) == Counter({1: 1, 2: 1, 3: 1})


async def test_a_new_request_on_the_busy_thread_via_b_gets_409(service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=300)
    stream = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    await executor(svc, body["runId"])
    other = demo_input(body["threadId"], uid("run"), "something else")
    r = await svc.cb.post("/agents/demo", json=other)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "run_already_active"
    assert r.json()["error"]["activeRunId"] == body["runId"]
    r = await svc.cb.delete(f"/threads/{body['threadId']}")
    assert r.status_code == 409 and r.json()["error"]["code"] == "thread_busy"
    await stream.done()
    assert (await svc.cb.get(f"/runs/{other['runId']}")).status_code == 404


async def test_sixteen_concurrent_identical_requests_over_a_and_b_make_one_run(
        service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=100)
    readers = [Reader().start(svc.ca if i % 2 else svc.cb, "POST", "/agents/demo", json=body)
               for i in range(16)]
    for reader in readers:
        await reader.done()
    assert [r.status for r in readers] == [200] * 16
    assert {r.headers["outlast-run-id"] for r in readers} == {body["runId"]}
    assert sum("outlast-replayed" not in r.headers for r in readers) == 1
    for reader in readers:
        assert pairs(reader.frames) == pairs(readers[0].frames)
    assert readers[0].frames[-1].event["type"] == "RUN_FINISHED"
    runs = (await svc.ca.get(f"/threads/{body['threadId']}/runs")).json()["runs"]
    assert len(runs) == 1 and runs[0]["attempts"] == 1
    assert svc.effects(body["runId"]) == Counter({1: 1, 2: 1, 3: 1})


async def test_queued_runs_start_on_whichever_process_is_free(
        server_factory: Any, pg_url: str, tmp_path: Path) -> None:
    args = ("--store", pg_url, "--demo-workspace", str(tmp_path / "ws"), "--max-runs", "1")
    a, b = server_factory(*args), server_factory(*args)
    bodies = [demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=300) for _ in range(2)]
    async with a.client() as ca, b.client() as cb:
        readers = [Reader().start(ca, "POST", "/agents/demo", json=body) for body in bodies]

        async def both_running() -> bool:
            runs = [await ca.get(f"/runs/{body['runId']}") for body in bodies]
            return all(r.status_code == 200 and r.json()["status"] == "running" for r in runs)

        await wait_for(both_running)
        # Each process takes one run: A is full, so B started the run admitted on A.
        assert (await executing(ca), await executing(cb)) == (1, 1)
        for reader in readers:
            await reader.done()
        assert [(await run_record(cb, body["runId"]))["status"] for body in bodies] == \
            ["succeeded", "succeeded"]


# -- interrupts -------------------------------------------------------------------


async def test_an_interrupt_raised_on_a_is_answered_on_b(service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=2, approve_at=[1])
    _, frames = await collect(svc.ca, "POST", "/agents/demo", json=body)
    outcome = frames[-1].event["outcome"]
    assert outcome["type"] == "interrupt"
    [pending] = outcome["interrupts"]
    thread = (await svc.cb.get(f"/threads/{body['threadId']}")).json()
    assert thread["status"] == "interrupted"
    assert [i["id"] for i in thread["interrupts"]] == [pending["id"]]

    cont_id = uid("cont")
    answer: dict[str, Any] = {"resume": [{"interruptId": pending["id"], "status": "resolved",
                                          "payload": {"approved": True}}], "runId": cont_id}
    _, cont = await collect(svc.cb, "POST", f"/threads/{body['threadId']}/resume",
                            json=answer, headers={"Accept": "text/event-stream"})
    assert cont[-1].event["type"] == "RUN_FINISHED"
    assert (await run_record(svc.ca, cont_id))["status"] == "succeeded"
    # Exactly once: the same answer through A (another request) finds nothing pending.
    again = {**answer, "runId": uid("late")}
    r = await svc.ca.post(f"/threads/{body['threadId']}/resume", json=again)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "interrupt_not_pending"
    assert svc.effects(cont_id) == Counter({1: 1, 2: 1})
    assert svc.effects(body["runId"]) == Counter()


# -- crashes ----------------------------------------------------------------------


async def test_a_sigkilled_process_run_is_finished_by_the_other_exactly_once(
        own_service: Service) -> None:
    svc = own_service
    steps = 6
    body = demo_input(uid("th"), uid("run"), steps=steps, step_delay_ms=400)
    stream = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    ran_on, survivor = await executor(svc, body["runId"])

    async def two_effects() -> bool:
        return sum(svc.effects(body["runId"]).values()) >= 2

    await wait_for(two_effects)
    victim = svc.a if ran_on == "a" else svc.b
    killed_at = time.time()
    victim.kill()
    await stream.close()
    run = await wait_final(svc.clients[survivor], body["runId"], timeout=40)
    assert run["status"] == "succeeded", run
    assert run["attempts"] == 2
    print(f"taken over and finished {run['finishedAt'] - killed_at:.1f} s after SIGKILL")
    assert svc.effects(body["runId"]) == Counter({s: 1 for s in range(1, steps + 1)})
    _, log = await collect(svc.clients[survivor], "GET",
                           f"/runs/{body['runId']}/events?follow=false")
    assert contiguous(log)[-1] == run["lastSeq"]
    resumed = [f.event for f in log if f.event.get("name") == "outlast.resumed"]
    assert len(resumed) == 1 and resumed[0]["value"]["attempt"] == 2
    assert log[-1].event["type"] == "RUN_FINISHED"
    # What the client saw before the kill is a prefix of the log (G2).
    seen = [f for f in stream.frames if f.id is not None]
    assert pairs(seen) == pairs(log[:len(seen)])


async def test_a_run_released_at_sigterm_is_resumed_by_the_other_at_once(
        server_factory: Any, pg_url: str, tmp_path: Path) -> None:
    # A long TTL: the survivor's scheduler would not look again for 20 s by itself,
    # so only the hand-off notification can make it resume the run promptly.
    workspace = tmp_path / "workspace"
    args = ("--store", pg_url, "--demo-workspace", str(workspace), "--lease-ttl", "60")
    svc = Service(server_factory(*args), server_factory(*args), workspace)
    steps = 5
    body = demo_input(uid("th"), uid("run"), steps=steps, step_delay_ms=300)
    async with svc.a.client() as ca, svc.b.client() as cb:
        svc.clients = {"a": ca, "b": cb}
        stream = Reader().start(ca, "POST", "/agents/demo", json=body)
        ran_on, survivor = await executor(svc, body["runId"])

        async def one_effect() -> bool:
            return sum(svc.effects(body["runId"]).values()) >= 1

        await wait_for(one_effect)
        stopping = svc.a if ran_on == "a" else svc.b
        t0 = time.monotonic()
        await asyncio.to_thread(stopping.stop)
        run = await wait_final(svc.clients[survivor], body["runId"], timeout=40)
        took = time.monotonic() - t0
        await stream.close()
    print(f"clean hand-off: run finished {took:.1f} s after SIGTERM")
    assert run["status"] == "succeeded", run
    assert took < 10  # the survivor's own next look would come only after 20 s
    assert svc.effects(body["runId"]) == Counter({s: 1 for s in range(1, steps + 1)})
