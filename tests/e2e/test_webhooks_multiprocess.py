"""Durable notifications (G12) across restarts, crashes and several processes.

Real ``outlast serve`` processes (SQLite stopped and started again on one data
directory; two and three processes over one PostgreSQL database), and a real
receiver on 127.0.0.1 whose every request is checked by the independent
``standardwebhooks`` verifier. Backoff is shortened by flags; nothing is timed.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.support.runs import uid, wait_final
from tests.support.server import ServerProcess, collect, demo_input, wait_for
from tests.support.webhook_receiver import Answer, Received, Receiver

KEY = b"thirty-two bytes of signing key!"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
FAST = ("--webhook-secret", SECRET, "--webhook-retry-base", "0.1",
        "--webhook-retry-max", "0.4", "--keepalive", "2")


@pytest.fixture
def receiver() -> Any:
    r = Receiver().start()
    yield r
    r.stop()


async def start_run(client: httpx.AsyncClient, run_id: str, **knobs: Any) -> None:
    resp, _ = await collect(client, "POST", "/agents/demo",
                            json=demo_input(uid("t"), run_id, steps=1, step_delay_ms=1,
                                            **knobs))
    assert resp.status_code == 200, resp.text


async def hooks_of(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    resp = await client.get(f"/runs/{run_id}")
    assert resp.status_code == 200, resp.text
    hooks: list[dict[str, Any]] = resp.json()["webhooks"]
    return hooks


async def until(client: httpx.AsyncClient, run_id: str, check: Any,
                timeout: float = 60) -> dict[str, Any]:
    """The run's one delivery once ``check(delivery)`` holds."""
    async def reached() -> dict[str, Any] | None:
        hooks = await hooks_of(client, run_id)
        return hooks[0] if len(hooks) == 1 and check(hooks[0]) else None

    result: dict[str, Any] = await wait_for(reached, timeout=timeout, interval=0.1)
    return result


def verified_once(receiver: Receiver, webhook_id: str) -> list[Received]:
    """Every try of one webhook carried its id and a valid signature, and exactly one
    was acknowledged; the tries in order."""
    tries = receiver.of(webhook_id)
    assert tries, webhook_id
    bodies = {r.body for r in tries}
    assert len(bodies) == 1  # one body, byte for byte, on every try
    for r in tries:
        assert r.headers["webhook-id"] == webhook_id
        Webhook(SECRET).verify(r.body, r.headers)
    assert sum(1 for r in tries if 200 <= r.status < 300) == 1, [r.status for r in tries]
    return tries


def no_secret_in(server: ServerProcess) -> None:
    text = "\n".join(server.log)
    assert SECRET not in text and SECRET.removeprefix("whsec_") not in text
    assert KEY.decode() not in text


async def test_a_webhook_outlives_a_failing_receiver_an_outage_and_a_restart(
        server_factory: Any, receiver: Receiver, tmp_path: Path) -> None:
    # Refused until the receiver goes down (however many tries fast retries make first),
    # accepted once it is back after the restart.
    receiver.policy = lambda _r, earlier: Answer(500)
    data = tmp_path / "data"
    args = ("--webhook", receiver.url(), *FAST, "--log-level", "debug")
    first = server_factory(*args, data_dir=data)
    ok, bad = uid("ok"), uid("bad")
    async with first.client() as c:
        await start_run(c, ok)
        await start_run(c, bad, fail_at=1)
        assert (await wait_final(c, ok))["status"] == "succeeded"
        assert (await wait_final(c, bad))["status"] == "failed"
        ids = {run: (await until(c, run, lambda h: h["attempts"] >= 2))["webhookId"]
               for run in (ok, bad)}
        # Both refused twice by the receiver; then it goes down.
        await wait_for(lambda: _true(all(len(receiver.of(i)) >= 2 for i in ids.values())),
                       timeout=30)
        receiver.stop()
        before = {run: (await until(c, run, lambda h: h["attempts"] >= 3
                                    and h["lastStatus"] is None))["attempts"]
                  for run in (ok, bad)}
    assert first.stop() == 0

    second = server_factory(*args, data_dir=data)
    async with second.client() as c:
        for run in (ok, bad):  # still owed, and tried again by the new process
            await until(c, run, lambda h, n=before[run]: h["status"] == "pending"
                        and h["attempts"] > n)
        receiver.policy = lambda _r, earlier: Answer(204)
        receiver.start()  # back, on the same address
        done = {run: await until(c, run, lambda h: h["status"] == "delivered")
                for run in (ok, bad)}
    assert second.stop() == 0

    for run, hook in done.items():
        assert hook["webhookId"] == ids[run] and hook["lastStatus"] == 204
        tries = verified_once(receiver, ids[run])
        statuses = [r.status for r in tries]
        assert statuses[-1] == 204 and len(statuses) >= 3 and set(statuses[:-1]) == {500}
        event = Webhook(SECRET).verify(tries[0].body, tries[0].headers)
        assert event["data"]["runId"] == run
        assert event["type"] == ("run.succeeded" if run == ok else "run.failed")
    for server in (first, second):
        no_secret_in(server)


async def _true(value: bool) -> bool:
    return value


def no_overlap(tries: list[Received]) -> None:
    """Tries of one webhook never overlapped: each began after the previous was answered."""
    ordered = sorted(tries, key=lambda r: r.started)
    for earlier, later in itertools.pairwise(ordered):
        assert later.started >= earlier.ended, "two deliveries of one webhook overlapped"


@pytest.mark.postgres
async def test_several_processes_on_postgres_deliver_each_webhook_once(
        server_factory: Any, pg_url: str, receiver: Receiver, tmp_path: Path) -> None:
    # Slow answers widen the window in which a second process could take a delivery.
    receiver.policy = lambda _r, earlier: Answer(500 if earlier == 0 else 200, delay=0.2)
    args = ("--store", pg_url, "--demo-workspace", str(tmp_path / "workspace"),
            "--lease-ttl", "2", "--webhook", receiver.url(), *FAST)
    servers = [server_factory(*args) for _ in range(3)]
    runs = [uid("r") for _ in range(9)]
    clients = [s.client() for s in servers]
    try:
        for i, run in enumerate(runs):
            await start_run(clients[i % 3], run)
        hooks = {run: await until(clients[(i + 1) % 3], run,
                                  lambda h: h["status"] == "delivered")
                 for i, run in enumerate(runs)}
    finally:
        for c in clients:
            await c.aclose()
    for hook in hooks.values():
        tries = verified_once(receiver, hook["webhookId"])
        assert [r.status for r in tries] == [500, 200] and hook["attempts"] == 2
        no_overlap(tries)
    assert len(receiver.snapshot()) == 2 * len(runs)
    for server in servers:
        no_secret_in(server)


@pytest.mark.postgres
async def test_a_delivery_in_flight_when_its_process_dies_is_delivered_by_another(
        server_factory: Any, pg_url: str, receiver: Receiver, tmp_path: Path) -> None:
    # The first try hangs until the sender is gone; later ones are acknowledged.
    receiver.policy = lambda _r, earlier: Answer(500, delay=5) if earlier == 0 else Answer(200)
    args = ("--store", pg_url, "--demo-workspace", str(tmp_path / "workspace"),
            "--lease-ttl", "2", "--webhook", receiver.url(), "--webhook-timeout", "1", *FAST)
    first = server_factory(*args)
    run = uid("r")
    async with first.client() as c:
        await start_run(c, run)
        await wait_for(lambda: _true(len(receiver.arrived) == 1), timeout=30)
        first.kill()  # mid-delivery: its lease on the delivery is never given back
    second = server_factory(*args)
    async with second.client() as c:
        hook = await until(c, run, lambda h: h["status"] == "delivered", timeout=90)
    # The dead process's try counted; the new process's acknowledged one is the last.
    assert hook["attempts"] == 2 and hook["lastStatus"] == 200
    assert [r.status for r in receiver.arrived if r.id == hook["webhookId"]][-1] == 200
    assert sum(1 for r in receiver.acknowledged() if r.id == hook["webhookId"]) == 1
    for r in receiver.arrived:
        Webhook(SECRET).verify(r.body, r.headers)
