"""The Python client (spec §7) against a real server: every method, every error code it
can meet, and streams that resume across connections cut at random. The async and the
blocking client pass the same tests.

The tests share one server (each its own thread and run ids) but for the pagination
test, which lists every thread of its server, and the token test, whose server
asks for tokens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.client import OutlastError, RunHandle
from tests.support.clients import KINDS, Driver, open_client
from tests.support.proxy import CuttingProxy
from tests.support.runs import stored_log, uid
from tests.support.server import ServerProcess, demo_input

APPROVAL_RUN = {"steps": 3, "step_delay_ms": 50, "tokens_per_message": 6,
                "token_delay_ms": 5, "approve_at": [2]}


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def raises(code: str, status: int | None, call: Any) -> OutlastError:
    """``call`` (an awaitable) raises ``OutlastError`` with this code and status."""
    with pytest.raises(OutlastError) as info:
        await call
    assert (info.value.code, info.value.status) == (code, status), info.value
    return info.value


async def test_a_run_from_admission_to_its_answered_continuation(
        module_server: ServerProcess, client: httpx.AsyncClient, kind: str) -> None:
    thread, run = uid("t"), uid("r")
    async with open_client(kind, module_server.url) as c:
        handle = await c.call("run", "demo", demo_input(thread, run, **APPROVAL_RUN))
        assert handle == RunHandle(run, thread, replayed=False)
        again = await c.call("run", "demo", demo_input(thread, run, **APPROVAL_RUN))
        assert again == RunHandle(run, thread, replayed=True)  # G3: the same run

        events = await c.events(run)
        stored = await stored_log(client, run)
        assert [s for s, _ in events] == [f.id for f in stored] == list(range(1, len(stored) + 1))
        assert [e for _, e in events] == [f.event for f in stored]
        assert events[-1][1]["outcome"]["type"] == "interrupt"

        record = await c.call("wait", run)
        assert record.status == "interrupted" and record.last_seq == len(events)
        assert record.interrupts and record.interrupts[0].pending
        t = await c.call("thread", thread)
        assert t.status == "interrupted" and t.active_run is None
        assert [i.id for i in t.pending_interrupts] == [record.interrupts[0].id]

        cont = await c.call("answer", thread, True, {"step": 2, "target": "edited.py"})
        assert cont.thread_id == thread and not cont.replayed
        final = await c.call("wait", cont.run_id)
        assert final.status == "succeeded" and final.thread_id == thread
        assert (await c.call("run_record", cont.run_id)).status == "succeeded"
        assert [r.run_id for r in await c.call("runs", thread)] == [cont.run_id, run]
        t = await c.call("thread", thread)
        assert t.status == "idle" and not t.pending_interrupts
        assert any("edited.py" in str(m.get("content")) for m in t.messages
                   if m["role"] == "tool")
        summaries = await c.call("threads", "idle")
        assert thread in [s.thread_id for s in summaries]
        assert thread not in [s.thread_id for s in await c.call("threads", "interrupted")]


async def test_events_of_a_finished_run_end_with_its_final_event_once(
        module_server: ServerProcess, kind: str) -> None:
    thread, run = uid("t"), uid("r")
    async with open_client(kind, module_server.url) as c:
        await c.call("run", "demo", demo_input(thread, run, steps=1))
        record = await c.call("wait", run)
        last = record.last_seq
        tail = await c.events(run, after=last - 1)
        assert [(s, e["type"]) for s, e in tail] == [(last, "RUN_FINISHED")]
        # Reattaching at the very end: the stream's copy of the final event has no id
        # and is not a stored event, so nothing more is yielded.
        assert await c.events(run, after=last) == []
        middle = await c.events(run, after=3)
        assert [s for s, _ in middle] == list(range(4, last + 1))


async def test_cancel_stops_a_run_and_is_idempotent(
        module_server: ServerProcess, kind: str) -> None:
    thread, run = uid("t"), uid("r")
    async with open_client(kind, module_server.url) as c:
        await c.call("run", "demo", demo_input(thread, run, steps=5, step_delay_ms=2000))
        record = await c.call("cancel", run, wait=True)
        assert record.status == "cancelled"
        assert (await c.call("cancel", run)).status == "cancelled"
        events = await c.events(run)
        assert events[-1][1]["outcome"] == {"type": "cancelled"}


async def test_threads_follow_the_pagination_cursor(
        server: ServerProcess, client: httpx.AsyncClient, kind: str) -> None:
    ids = [uid("page") for _ in range(53)]  # more than one page of 50

    async def start(thread: str) -> None:
        async with client.stream("POST", "/agents/demo",
                                  json=demo_input(thread, uid("r"), steps=0)) as resp:
            assert resp.status_code == 200
            await resp.aread()

    for i in range(0, len(ids), 10):
        await asyncio.gather(*(start(t) for t in ids[i:i + 10]))
    async with open_client(kind, server.url) as c:
        listed = [t.thread_id for t in await c.call("threads")]
    assert sorted(listed) == sorted(ids) and len(set(listed)) == len(listed)


async def test_events_resume_across_connections_cut_at_random(
        module_server: ServerProcess, client: httpx.AsyncClient, kind: str) -> None:
    port = int(module_server.url.rsplit(":", 1)[1])
    proxy = CuttingProxy(port, min_bytes=400, max_bytes=3000, seed=1 if kind == "sync" else 2)
    proxy.start()
    try:
        thread, run = uid("t"), uid("r")
        async with open_client(kind, proxy.url, retry_for=60) as c:
            knobs = {"steps": 4, "step_delay_ms": 30, "tokens_per_message": 12,
                     "token_delay_ms": 2}
            handle = await c.call("run", "demo", demo_input(thread, run, **knobs))
            assert handle.run_id == run
            events = await c.events(run)
            record = await c.call("wait", run)
    finally:
        proxy.stop()
    stored = await stored_log(client, run)
    assert proxy.cuts >= 3, "the proxy cut the stream several times"
    assert [s for s, _ in events] == list(range(1, record.last_seq + 1))
    assert [e for _, e in events] == [f.event for f in stored]
    assert events[-1][1]["type"] == "RUN_FINISHED" and record.status == "succeeded"


async def test_every_refusal_carries_the_service_error_code(
        module_server: ServerProcess, kind: str) -> None:
    async with open_client(kind, module_server.url) as c:
        await refusals(c, module_server)
    async with open_client(kind, module_server.url + "/no/such/prefix") as c:
        await raises("not_found", 404, c.call("threads"))
    async with open_client(kind, "http://127.0.0.1:9", retry_for=0.3) as c:
        err = await raises("unreachable", None, c.call("threads"))
        assert "127.0.0.1:9" in err.message


async def refusals(c: Driver, server: ServerProcess) -> None:
    await raises("run_not_found", 404, c.call("run_record", "no-such-run"))
    await raises("run_not_found", 404, c.call("cancel", "no-such-run"))
    await raises("run_not_found", 404, c.events("no-such-run"))
    await raises("thread_not_found", 404, c.call("thread", "no-such-thread"))
    await raises("thread_not_found", 404, c.call("runs", "no-such-thread"))
    await raises("thread_not_found", 404, c.call("answer", "no-such-thread"))
    await raises("agent_not_found", 404,
                 c.call("run", "no-such-agent", demo_input(uid("t"), uid("r"))))
    await raises("invalid_request", 422, c.call("run_record", "bad id with spaces"))
    await raises("invalid_request", 422, c.call("threads", "bogus"))

    thread, run = uid("t"), uid("r")
    await c.call("run", "demo", demo_input(thread, run, steps=5, step_delay_ms=2000))
    err = await raises("run_already_active", 409,
                       c.call("run", "demo", demo_input(thread, uid("r2"))))
    assert err.fields["activeRunId"] == run
    await raises("idempotency_key_reused", 422,
                 c.call("run", "demo", demo_input(thread, run, "another request")))
    await raises("run_id_conflict", 409, c.call("run", "demo", demo_input(uid("t"), run),
                                                idempotency_key=uid("key")))
    await raises("invalid_last_event_id", 400, c.events(run, after=10_000))
    await c.call("cancel", run, wait=True)

    thread, run = uid("t"), uid("r")
    await c.call("run", "demo", demo_input(thread, run, steps=1, approve_at=[1]))
    record = await c.call("wait", run)
    await c.call("wait", (await c.call("answer", thread, False)).run_id)
    await raises("interrupt_not_pending", 409,
                 c.call("answer", thread, interrupts=[record.interrupts[0].id]))
    await raises("interrupt_not_pending", None, c.call("answer", thread))  # none pending


async def test_a_token_is_required_when_tokens_are_configured(
        server_factory: Any, tmp_path: Path, kind: str) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-secret\n")
    secured: ServerProcess = server_factory("--tokens-file", str(tokens))
    for token in (None, "wrong"):
        async with open_client(kind, secured.url, token) as c:
            await raises("unauthorized", 401, c.call("threads"))
            await raises("unauthorized", 401, c.events("any-run"))
    async with open_client(kind, secured.url, "alice-secret") as c:
        assert await c.call("threads") == []


async def test_fork_branches_a_thread(module_server: ServerProcess, kind: str) -> None:
    thread = uid("t")
    async with open_client(kind, module_server.url) as c:
        await c.call("run", "demo", demo_input(thread, uid("r"), steps=1))
        await c.call("wait", (await c.call("runs", thread))[0].run_id)
        original = await c.call("thread", thread)
        new_id = uid("fork")
        try:
            forked = await c.call("fork", thread, new_id)
        except OutlastError as exc:
            if exc.status in (404, 405) and exc.code in ("not_found", "method_not_allowed"):
                pytest.skip("this server has no POST /threads/{id}/fork yet")
            raise
        assert forked.thread_id == new_id
        assert forked.messages == original.messages
        assert (await c.call("thread", thread)).messages == original.messages
        await raises("thread_not_found", 404, c.call("fork", "no-such-thread"))
