"""A partition is not a crash: a process cut off from PostgreSQL stops its work in time,
its clients never hang, and it serves the truth again within seconds of the heal.

PostgreSQL runs in the machine's namespace; processes A and B each run in a network
namespace of their own (``tests/support/netns.py``), with ``--lease-ttl 3`` over one demo
workspace, so ``effects.log`` counts side effects over both. A run is admitted on A (so A
executes it), then A's link to the database is cut, silently, both ways, while its
clients stay connected. Each test checks what an operator would: every effect happened
once across both processes, the run's log is one contiguous sequence with one start and
one end, B finished the run, no reader of A hung or read short, and after the heal A
serves the run's final status and whole log within seconds, saying once in its log what
became of each run it held.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from tests.support.netns import NetnsUnavailable, Node, Topology
from tests.support.postgres import PostgresCluster, PostgresUnavailable
from tests.support.runs import run_record, uid
from tests.support.server import Frame, ServerProcess, collect, demo_input, sse_frames, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TTL = 3
HEALED_WITHIN = 30.0  # seconds after the heal by which A serves the truth again


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"partition tests must run in CI, but: {reason}", pytrace=False)
    pytest.skip(f"partition tests cannot run here: {reason}")


@pytest.fixture(scope="module")
def network() -> Iterator[tuple[Topology, PostgresCluster]]:
    """Two namespaces and a PostgreSQL cluster listening where they reach it."""
    try:
        topo = Topology.create(2)
    except NetnsUnavailable as exc:
        _unavailable(str(exc))
    try:
        cluster = PostgresCluster.start_new(listen=topo.db_hosts)
    except PostgresUnavailable as exc:
        topo.destroy()
        _unavailable(str(exc))
    try:
        yield topo, cluster
    finally:
        cluster.stop()
        topo.destroy()


@dataclass
class Service:
    topo: Topology
    a: ServerProcess
    b: ServerProcess
    node_a: Node
    db_url: str  # the test's own way to the database (loopback)
    workspace: Path
    clients: dict[str, httpx.AsyncClient] = field(default_factory=dict)

    @property
    def ca(self) -> httpx.AsyncClient:
        return self.clients["a"]

    @property
    def cb(self) -> httpx.AsyncClient:
        return self.clients["b"]

    def effects(self, run_id: str) -> Counter[int]:
        log = self.workspace / "effects.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return Counter(int(line.split()[1]) for line in lines if line.split()[0] == run_id)

    def cut(self) -> float:
        self.topo.cut(self.node_a)
        return time.monotonic()

    def heal(self) -> float:
        self.topo.heal(self.node_a)
        return time.monotonic()

    async def effect_status(self, run_id: str, key: str) -> str | None:
        con = await asyncpg.connect(self.db_url)
        try:
            status: str | None = await con.fetchval(
                "SELECT e.status FROM effects e JOIN runs r ON r.rid = e.rid "
                "WHERE r.id = $1 AND e.key = $2", run_id, key)
            return status
        finally:
            await con.close()

    def lines_of_a(self, text: str) -> list[str]:
        return [line for line in self.a.log if text in line]


@pytest.fixture
async def service(network: tuple[Topology, PostgresCluster], tmp_path: Path) -> Any:
    topo, cluster = network
    db_url = cluster.fresh_database("part")
    database = urlsplit(db_url).path.lstrip("/")
    workspace = tmp_path / "workspace"
    servers = []
    for name, node in zip("ab", topo.nodes, strict=True):
        store = f"postgresql://postgres@{node.db_host}:{cluster.port}/{database}"
        servers.append(ServerProcess(
            tmp_path / name, prefix=node.prefix,
            args=["--store", store, "--host", node.client_addr, "--insecure",
                  "--demo-workspace", str(workspace), "--lease-ttl", str(TTL),
                  "--keepalive", "2"]))
    try:
        for server in servers:
            server.start(timeout=60)
        svc = Service(topo, servers[0], servers[1], topo.nodes[0], db_url, workspace)
        timeout = httpx.Timeout(45.0)
        async with httpx.AsyncClient(base_url=svc.a.url, timeout=timeout) as ca, \
                httpx.AsyncClient(base_url=svc.b.url, timeout=timeout) as cb:
            svc.clients = {"a": ca, "b": cb}
            yield svc
    finally:
        for node in topo.nodes:
            topo.heal(node)
        for server in servers:
            server.stop()


@dataclass
class Reader:
    """An SSE connection read in the background: its frames, and how it ended."""

    frames: list[Frame] = field(default_factory=list)
    status: int | None = None
    error: str | None = None  # the connection failed (an aborted body), never a hang
    task: asyncio.Task[None] | None = None

    def start(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Reader:
        self.task = asyncio.create_task(self._read(c, method, url, **kwargs))
        return self

    async def _read(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> None:
        try:
            async with c.stream(method, url, **kwargs) as resp:
                self.status = resp.status_code
                async for f in sse_frames(resp):
                    self.frames.append(f)
        except httpx.HTTPError as exc:
            self.error = type(exc).__name__

    async def ended(self, timeout: float) -> Reader:
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout)
        return self

    async def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task

    @property
    def ids(self) -> list[int]:
        return [f.id for f in self.frames if f.id is not None]


async def last_seq(c: httpx.AsyncClient, run_id: str) -> int:
    r = await c.get(f"/runs/{run_id}")
    return int(r.json()["lastSeq"]) if r.status_code == 200 else 0


async def final_on(c: httpx.AsyncClient, run_id: str, timeout: float) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        try:
            r = await c.get(f"/runs/{run_id}")
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        record: dict[str, Any] = r.json()
        return record if record["status"] in ("succeeded", "failed", "cancelled",
                                              "interrupted") else None

    result: dict[str, Any] = await wait_for(done, timeout=timeout, interval=0.2)
    return result


async def whole_log(c: httpx.AsyncClient, run_id: str) -> list[Frame]:
    resp, frames = await collect(c, "GET", f"/runs/{run_id}/events?follow=false")
    assert resp.status_code == 200, resp.text
    return frames


def assert_one_sequence(frames: list[Frame], last: int) -> None:
    """The run's log: seq 1..last, one RUN_STARTED first, one end last."""
    assert [f.id for f in frames] == list(range(1, last + 1))
    kinds = [f.event["type"] for f in frames]
    assert kinds[0] == "RUN_STARTED" and kinds.count("RUN_STARTED") == 1
    assert kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert kinds.count("RUN_FINISHED") + kinds.count("RUN_ERROR") == 1


async def assert_a_serves_the_truth(svc: Service, run_id: str, healed: float,
                                    expected: list[Frame]) -> None:
    """Within seconds of the heal, A answers the run's final status and its whole log
    (no short page from what A saw before the cut), and a follower on A ends."""
    record = await final_on(svc.ca, run_id, HEALED_WITHIN)
    assert record["lastSeq"] == expected[-1].id

    async def whole() -> list[Frame] | None:
        try:
            resp, frames = await collect(svc.ca, "GET", f"/runs/{run_id}/events?follow=false")
        except httpx.HTTPError:
            return None
        return frames if resp.status_code == 200 and frames == expected else None

    await wait_for(whole, timeout=max(1.0, HEALED_WITHIN - (time.monotonic() - healed)),
                   interval=0.5)
    follower = Reader().start(svc.ca, "GET", f"/runs/{run_id}/events")
    try:
        await follower.ended(HEALED_WITHIN)
    finally:
        await follower.close()
    assert follower.frames == expected


async def assert_said_once(svc: Service, run_id: str) -> None:
    """A said that it stopped the run, and once the store answered, what became of it."""
    await wait_for(lambda: _async(svc.lines_of_a(f"run {run_id}: the store answers again")),
                   timeout=HEALED_WITHIN, interval=0.2)
    assert len(svc.lines_of_a(f"run {run_id}: its lease was not renewed")) == 1
    assert len(svc.lines_of_a(f"run {run_id}: the store answers again")) == 1


def assert_no_tracebacks(svc: Service) -> None:
    """Neither process logged an exception (a stream cut mid-body, an unhandled error):
    an outage is a condition the service knows, said in one line each."""
    for server in (svc.a, svc.b):
        assert not [line for line in server.log if "Traceback" in line], \
            "\n".join(server.log[-80:])


async def _async(value: Any) -> Any:
    return value


async def test_an_effect_longer_than_the_ttl_happens_once(service: Service) -> None:
    """A step whose effect takes 8 s, cut 0-1 s into it: A stops the effect when its
    lease runs out here, before B may take the run over; B asks the demo's reconcile
    (nothing happened yet) and runs it once."""
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=2, step_delay_ms=8000)
    run_id = body["runId"]
    client = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    try:
        await wait_for(lambda: svc.effect_status(run_id, "step-1"), timeout=60, interval=0.1)
        began = time.monotonic()
        svc.cut()
        record = await final_on(svc.cb, run_id, 120)
        assert record["status"] == "succeeded" and record["attempts"] >= 2  # taken over
        # Past the moment A's effect would have completed had it gone on.
        await asyncio.sleep(max(0.0, began + 9 - time.monotonic()))
        assert svc.effects(run_id) == Counter({1: 1, 2: 1})
        await client.ended(60)  # A's client ended (or failed) rather than hang
        healed = svc.heal()
        expected = await whole_log(svc.cb, run_id)
        assert_one_sequence(expected, record["lastSeq"])
        await assert_a_serves_the_truth(svc, run_id, healed, expected)
        await assert_said_once(svc, run_id)
        assert svc.effects(run_id) == Counter({1: 1, 2: 1})
        assert_no_tracebacks(svc)
    finally:
        await client.close()


async def test_an_effect_that_cannot_be_interrupted_is_asked_about_not_run_again(
        service: Service) -> None:
    """The effect is a blocking call in a thread: cancelling A's agent cannot stop it,
    and it completes on A after B took the run over. B neither reconciles (the check would
    race it: it saw nothing yet) nor runs it again: it asks, and the answer given on B
    stands in for the effect's result."""
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=1, step_delay_ms=8000, blocking=True)
    run_id = body["runId"]
    client = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    try:
        await wait_for(lambda: svc.effect_status(run_id, "step-1"), timeout=60, interval=0.1)
        svc.cut()
        record = await final_on(svc.cb, run_id, 120)
        assert record["status"] == "interrupted" and record["attempts"] >= 2  # taken over
        [question] = record["outcome"]["interrupts"]
        assert question["metadata"]["kind"] == "effect_in_doubt"
        assert question["metadata"]["effect"] == "step-1"
        # The blocking call completes on A, cut off, after the takeover: once.
        await wait_for(lambda: _async(svc.effects(run_id) == Counter({1: 1})), timeout=60,
                       interval=0.2)
        await client.ended(60)
        healed = svc.heal()
        cont_id = uid("cont")
        answer = {"resume": [{"interruptId": question["id"], "status": "resolved",
                              "payload": {"answer": "happened", "result": "done on A"}}],
                  "runId": cont_id}
        _, cont = await collect(svc.cb, "POST", f"/threads/{body['threadId']}/resume",
                                json=answer, headers={"Accept": "text/event-stream"})
        assert cont[-1].event["type"] == "RUN_FINISHED"
        assert (await run_record(svc.cb, cont_id))["status"] == "succeeded"
        assert svc.effects(run_id) == Counter({1: 1}) and svc.effects(cont_id) == Counter()
        expected = await whole_log(svc.cb, run_id)
        assert_one_sequence(expected, record["lastSeq"])
        await assert_a_serves_the_truth(svc, run_id, healed, expected)
        await assert_said_once(svc, run_id)
        assert_no_tracebacks(svc)
    finally:
        await client.close()


async def test_a_process_cut_off_while_streaming_text_stops_and_the_other_finishes(
        service: Service) -> None:
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=1, step_delay_ms=100,
                      tokens_per_message=400, token_delay_ms=15)
    run_id = body["runId"]
    client = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    try:
        await wait_for(lambda: _at_least(svc.cb, run_id, 40), timeout=60, interval=0.1)
        svc.cut()
        cut_at = await last_seq(svc.cb, run_id)
        record = await final_on(svc.cb, run_id, 120)
        assert record["status"] == "succeeded" and record["attempts"] >= 2  # taken over
        await client.ended(60)
        assert client.ids == list(range(1, len(client.ids) + 1))  # no gap, whatever it got
        healed = svc.heal()
        expected = await whole_log(svc.cb, run_id)
        assert_one_sequence(expected, record["lastSeq"])
        assert record["lastSeq"] > cut_at
        resumed = [f.event for f in expected if f.event.get("name") == "outlast.resumed"]
        assert [r["value"]["attempt"] for r in resumed] == \
            list(range(2, record["attempts"] + 1))
        assert svc.effects(run_id) == Counter({1: 1})
        await assert_a_serves_the_truth(svc, run_id, healed, expected)
        await assert_said_once(svc, run_id)
        assert_no_tracebacks(svc)
    finally:
        await client.close()


async def _at_least(c: httpx.AsyncClient, run_id: str, seq: int) -> bool:
    return await last_seq(c, run_id) >= seq


async def test_an_approval_wait_across_a_partition_is_answered_once(
        service: Service) -> None:
    """The run waits for an approval (no lease held); A is cut off. An answer sent to A
    gets a typed error in bounded time, the same answer sent to B continues the run there,
    once, and A shows it after the heal."""
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=2, approve_at=[1])
    _, frames = await collect(svc.ca, "POST", "/agents/demo", json=body)
    [pending] = frames[-1].event["outcome"]["interrupts"]
    svc.cut()
    cont_id = uid("cont")
    answer: dict[str, Any] = {"resume": [{"interruptId": pending["id"], "status": "resolved",
                                          "payload": {"approved": True}}], "runId": cont_id}
    # Within the client's timeout (a hang fails the test): a typed error, nothing stored.
    r = await svc.ca.post(f"/threads/{body['threadId']}/resume", json=answer)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "store_unavailable"
    _, cont = await collect(svc.cb, "POST", f"/threads/{body['threadId']}/resume",
                            json=answer, headers={"Accept": "text/event-stream"})
    assert cont[-1].event["type"] == "RUN_FINISHED"
    record = await run_record(svc.cb, cont_id)
    assert record["status"] == "succeeded"
    healed = svc.heal()
    expected = await whole_log(svc.cb, cont_id)
    assert_one_sequence(expected, record["lastSeq"])
    await assert_a_serves_the_truth(svc, cont_id, healed, expected)
    thread = (await svc.ca.get(f"/threads/{body['threadId']}")).json()
    assert thread["interrupts"] == []
    assert svc.effects(cont_id) == Counter({1: 1, 2: 1})
    assert svc.effects(body["runId"]) == Counter()
    assert_no_tracebacks(svc)


async def test_a_client_of_the_cut_off_process_ends_and_reattaches_elsewhere(
        service: Service) -> None:
    """Clients connected to A when it is cut off: each stream ends (or fails) instead of
    hanging, with what it got contiguous; reattached to B with its last id it gets
    exactly the rest. A reader of A during the cut gets the stored log or an error,
    never a short page as the whole."""
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=1500,
                      tokens_per_message=20, token_delay_ms=30)
    run_id = body["runId"]
    creator = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    watcher = None
    try:
        await wait_for(lambda: _at_least(svc.cb, run_id, 5), timeout=60, interval=0.05)
        watcher = Reader().start(svc.ca, "GET", f"/runs/{run_id}/events")
        await wait_for(lambda: _async(len(watcher.frames) >= 3), timeout=30, interval=0.05)
        svc.cut()
        for reader in (creator, watcher):
            await reader.ended(90)  # never silent forever
            assert reader.status == 200
            assert reader.ids == list(range(1, len(reader.ids) + 1))
        during = await svc.ca.get(f"/runs/{run_id}/events?follow=false")
        assert during.status_code == 503, during.text[:200]
        record = await final_on(svc.cb, run_id, 120)
        for reader in (creator, watcher):
            after = reader.ids[-1]
            resp, rest = await collect(svc.cb, "GET", f"/runs/{run_id}/events",
                                       headers={"Last-Event-ID": str(after)})
            assert resp.status_code == 200
            assert [f.id for f in rest if f.id is not None] == \
                list(range(after + 1, record["lastSeq"] + 1))
            assert rest[-1].event["type"] == "RUN_FINISHED"
        healed = svc.heal()
        expected = await whole_log(svc.cb, run_id)
        assert_one_sequence(expected, record["lastSeq"])
        assert svc.effects(run_id) == Counter({1: 1, 2: 1, 3: 1})
        await assert_a_serves_the_truth(svc, run_id, healed, expected)
        await assert_said_once(svc, run_id)
        assert_no_tracebacks(svc)
    finally:
        await creator.close()
        if watcher is not None:
            await watcher.close()


@pytest.mark.parametrize(("at", "lasting"), [(0.3, 1.0), (1.5, 6.0), (3.0, 2.5), (4.5, 9.0)],
                         ids=["blip-early", "long-mid", "under-ttl", "long-late"])
async def test_a_cut_at_any_moment_for_any_while_keeps_every_invariant(
        service: Service, at: float, lasting: float) -> None:
    """Cut A off at some moment of a run for some while, shorter or longer than the
    lease: whether A carries on or B takes over, every effect happens once, the log is
    one sequence, and both processes serve the same end."""
    svc = service
    body = demo_input(uid("th"), uid("run"), steps=3, step_delay_ms=1200,
                      tokens_per_message=15, token_delay_ms=20)
    run_id = body["runId"]
    client = Reader().start(svc.ca, "POST", "/agents/demo", json=body)
    try:
        await wait_for(lambda: _at_least(svc.cb, run_id, 1), timeout=60, interval=0.02)
        await asyncio.sleep(at)
        svc.cut()
        await asyncio.sleep(lasting)
        healed = svc.heal()
        record = await final_on(svc.cb, run_id, 120)
        assert record["status"] == "succeeded"
        await client.ended(60)
        assert client.ids == list(range(1, len(client.ids) + 1))
        expected = await whole_log(svc.cb, run_id)
        assert_one_sequence(expected, record["lastSeq"])
        resumed = [f.event for f in expected if f.event.get("name") == "outlast.resumed"]
        assert len(resumed) == record["attempts"] - 1
        assert svc.effects(run_id) == Counter({1: 1, 2: 1, 3: 1})
        await assert_a_serves_the_truth(svc, run_id, healed, expected)
        if record["attempts"] > 1:
            await assert_said_once(svc, run_id)
        assert_no_tracebacks(svc)
    finally:
        await client.close()
