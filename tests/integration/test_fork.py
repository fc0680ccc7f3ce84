"""Forks (spec §3 ``POST /threads/{id}/fork``) and ``history_diverged``.

A fork holds the original thread's snapshot at a safe boundary. The judge is the stock
``@ag-ui/client``: the fork, hydrated, folds to what the original's logs fold to up to
that boundary. One real ``outlast serve`` (SQLite, bearer tokens for two principals)
serves the module; one test repeats the basics on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.support.agui_client import JS_DIR, stock_client_runs
from tests.support.runs import TABLES, row_counts, run_in_status, stored_log, uid, wait_final
from tests.support.server import ServerProcess, collect, demo_input, wait_for

ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("fork")
    tokens = root / "tokens"
    tokens.write_text("alice:tok-alice\nbob:tok-bob\n")
    proc = ServerProcess(root / "data", ["--keepalive", "2", "--tokens-file", str(tokens)])
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
async def client(served: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with served.client(headers=ALICE) as c:
        yield c


# -- helpers ------------------------------------------------------------------------


def stock_fold(runs: list[tuple[list[dict[str, Any]], dict[str, Any]]],
               messages: list[dict[str, Any]] | None = None,
               state: Any = None) -> dict[str, Any]:
    """Fold runs (events, runAgent params) on one stock client agent, from a start."""
    scenario = {"messages": messages or [], "state": {} if state is None else state,
                "runs": [{"events": e, "params": p} for e, p in runs]}
    if not (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        stock_client_runs([])  # skips (fails under CI) with the reason
    proc = subprocess.run(["node", str(JS_DIR / "fold.mjs")],
                          input=json.dumps({"scenarios": [scenario]}),
                          capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)["scenarios"][0]
    return result


async def hydrated(c: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    """The thread as the stock client folds its hydration stream."""
    resp, frames = await collect(c, "POST", "/agents/demo",
                                 json=demo_input(thread_id, uid("hydrate"), messages=[]))
    assert resp.status_code == 200, resp.text
    folded = stock_fold([([f.event for f in frames], {})])
    assert folded["errors"] == [None], folded["errors"]
    return folded


def boundaries(served: ServerProcess, run_id: str) -> list[int]:
    """The seqs the store flagged as safe boundaries in a run's log."""
    db = sqlite3.connect(f"file:{served.data_dir / 'outlast.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT e.seq FROM events e JOIN runs r ON r.rid = e.rid "
                          "WHERE r.id = ? AND e.boundary = 1 ORDER BY e.seq", (run_id,))
        return [int(r[0]) for r in rows]
    finally:
        db.close()


async def log(c: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    return [f.event for f in await stored_log(c, run_id)]


def approve(interrupt_id: str) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}


async def fork(c: httpx.AsyncClient, thread_id: str, **body: Any) -> dict[str, Any]:
    resp = await c.post(f"/threads/{thread_id}/fork", json=body)
    assert resp.status_code == 201, resp.text
    view: dict[str, Any] = resp.json()
    return view


def same(fork_fold: dict[str, Any], original: dict[str, Any], *, interrupts: bool = True) -> None:
    assert fork_fold["messages"] == original["messages"]
    assert fork_fold["state"] == original["state"]
    if interrupts:
        assert fork_fold["pendingInterrupts"] == original["pendingInterrupts"]


# -- fork points ------------------------------------------------------------------


async def test_a_fork_at_each_kind_of_boundary_folds_to_the_original_as_it_was_there(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("kinds")
    r1, r2 = f"{t}-r1", f"{t}-r2"
    await collect(client, "POST", "/agents/demo",
                  json=demo_input(t, r1, steps=3, approve_at=[3]))
    assert (await wait_final(client, r1))["status"] == "interrupted"
    interrupt = (await client.get(f"/threads/{t}")).json()["interrupts"][0]
    await collect(client, "POST", "/agents/demo", json={
        **demo_input(t, r2, messages=[]), "resume": [approve(interrupt["id"])]})
    assert (await wait_final(client, r2))["status"] == "succeeded"
    log1, log2 = await log(client, r1), await log(client, r2)
    resume = {"resume": [approve(interrupt["id"])]}

    b1 = boundaries(served, r1)
    # Between tool steps: a boundary right after a tool's result and its todo update.
    between = [s for s in b1 if s > 1 and log1[s - 2]["type"] == "TOOL_CALL_RESULT"]
    assert b1[0] == 1 and between and b1[-1] == len(log1)
    # A continuation's first commit is no boundary (the approved call still awaits its
    # result); its first boundary comes once the call has one.
    in_r2 = [s for s in boundaries(served, r2) if s < len(log2)]
    assert in_r2 and in_r2[0] > 1
    points = [(r1, 1, True), (r1, between[0], True), (r1, len(log1), True),
              (r2, in_r2[0], False), (r2, in_r2[-1], False), (r2, len(log2), True)]
    for run_id, seq, check_interrupts in points:
        view = await fork(client, t, asOf={"runId": run_id, "seq": seq})
        assert view["forkedFrom"] == {"threadId": t, "runId": run_id, "seq": seq}
        runs = [(log1[:seq], {})] if run_id == r1 else [(log1, {}), (log2[:seq], resume)]
        # The stock client keeps answered interrupts pending until the continuation
        # ends; the fork, rightly, holds none then.
        same(await hydrated(client, view["threadId"]), stock_fold(runs),
             interrupts=check_interrupts)
        assert (await client.get(f"/threads/{view['threadId']}/runs")).json()["runs"] == []
    # The interrupt boundary carries its pending interrupt; the original is untouched.
    at_interrupt = await fork(client, t, asOf={"runId": r1, "seq": len(log1)})
    assert at_interrupt["status"] == "interrupted"
    assert [i["id"] for i in at_interrupt["interrupts"]] == [interrupt["id"]]
    assert (await client.get(f"/runs/{r1}")).json()["interrupts"] == []
    latest = await fork(client, t)
    assert latest["forkedFrom"] == {"threadId": t, "runId": r2, "seq": len(log2)}
    original = (await client.get(f"/threads/{t}")).json()
    assert latest["messages"] == original["messages"] and latest["state"] == original["state"]
    assert latest["status"] == "idle" and latest["interrupts"] == []
    listed = {x["threadId"]: x for x in (await client.get("/threads")).json()["threads"]}
    assert listed[latest["threadId"]]["forkedFrom"] == latest["forkedFrom"]
    assert listed[t]["forkedFrom"] is None


async def test_a_fork_of_an_interrupted_thread_is_answered_on_its_own(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("ask")
    await collect(client, "POST", "/agents/demo",
                  json=demo_input(t, f"{t}-r1", steps=2, approve_at=[2]))
    interrupt = (await client.get(f"/threads/{t}")).json()["interrupts"][0]
    branch = await fork(client, t, threadId=f"{t}-b")
    assert branch["threadId"] == f"{t}-b" and branch["status"] == "interrupted"
    # Answered on the fork (session_state followed the latest boundary): the fork's
    # continuation finishes the step; the original still waits.
    resp = await client.post(f"/threads/{t}-b/resume",
                             json={"resume": [approve(interrupt["id"])], "runId": f"{t}-b-r2"})
    assert resp.status_code == 200, resp.text
    assert (await wait_final(client, f"{t}-b-r2"))["status"] == "succeeded"
    done = (await client.get(f"/threads/{t}-b")).json()
    assert done["state"]["todos"][1]["status"] == "done"
    original = (await client.get(f"/threads/{t}")).json()
    assert original["status"] == "interrupted"
    assert [i["status"] for i in original["interrupts"]] == ["pending"]
    assert (await client.get(f"/runs/{t}-r1")).json()["interrupts"][0]["status"] == "pending"
    resp = await client.post(f"/threads/{t}/resume",
                             json={"resume": [approve(interrupt["id"])], "runId": f"{t}-r2"})
    assert resp.status_code == 200, resp.text
    assert (await wait_final(client, f"{t}-r2"))["status"] == "succeeded"


async def test_forks_of_forks_fold_onto_the_snapshot_they_started_from(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("deep")
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r1", steps=1))
    b = (await fork(client, t, threadId=f"{t}-b"))["threadId"]
    base = (await client.get(f"/threads/{b}")).json()
    await collect(client, "POST", "/agents/demo",
                  json=demo_input(b, f"{b}-r1", "and more", steps=2))
    assert (await wait_final(client, f"{b}-r1"))["status"] == "succeeded"
    blog = await log(client, f"{b}-r1")
    for seq in (1, boundaries(served, f"{b}-r1")[2], len(blog)):
        c = await fork(client, b, asOf={"runId": f"{b}-r1", "seq": seq})
        expected = stock_fold([(blog[:seq], {})], base["messages"], base["state"])
        same(await hydrated(client, c["threadId"]), expected)
        # ... and a fork of that fork, at its latest boundary.
        d = await fork(client, c["threadId"])
        assert d["forkedFrom"] == {"threadId": c["threadId"], "runId": None, "seq": None}
        same(await hydrated(client, d["threadId"]), expected)
    # Editing the fork's own first message: the fork of the fork holds the base only.
    e = await fork(client, b, beforeMessageId=f"user-{b}-r1")
    assert e["messages"] == base["messages"] and e["state"] == base["state"]
    # Editing the message the base carried: what preceded it in the base.
    f = await fork(client, b, beforeMessageId=f"user-{t}-r1")
    assert f["messages"] == [] and f["forkedFrom"]["beforeMessageId"] == f"user-{t}-r1"
    assert (await client.get(f"/threads/{t}")).json()["forkedFrom"] is None


async def test_a_fork_while_the_original_runs_takes_its_latest_boundary(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("busy")
    run_id = f"{t}-r1"
    task = asyncio.create_task(collect(client, "POST", "/agents/demo", json=demo_input(
        t, run_id, steps=4, step_delay_ms=150, token_delay_ms=5)))
    await run_in_status(client, run_id, "running")

    async def moved() -> dict[str, Any] | None:
        view = (await client.get(f"/threads/{t}")).json()
        return view if (view["asOf"] or {}).get("seq", 0) > 5 else None

    await wait_for(moved)
    branch = await fork(client, t)
    point = branch["forkedFrom"]
    assert point["runId"] == run_id and point["seq"] > 5
    assert branch["activeRun"] is None and branch["status"] == "idle"
    await task
    assert (await wait_final(client, run_id))["status"] == "succeeded"
    whole = await log(client, run_id)
    assert point["seq"] < len(whole)
    same(await hydrated(client, branch["threadId"]), stock_fold([(whole[:point["seq"]], {})]))
    # The original ran on, unaffected; the fork never changed.
    original = (await client.get(f"/threads/{t}")).json()
    assert original["asOf"] == {"runId": run_id, "seq": len(whole)}
    assert all(todo["status"] == "done" for todo in original["state"]["todos"])
    again = (await client.get(f"/threads/{branch['threadId']}")).json()
    assert again["messages"] == branch["messages"] and again["state"] == branch["state"]


async def test_edit_and_regenerate_forks_just_before_the_message(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("edit")
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r1", "first"))
    after_first = (await client.get(f"/threads/{t}")).json()
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r2", "second"))
    before_second = await fork(client, t, beforeMessageId=f"user-{t}-r2")
    assert before_second["messages"] == after_first["messages"]
    assert before_second["state"] == after_first["state"]
    assert before_second["forkedFrom"] == {
        "threadId": t, "runId": f"{t}-r1", "seq": after_first["asOf"]["seq"],
        "beforeMessageId": f"user-{t}-r2"}
    # The edited message runs on the fork; the original keeps both questions.
    fid = before_second["threadId"]
    await collect(client, "POST", "/agents/demo", json=demo_input(
        fid, f"{fid}-r1", "second, edited", messages=[
            *after_first["messages"],
            {"id": f"user-{fid}", "role": "user", "content": "second, edited"}]))
    assert (await wait_final(client, f"{fid}-r1"))["status"] == "succeeded"
    forked = (await client.get(f"/threads/{fid}")).json()
    users = [m["content"] for m in forked["messages"] if m["role"] == "user"]
    assert users == ["first", "second, edited"]
    original = (await client.get(f"/threads/{t}")).json()
    assert [m["content"] for m in original["messages"] if m["role"] == "user"] == [
        "first", "second"]
    before_first = await fork(client, t, beforeMessageId=f"user-{t}-r1")
    assert before_first["messages"] == [] and before_first["state"] == {}


async def test_a_fork_at_a_compacted_point_is_gone_but_the_latest_still_forks(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("gone")
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r1", steps=1))
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r2", steps=1))
    db = sqlite3.connect(served.data_dir / "outlast.db", timeout=10)
    try:
        with db:
            db.execute("DELETE FROM events WHERE rid = (SELECT rid FROM runs WHERE id = ?)",
                       (f"{t}-r1",))
    finally:
        db.close()
    for body in ({"asOf": {"runId": f"{t}-r1", "seq": 1}},
                 {"asOf": {"runId": f"{t}-r2", "seq": 1}},
                 {"beforeMessageId": f"user-{t}-r2"}):
        resp = await client.post(f"/threads/{t}/fork", json=body)
        assert resp.status_code == 410, resp.text
        assert resp.json()["error"]["code"] == "run_compacted"
    latest = await fork(client, t)
    assert latest["messages"] == (await client.get(f"/threads/{t}")).json()["messages"]


# -- history_diverged -----------------------------------------------------------------


async def test_an_edited_message_in_the_input_is_refused_and_changes_nothing(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("diverge")
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r1", "question"))
    history = (await client.get(f"/threads/{t}")).json()["messages"]
    edited = [{**m, "content": "another question"} if m["role"] == "user" else m
              for m in history]
    counts = row_counts(served, *TABLES)
    new = {"id": f"user-{t}-r2", "role": "user", "content": "next"}
    resp = await client.post("/agents/demo",
                             json=demo_input(t, f"{t}-r2", messages=[*edited, new]))
    assert resp.status_code == 409, resp.text
    error = resp.json()["error"]
    assert error["code"] == "history_diverged" and error["messageId"] == f"user-{t}-r1"
    assert f"user-{t}-r1" in error["message"]
    assert row_counts(served, *TABLES) == counts
    assert (await client.get(f"/runs/{t}-r2")).status_code == 404
    # An edited tool result or assistant text is the same refusal.
    tool = next(m for m in history if m["role"] == "tool")
    changed = [{**m, "content": "forged"} if m is tool else m for m in history]
    resp = await client.post("/agents/demo",
                             json=demo_input(t, f"{t}-r2", messages=[*changed, new]))
    assert resp.status_code == 409 and resp.json()["error"]["messageId"] == tool["id"]
    assert row_counts(served, *TABLES) == counts
    # The same history resent unchanged, or omitted, is fine.
    resp, _ = await collect(client, "POST", "/agents/demo",
                            json=demo_input(t, f"{t}-r2", messages=[*history, new]))
    assert resp.status_code == 200
    assert (await wait_final(client, f"{t}-r2"))["status"] == "succeeded"
    resp, _ = await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r3"))
    assert resp.status_code == 200
    assert (await wait_final(client, f"{t}-r3"))["status"] == "succeeded"
    # A retry of an admitted request attaches (G3), whatever happened since.
    resp, _ = await collect(client, "POST", "/agents/demo",
                            json=demo_input(t, f"{t}-r2", messages=[*history, new]))
    assert resp.status_code == 200 and resp.headers.get("Outlast-Replayed") == "true"


# -- hostile input --------------------------------------------------------------------


async def test_bad_fork_requests_get_clear_refusals_and_change_nothing(
        client: httpx.AsyncClient, served: ServerProcess) -> None:
    t = uid("hostile")
    other = uid("other")
    await collect(client, "POST", "/agents/demo", json=demo_input(t, f"{t}-r1", steps=1))
    await collect(client, "POST", "/agents/demo", json=demo_input(other, f"{other}-r1", steps=1))
    await fork(client, t, threadId=f"{t}-taken")
    last = len(await log(client, f"{t}-r1"))
    inside = next(s for s in range(1, last) if s not in boundaries(served, f"{t}-r1"))
    counts = row_counts(served, *TABLES, "fork_bases")
    cases: list[tuple[str, Any, int, str]] = [
        (t, {"asOf": {"runId": "nope", "seq": 1}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{other}-r1", "seq": 1}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1", "seq": 0}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1", "seq": last + 1}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1", "seq": inside}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1"}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1", "seq": "1"}}, 422, "invalid_request"),
        (t, {"asOf": {"runId": f"{t}-r1", "seq": 1}, "beforeMessageId": f"user-{t}-r1"},
         422, "invalid_request"),
        (t, {"beforeMessageId": "no-such-message"}, 422, "invalid_request"),
        (t, {"threadId": "bad id!"}, 422, "invalid_request"),
        (t, {"threadId": "x" * 5000}, 422, "invalid_request"),
        (t, {"threadId": f"{t}-taken"}, 409, "thread_id_conflict"),
        (t, {"threadId": t}, 409, "thread_id_conflict"),
        (t, {"unknown": 1}, 422, "invalid_request"),
        (t, [], 422, "invalid_request"),
        ("no-such-thread", {}, 404, "thread_not_found"),
    ]
    for thread_id, body, status, code in cases:
        resp = await client.post(f"/threads/{thread_id}/fork", json=body)
        assert resp.status_code == status, (body, resp.text)
        assert resp.json()["error"]["code"] == code, (body, resp.text)
    refused = await client.post(f"/threads/{t}/fork", content=b"{not json",
                                headers={"Content-Type": "application/json"})
    assert refused.status_code in (400, 422), refused.text
    skip = (await client.post(f"/threads/{t}/fork",
                              json={"asOf": {"runId": f"{t}-r1", "seq": inside}})).json()
    assert skip["error"]["boundaryBefore"] < inside
    huge = await client.post(f"/threads/{t}/fork",
                             content=b'{"threadId": "' + b"a" * 3_000_000 + b'"}',
                             headers={"Content-Type": "application/json"})
    assert huge.status_code == 413
    async with served.client(headers=BOB) as bob:
        foreign = await bob.post(f"/threads/{t}/fork", json={})
        assert foreign.status_code == 404 and foreign.json()["error"]["code"] == \
            "thread_not_found"
        foreign = await bob.post(f"/threads/{t}/fork", json={"beforeMessageId": f"user-{t}-r1"})
        assert foreign.status_code == 404
    async with served.client() as anonymous:
        assert (await anonymous.post(f"/threads/{t}/fork", json={})).status_code == 401
    assert row_counts(served, *TABLES, "fork_bases") == counts


# -- PostgreSQL ----------------------------------------------------------------------


async def test_forks_work_the_same_on_postgresql(server_factory: Any, pg_url: str) -> None:
    served = server_factory("--keepalive", "2", "--store", pg_url)
    async with served.client() as c:
        t = uid("pg")
        await collect(c, "POST", "/agents/demo",
                      json=demo_input(t, f"{t}-r1", steps=2, approve_at=[2]))
        await collect(c, "POST", "/agents/demo", json={
            **demo_input(t, f"{t}-r2", messages=[]),
            "resume": [approve((await c.get(f"/threads/{t}")).json()["interrupts"][0]["id"])]})
        assert (await wait_final(c, f"{t}-r2"))["status"] == "succeeded"
        log1 = await log(c, f"{t}-r1")
        at_interrupt = await fork(c, t, asOf={"runId": f"{t}-r1", "seq": len(log1)})
        same(await hydrated(c, at_interrupt["threadId"]), stock_fold([(log1, {})]))
        assert (await c.get(f"/runs/{t}-r1")).json()["interrupts"] == []
        latest = await fork(c, t, threadId=f"{t}-b")
        again = await c.post(f"/threads/{t}/fork", json={"threadId": f"{t}-b"})
        assert again.status_code == 409
        edit = await fork(c, f"{t}-b", beforeMessageId=f"user-{t}-r1")
        assert edit["messages"] == [] and latest["forkedFrom"]["runId"] == f"{t}-r2"
        resp = await c.post("/agents/demo", json=demo_input(t, f"{t}-r3", messages=[
            {"id": f"user-{t}-r1", "role": "user", "content": "edited"}]))
        assert resp.status_code == 409
        assert resp.json()["error"]["code"] == "history_diverged"
