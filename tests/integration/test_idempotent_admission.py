"""One execution per request (G3, G9): retries and concurrent duplicates attach to the run of
their idempotency key; a key reused for another request, or a runId reused on another
thread, is refused and stores nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest

from tests.support.runs import row_counts, steps_run, wait_final, with_ids
from tests.support.server import ServerProcess, collect, demo_input

# One server for the whole module (``module_server``, which ``client`` then talks to):
# the tests share its store, so each uses its own thread and run ids.
pytestmark = pytest.mark.usefixtures("module_server")


async def test_disconnect_plus_retry_exactly_one_execution(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    body = demo_input("retry-t", "retry-r", steps=3, step_delay_ms=120, token_delay_ms=10)
    first, seen = await collect(client, "POST", "/agents/demo", json=body, limit=6)
    assert first.status_code == 200 and "Outlast-Replayed" not in first.headers
    assert (await client.get("/runs/retry-r")).json()["status"] == "running"

    # Retries while the run goes on: one, and 16 at once; every one attaches.
    async with module_server.client(limits=httpx.Limits(max_connections=32)) as many:
        retries = await asyncio.gather(*(
            collect(many, "POST", "/agents/demo", json=body) for _ in range(17)))
    retry, frames = retries[0]
    assert retry.status_code == 200
    assert retry.headers["Outlast-Replayed"] == "true"
    assert retry.headers["Outlast-Run-Id"] == "retry-r"
    assert retry.headers["Outlast-Thread-Id"] == "retry-t"
    assert [f.id for f in frames] == list(range(1, len(frames) + 1))  # the whole log
    assert with_ids(frames[:6]) == with_ids(seen)
    assert frames[-1].event["type"] == "RUN_FINISHED"
    for resp, again in retries[1:]:
        assert resp.headers["Outlast-Replayed"] == "true"
        assert with_ids(again) == with_ids(frames)

    run = await wait_final(client, "retry-r")
    assert run["status"] == "succeeded" and run["attempts"] == 1
    assert run["lastSeq"] == len(frames)
    assert steps_run(module_server.effects_log, "retry-r") == {1: 1, 2: 1, 3: 1}
    runs = (await client.get("/threads/retry-t/runs")).json()["runs"]
    assert [r["runId"] for r in runs] == ["retry-r"]


async def test_sixteen_concurrent_identical_requests_make_one_run(
        module_server: ServerProcess) -> None:
    body = demo_input("herd-t", "herd-r", steps=2, step_delay_ms=100, token_delay_ms=5)
    async with module_server.client(limits=httpx.Limits(max_connections=32)) as client:
        results = await asyncio.gather(*(
            collect(client, "POST", "/agents/demo", json=body) for _ in range(16)))
        run = await wait_final(client, "herd-r")
        runs = (await client.get("/threads/herd-t/runs")).json()["runs"]
    assert [resp.status_code for resp, _ in results] == [200] * 16
    assert {resp.headers["Outlast-Run-Id"] for resp, _ in results} == {"herd-r"}
    replayed = Counter(resp.headers.get("Outlast-Replayed") for resp, _ in results)
    assert replayed == {None: 1, "true": 15}  # exactly one request created the run
    logs = [with_ids(frames) for _, frames in results]
    assert all(log == logs[0] for log in logs)  # 16 streams of one run
    assert [s for s, _ in logs[0]] == list(range(1, run["lastSeq"] + 1))
    assert logs[0][-1][1]["type"] == "RUN_FINISHED"
    assert [r["runId"] for r in runs] == ["herd-r"]
    assert run["status"] == "succeeded" and run["attempts"] == 1
    assert steps_run(module_server.effects_log, "herd-r") == {1: 1, 2: 1}  # one set of effects


async def test_retry_after_completion_replays_the_finished_run(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    body = demo_input("done-t", "done-r", steps=2)
    _, live = await collect(client, "POST", "/agents/demo", json=body)
    effects = module_server.effects()
    counts = row_counts(module_server)

    retry, frames = await collect(client, "POST", "/agents/demo", json=body)
    assert retry.headers["Outlast-Replayed"] == "true"
    assert retry.headers["Outlast-Run-Id"] == "done-r"
    assert with_ids(frames) == with_ids(live) and len(frames) == len(live)

    k = len(live) // 2
    tail, frames = await collect(client, "POST", "/agents/demo", json=body,
                                 headers={"Last-Event-ID": str(k)})
    assert tail.headers["Outlast-Replayed"] == "true"
    assert frames[0].id is None and frames[0].event["type"] == "RUN_STARTED"
    assert with_ids(frames) == with_ids(live[k:])
    assert frames[-1].event == live[-1].event

    _, end = await collect(client, "POST", "/agents/demo", json=body,
                           headers={"Last-Event-ID": str(len(live))})
    assert with_ids(end) == []  # nothing after the last seq ...
    assert end[-1].event == live[-1].event  # ... but the stream still ends with the end

    assert module_server.effects() == effects  # no new execution
    assert row_counts(module_server) == counts
    assert [r["runId"] for r in (await client.get("/threads/done-t/runs")).json()["runs"]] == [
        "done-r"]


async def test_an_idempotency_key_header_names_the_request(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    body = demo_input("key-t", "key-r", steps=1)
    headers = {"Idempotency-Key": "order-42"}
    first, live = await collect(client, "POST", "/agents/demo", json=body, headers=headers)
    again, frames = await collect(client, "POST", "/agents/demo", json=body, headers=headers)
    assert "Outlast-Replayed" not in first.headers
    assert again.headers["Outlast-Replayed"] == "true"
    assert with_ids(frames) == with_ids(live)
    assert steps_run(module_server.effects_log, "key-r") == {1: 1}


async def test_the_same_idempotency_key_with_a_different_body_is_refused(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    body = demo_input("reuse-t", "reuse-r", steps=1)
    await collect(client, "POST", "/agents/demo", json=body)
    threads = (await client.get("/threads")).json()
    counts = row_counts(module_server)

    changed = demo_input("reuse-t", "reuse-r", "something else", steps=1)
    resp = await client.post("/agents/demo", json=changed)
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "idempotency_key_reused"
    assert resp.json()["error"]["message"]
    assert counts["runs"] >= 1 and counts["events"] > counts["runs"]  # the reader sees data
    assert row_counts(module_server) == counts
    assert (await client.get("/threads")).json() == threads

    # With an explicit key, a new runId under the same key is a different request too.
    keyed = {"Idempotency-Key": "reuse-key"}
    await collect(client, "POST", "/agents/demo", json=demo_input("reuse-t2", "reuse-k1",
                                                                   steps=1), headers=keyed)
    counts = row_counts(module_server)
    threads = (await client.get("/threads")).json()
    resp = await client.post("/agents/demo", headers=keyed,
                             json=demo_input("reuse-t2", "reuse-k2", steps=1))
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "idempotency_key_reused"
    assert (await client.get("/runs/reuse-k2")).status_code == 404
    assert row_counts(module_server) == counts
    assert (await client.get("/threads")).json() == threads


async def test_a_run_id_already_used_on_another_thread_is_refused(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    await collect(client, "POST", "/agents/demo", json=demo_input("owner-t", "shared-r", steps=1))
    threads = (await client.get("/threads")).json()
    counts = row_counts(module_server)

    # Another thread, the same runId, another idempotency key: the runId is taken.
    resp = await client.post("/agents/demo", headers={"Idempotency-Key": "other-key"},
                             json=demo_input("other-t", "shared-r", steps=1))
    assert resp.status_code == 409
    error = resp.json()["error"]
    assert error["code"] == "run_id_conflict" and error["message"]
    assert (await client.get("/threads/other-t")).status_code == 404
    assert row_counts(module_server) == counts
    assert (await client.get("/threads")).json() == threads
    run = (await client.get("/runs/shared-r")).json()
    assert run["threadId"] == "owner-t"
