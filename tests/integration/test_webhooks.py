"""Durable notifications (G12) against a real receiver on 127.0.0.1.

The engine serves real HTTP over a real SQLite file (PostgreSQL too, for the
store's own rules); the receiver is an HTTP server in a thread of the test, and
every signature is checked by the independent ``standardwebhooks`` verifier.
Backoff is shortened by settings so that retries come quickly; nothing is timed.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from outlast.store.base import (
    AdmitRequest,
    FinishWrite,
    RunWrite,
    WebhookWrite,
)
from outlast.store.postgres import PostgresStore
from outlast.store.sqlite import SQLiteStore
from outlast.store.sqlstore import SqlStore
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import uid, wait_final
from tests.support.server import collect, demo_input, wait_for
from tests.support.webhook_receiver import Answer, Received, Receiver

SECRET = "whsec_" + base64.b64encode(b"a key of thirty-two bytes, really").decode()
FAST = {"webhook_secret": SECRET, "webhook_retry_base": 0.05, "webhook_retry_max": 0.2}


@pytest.fixture
def receiver() -> Any:
    r = Receiver().start()
    yield r
    r.stop()


def verified(request: Received, secret: str | bytes = SECRET) -> dict[str, Any]:
    """The event of a request whose signature the Standard Webhooks verifier accepts."""
    event: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return event


async def run_to_end(c: InProcess, run_id: str, *, headers: dict[str, str] | None = None,
                     **knobs: Any) -> dict[str, Any]:
    thread_id = uid("t")
    resp, _ = await collect(c.client, "POST", "/agents/demo",
                            json=demo_input(thread_id, run_id, steps=1, step_delay_ms=1,
                                            **knobs), headers=headers or {})
    assert resp.status_code == 200, resp.text
    return await wait_final(c.client, run_id)


async def deliveries(c: InProcess, run_id: str, *statuses: str) -> list[dict[str, Any]]:
    """The run's deliveries once each is in one of ``statuses``."""
    async def settled() -> list[dict[str, Any]] | None:
        hooks: list[dict[str, Any]] = (await c.client.get(f"/runs/{run_id}")).json()["webhooks"]
        return hooks if hooks and all(h["status"] in statuses for h in hooks) else None

    result: list[dict[str, Any]] = await wait_for(settled, timeout=30)
    return result


async def test_a_run_end_is_signed_delivered_once_and_shown_on_the_run(
        tmp_path: Path, receiver: Receiver) -> None:
    def fail_twice(_request: Received, earlier: int) -> Answer:
        return Answer(503 if earlier < 2 else 200)

    receiver.policy = fail_twice
    async with in_process_server(tmp_path, webhooks=[receiver.url()], **FAST) as c:
        run_id = uid("r")
        await run_to_end(c, run_id)
        [hook] = await deliveries(c, run_id, "delivered")
    assert hook["attempts"] == 3 and hook["lastStatus"] == 200 and hook["type"] == "run.succeeded"
    assert hook["deliveredAt"] is not None and hook["nextAttemptAt"] is None
    tries = receiver.of(hook["webhookId"])
    assert [r.status for r in tries] == [503, 503, 200]
    events = [verified(r) for r in tries]
    assert all(e == events[0] for e in events)  # the same body every time
    assert len({r.headers["webhook-id"] for r in tries}) == 1
    event = events[0]
    assert event["type"] == "run.succeeded"
    assert event["data"]["runId"] == run_id and event["data"]["status"] == "succeeded"
    assert event["data"]["outcome"]["type"] == "success" and event["data"]["error"] is None
    assert event["data"]["agent"] == "demo" and event["data"]["interrupts"] == []
    assert isinstance(event["timestamp"], str)


async def test_an_interrupt_carries_what_a_phone_needs_to_approve_or_deny(
        tmp_path: Path, receiver: Receiver) -> None:
    async with in_process_server(tmp_path, webhooks=[receiver.url()], **FAST) as c:
        run_id = uid("r")
        record = await run_to_end(c, run_id, approve_at=[1])
        assert record["status"] == "interrupted"
        [hook] = await deliveries(c, run_id, "delivered")
        [request] = receiver.of(hook["webhookId"])
        event = verified(request)
        assert event["type"] == "run.interrupted"
        data = event["data"]
        assert data["threadId"] == record["threadId"] and data["status"] == "interrupted"
        assert data["answer"] == {"method": "POST",
                                  "path": f"/threads/{record['threadId']}/resume"}
        [item] = data["interrupts"]
        pending = record["interrupts"][0]
        assert item["id"] == pending["id"] and item["reason"] == "tool_call"
        assert item["message"] and item["toolCallId"] == pending["toolCallId"]
        # The proposed call, as the transcript holds it (the demo also says so in metadata).
        assert item["toolCall"] == {"name": item["metadata"]["tool"],
                                    "arguments": {"step": 1, "target": "module_1.py"}}
        # The path in the notification answers the interrupt.
        answer = await c.client.post(data["answer"]["path"], json={"resume": [
            {"interruptId": item["id"], "status": "resolved", "payload": {"approved": True}}]})
        assert answer.status_code in (200, 201, 202), answer.text


async def test_a_request_webhook_outside_every_allowed_prefix_is_refused_and_nothing_stored(
        tmp_path: Path, receiver: Receiver) -> None:
    allowed = receiver.url("/allowed/")
    async with in_process_server(tmp_path, webhook_allow=[allowed], **FAST) as c:
        refused = []
        for url in (receiver.url("/elsewhere"), receiver.url("/allowed"),
                    f"http://127.0.0.1:{receiver.port}.evil.example/allowed/x",
                    "ftp://127.0.0.1/allowed/"):
            thread_id, run_id = uid("t"), uid("r")
            resp = await c.client.post("/agents/demo", json=demo_input(thread_id, run_id),
                                       headers={"Outlast-Webhook": url})
            refused.append((resp.status_code, resp.json()["error"]["code"]))
            assert (await c.client.get(f"/runs/{run_id}")).status_code == 404
            assert (await c.client.get(f"/threads/{thread_id}")).status_code == 404
        assert refused == [(422, "invalid_request")] * 4
        db = sqlite3.connect(f"file:{tmp_path / 'outlast.db'}?mode=ro", uri=True)
        try:
            counts = [db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                      for t in ("threads", "runs", "idempotency", "webhooks")]
        finally:
            db.close()
        assert counts == [0, 0, 0, 0]

        # Under the prefix it is admitted, and that run (only) notifies it.
        run_id = uid("r")
        await run_to_end(c, run_id, headers={"Outlast-Webhook": allowed + "x?token=abc"})
        [hook] = await deliveries(c, run_id, "delivered")
        assert hook["url"] == allowed + "x"  # the query (a token, maybe) is never shown
        other = uid("r")
        await run_to_end(c, other)
        assert (await c.client.get(f"/runs/{other}")).json()["webhooks"] == []
    [request] = receiver.snapshot()
    assert request.path == "/allowed/x?token=abc" and verified(request)["data"]["runId"] == run_id


async def test_a_redirect_is_not_followed_but_retried(tmp_path: Path,
                                                      receiver: Receiver) -> None:
    def redirect_first(request: Received, earlier: int) -> Answer:
        if request.path == "/hook" and earlier == 0:
            return Answer(307, {"location": receiver.url("/followed")})
        return Answer(200)

    receiver.policy = redirect_first
    async with in_process_server(tmp_path, webhooks=[receiver.url()], **FAST) as c:
        run_id = uid("r")
        await run_to_end(c, run_id)
        [hook] = await deliveries(c, run_id, "delivered")
    assert hook["attempts"] == 2
    assert [(r.path, r.status) for r in receiver.snapshot()] == [("/hook", 307), ("/hook", 200)]


async def test_every_configured_receiver_gets_its_own_delivery_of_a_cancelled_run(
        tmp_path: Path, receiver: Receiver) -> None:
    urls = [receiver.url("/a"), receiver.url("/b")]
    async with in_process_server(tmp_path, webhooks=urls, **FAST) as c:
        thread_id, first, queued = uid("t"), uid("r"), uid("r")
        async with c.client.stream("POST", "/agents/demo",
                                   json=demo_input(thread_id, first, steps=50)) as running, \
                c.client.stream("POST", "/agents/demo",
                                json=demo_input(thread_id, queued, text="later"),
                                headers={"Outlast-Multitask": "enqueue"}) as waiting:
            assert running.status_code == waiting.status_code == 200
            # The second run waits behind the first; cancelling it ends it unstarted.
            cancelled = await c.client.post(f"/runs/{queued}/cancel")
            assert cancelled.json()["status"] == "cancelled", cancelled.text
            assert cancelled.json()["startedAt"] is None
            await c.client.post(f"/runs/{first}/cancel")
        hooks = await deliveries(c, queued, "delivered")
    assert sorted(h["url"] for h in hooks) == urls
    assert len({h["webhookId"] for h in hooks}) == 2
    events = [verified(r) for r in receiver.snapshot() if r.id in {h["webhookId"] for h in hooks}]
    assert [e["type"] for e in events] == ["run.cancelled", "run.cancelled"]
    assert events[0]["data"]["runId"] == queued


async def test_a_delivery_never_acknowledged_expires(tmp_path: Path, receiver: Receiver) -> None:
    receiver.policy = lambda _r, _n: Answer(500)
    async with in_process_server(tmp_path, webhooks=[receiver.url()], webhook_max_age=0.5,
                                 **FAST) as c:
        run_id = uid("r")
        await run_to_end(c, run_id, fail_at=1)
        [hook] = await deliveries(c, run_id, "expired")
    assert hook["type"] == "run.failed" and hook["attempts"] >= 1
    assert hook["lastStatus"] == 500 and hook["deliveredAt"] is None
    assert len(receiver.of(hook["webhookId"])) == hook["attempts"]


async def test_a_plain_text_secret_signs_with_its_bytes(tmp_path: Path,
                                                       receiver: Receiver) -> None:
    async with in_process_server(tmp_path, webhooks=[receiver.url()],
                                 **{**FAST, "webhook_secret": "correct horse battery"}) as c:
        run_id = uid("r")
        await run_to_end(c, run_id)
        await deliveries(c, run_id, "delivered")
    [request] = receiver.snapshot()
    assert verified(request, b"correct horse battery")["data"]["runId"] == run_id


@pytest.mark.parametrize(("args", "needle"), [
    (["--webhook", "http://127.0.0.1:9/h"], "--webhook-secret"),
    (["--webhook-allow", "https://hooks.example/", "--webhook-secret", ""], "empty"),
    (["--webhook-secret", "whsec_not base64 at all!"], "base64"),
    (["--webhook-secret", "s", "--webhook-allow", "https://hooks.example"], "the / after"),
    (["--webhook-secret", "s", "--webhook", "file:///etc/passwd"], "http:// or https://"),
])
def test_webhook_settings_mistakes_are_one_line_that_never_shows_the_secret(
        tmp_path: Path, args: list[str], needle: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "outlast.cli.main", "serve", "--port", "0",
         "--data-dir", str(tmp_path), *args],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("OUTLAST_")})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    [line] = done.stderr.strip().splitlines()
    assert needle in line and "--webhook" in line
    assert "not base64 at all" not in line


# -- the outbox in the store, against both backends ---------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s: SqlStore = SQLiteStore(tmp_path / "outlast.db") if request.param == "sqlite" else \
        PostgresStore(request.getfixturevalue("pg_url"), min_size=1, max_size=5)
    await s.open()
    yield s
    await s.close()


async def ended_run(store: SqlStore, hooks: list[WebhookWrite], *,
                    instance: str = "i1") -> tuple[int, set[int]]:
    """Admit, claim and end a run whose end owes ``hooks``; its rid and the fenced rids."""
    run_id = uid("r")
    await store.admit(AdmitRequest(
        principal="o", thread_id=uid("t"), run_id=run_id, agent="demo", key=run_id,
        fingerprint="f", input_json="{}", options_json="{}", multitask="reject", resume=[],
        has_new_input=True, title=None, now=time.time()))
    [run] = await store.claim_queued(instance, 30.0, 10)
    fenced = await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=run.attempts, instance=instance,
        prev_seq=0, events=[(1, True, '{"type":"RUN_FINISHED"}')],
        finish=FinishWrite("succeeded", webhooks=hooks))])
    return run.rid, fenced


def hook(expires_in: float = 60.0) -> WebhookWrite:
    return WebhookWrite(id=f"msg_{uid('x')}", url="http://127.0.0.1:9/h", type="run.succeeded",
                        body="{}", expires_at=time.time() + expires_in)


async def test_the_outbox_row_commits_with_the_end_and_only_with_it(store: SqlStore) -> None:
    rid, fenced = await ended_run(store, [hook(), hook()])
    assert fenced == set()
    rows = await store.webhooks_for_run(rid)
    assert [(h.status, h.attempts, h.lease_holder) for h in rows] == [("pending", 0, None)] * 2
    # A write fenced off (another attempt holds the lease) ends nothing and owes nothing.
    run = await store.get_run_by_rid(rid)
    assert run is not None
    stale = await store.write([RunWrite(
        rid=rid, tid=run.tid, run_id=run.id, attempt=run.attempts + 5, instance="i1",
        prev_seq=1, events=[], finish=FinishWrite("failed", webhooks=[hook()]))])
    assert stale == {rid} and len(await store.webhooks_for_run(rid)) == 2


async def test_a_claim_is_exclusive_and_settling_is_fenced(store: SqlStore) -> None:
    rid, _ = await ended_run(store, [hook()])
    now = time.time()
    [claimed] = await store.webhook_claim("i1", now + 30, 10)
    assert claimed.attempts == 1 and claimed.lease_holder == "i1"
    assert await store.webhook_claim("i2", now + 30, 10) == []  # leased: nobody else
    assert await store.webhook_next_due() == pytest.approx(now + 30)
    # A lease run out: another instance takes the delivery; the first one's late
    # answer changes nothing.
    await store.webhook_release("i1")
    [again] = await store.webhook_claim("i2", time.time() + 30, 10)
    assert again.attempts == 2 and again.lease_holder == "i2"
    assert not await store.webhook_settle(claimed.wid, "i1", 1, status="delivered",
                                          next_at=time.time(), last_status=200, last_error=None)
    assert await store.webhook_settle(again.wid, "i2", 2, status="pending",
                                      next_at=time.time() - 1, last_status=500,
                                      last_error="HTTP 500")
    [third] = await store.webhook_claim("i1", time.time() + 30, 10)
    assert third.attempts == 3 and third.last_error == "HTTP 500"
    assert await store.webhook_settle(third.wid, "i1", 3, status="delivered",
                                      next_at=time.time(), last_status=204, last_error=None)
    [done] = await store.webhooks_for_run(rid)
    assert done.status == "delivered" and done.delivered_at is not None
    assert await store.webhook_claim("i1", time.time() + 30, 10) == []
    assert await store.webhook_next_due() is None


async def test_a_due_delivery_past_its_age_expires_instead_of_being_sent(
        store: SqlStore) -> None:
    rid, _ = await ended_run(store, [hook(expires_in=-1)])
    [expired] = await store.webhook_claim("i1", time.time() + 30, 10)
    assert expired.status == "expired" and expired.lease_holder is None
    assert expired.attempts == 0
    [row] = await store.webhooks_for_run(rid)
    assert row.status == "expired"


async def test_another_instance_leases_are_handed_back_only_when_asked(
        store: SqlStore) -> None:
    await ended_run(store, [hook()])
    await store.webhook_claim("dead", time.time() + 300, 10)
    await store.webhook_release("alive")  # its own: none
    assert await store.webhook_claim("alive", time.time() + 30, 10) == []
    await store.webhook_release("alive", others=True)
    [taken] = await store.webhook_claim("alive", time.time() + 30, 10)
    assert taken.attempts == 2


async def test_a_deleted_thread_leaves_its_deliveries_owed(store: SqlStore) -> None:
    rid, _ = await ended_run(store, [hook()])
    run = await store.get_run_by_rid(rid)
    assert run is not None
    await store.delete_thread("o", run.thread_id)
    assert await store.webhooks_for_run(rid) == []
    [claimed] = await store.webhook_claim("i1", time.time() + 30, 10)
    assert claimed.rid is None and claimed.status == "pending"
