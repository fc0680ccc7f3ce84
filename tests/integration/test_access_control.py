"""Access control: bearer tokens map to principals, and every thread, run, interrupt
and idempotency record belongs to exactly one of them.

One real ``outlast serve --tokens-file`` serves the whole module. The matrix is
every endpoint x {the thread's principal, another principal, no token, bad token}; a refused request
and everything the other principal tries change nothing, which is checked by
dumping every row of the SQLite store before and after each request.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.errors import InvalidRequest
from outlast.http.auth import Principals
from tests.support.hostile_agents import dump_store
from tests.support.runs import follow_final
from tests.support.server import Frame, ServerProcess, demo_input, parse_sse

TOKENS = """\
# principal:token, one a line
alice:tok-alice

bob:tok-bob
  carol : tok:with:colons  
"""  # noqa: W291 - the surrounding blanks are part of what the parser must accept
ALICE = {"Authorization": "Bearer tok-alice"}
OTHER = {"Authorization": "Bearer tok-bob"}
# Everything that is not a token of a principal.
BAD_AUTH: list[dict[str, Any]] = [
    {},
    {"Authorization": "Bearer tok-mallory"},
    {"Authorization": "Bearer tok-alice2"},
    {"Authorization": "Bearer tok-alic"},
    {"Authorization": "Bearer"},
    {"Authorization": "tok-alice"},
    {"Authorization": "Basic " + base64.b64encode(b"alice:tok-alice").decode()},
    {"Authorization": b"Bearer \xff\xfe"},
]


@dataclass
class World:
    """The module's server and what alice owns on it."""

    server: ServerProcess
    ask_thread: str = "t-ask"
    ask_run: str = "r-ask"
    done_thread: str = "t-done"
    done_run: str = "r-done"
    interrupt_id: str = ""
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)

    def client(self, headers: dict[str, Any] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, headers=headers or {}, timeout=30)

    def dump(self, principal: str | None = None) -> dict[str, list[tuple[Any, ...]]]:
        return dump_store(self.server.data_dir, principal)


def sse(c: httpx.Client, method: str, url: str, **kwargs: Any) -> tuple[httpx.Response,
                                                                        list[Frame]]:
    """Read a whole response; its SSE frames when it is a stream."""
    r = c.request(method, url, **kwargs)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return r, parse_sse(r.text)
    return r, []


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("access")
    tokens = root / "tokens"
    tokens.write_text(TOKENS)
    server = ServerProcess(root / "data", ["--tokens-file", str(tokens), "--keepalive", "2"])
    server.start()
    w = World(server)
    try:
        with w.client(ALICE) as c:
            ask = demo_input(w.ask_thread, w.ask_run, "please deploy", steps=1, approve_at=[1],
                             step_delay_ms=10)
            done = demo_input(w.done_thread, w.done_run, "tidy up", steps=1, step_delay_ms=10)
            for body in (ask, done):
                r, _ = sse(c, "POST", "/agents/demo", json=body)
                assert r.status_code == 200, r.text
                follow_final(c, body["runId"])
            w.bodies = {"ask": ask, "done": done}
            thread = c.get(f"/threads/{w.ask_thread}").json()
            assert thread["status"] == "interrupted", thread
            w.interrupt_id = thread["interrupts"][0]["id"]
        yield w
    finally:
        server.stop()


@dataclass(frozen=True)
class Endpoint:
    """One request of the matrix; ``{thread}``, ``{run}`` and ``{interrupt}`` name alice's."""

    label: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    public: bool = False  # served without a token
    foreign: int = 404  # what another principal gets

    def request(self, w: World, c: httpx.Client, *, thread: str | None = None,
                run: str | None = None) -> tuple[httpx.Response, list[Frame]]:
        names = {"thread": thread or w.ask_thread, "run": run or w.ask_run,
                 "done_thread": w.done_thread, "interrupt": w.interrupt_id}
        body = None if self.body is None else json.loads(json.dumps(self.body) % names)
        return sse(c, self.method, self.path % names, json=body)


MATRIX = [
    Endpoint("GET /agents", "GET", "/agents", foreign=200),
    Endpoint("POST /agents/demo (hydrate)", "POST", "/agents/demo",
             {"threadId": "%(thread)s", "runId": "hydrate-1", "messages": []}, foreign=200),
    Endpoint("GET /threads", "GET", "/threads", foreign=200),
    Endpoint("GET /threads/{id}", "GET", "/threads/%(thread)s"),
    Endpoint("GET /threads/{id}/runs", "GET", "/threads/%(thread)s/runs"),
    Endpoint("POST /threads/{id}/resume", "POST", "/threads/%(thread)s/resume",
             {"resume": [{"interruptId": "%(interrupt)s", "status": "resolved",
                          "payload": {"approved": True}}]}),
    Endpoint("DELETE /threads/{id}", "DELETE", "/threads/%(thread)s"),
    Endpoint("GET /runs/{id}", "GET", "/runs/%(run)s"),
    Endpoint("GET /runs/{id}/events", "GET", "/runs/%(run)s/events"),
    Endpoint("GET /runs/{id}/events?follow=false", "GET", "/runs/%(run)s/events?follow=false"),
    Endpoint("POST /runs/{id}/cancel", "POST", "/runs/%(run)s/cancel"),
    Endpoint("POST /runs/{id}/cancel?wait=true", "POST", "/runs/%(run)s/cancel?wait=true"),
    Endpoint("GET /metrics", "GET", "/metrics", foreign=200),
    Endpoint("GET /healthz", "GET", "/healthz", public=True, foreign=200),
    Endpoint("GET /readyz", "GET", "/readyz", public=True, foreign=200),
    Endpoint("GET /", "GET", "/", public=True, foreign=200),
    Endpoint("GET /static/app.js", "GET", "/static/app.js", public=True, foreign=200),
    Endpoint("GET /openapi.json", "GET", "/openapi.json", public=True, foreign=200),
    Endpoint("GET /docs", "GET", "/docs", public=True, foreign=200),
]
IDS = [e.label for e in MATRIX]


@pytest.mark.parametrize("endpoint", MATRIX, ids=IDS)
def test_no_token_or_a_bad_token_gets_401_and_changes_nothing(world: World,
                                                              endpoint: Endpoint) -> None:
    for auth in BAD_AUTH:
        before = world.dump()
        with world.client(auth) as c:
            r, _ = endpoint.request(world, c)
        assert world.dump() == before, (endpoint.label, auth)
        if endpoint.public:
            assert r.status_code == 200, (auth, r.text)
            continue
        assert r.status_code == 401, (auth, r.status_code, r.text)
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("endpoint", MATRIX, ids=IDS)
def test_another_principal_is_told_exactly_what_a_missing_resource_says(
        world: World, endpoint: Endpoint) -> None:
    before = world.dump()
    with world.client(OTHER) as c:
        r, frames = endpoint.request(world, c)
    assert world.dump() == before, "the other principal's request changed stored data"
    assert r.status_code == endpoint.foreign, r.text
    if endpoint.foreign != 404:
        if endpoint.label.startswith("GET /threads"):
            assert r.json()["threads"] == []
        if frames:  # hydration of alice's thread: bob sees an empty, unknown thread
            snapshot = next(f.event for f in frames if f.event["type"] == "MESSAGES_SNAPSHOT")
            assert snapshot["messages"] == []
            assert "outcome" not in frames[-1].event or \
                frames[-1].event["outcome"].get("type") != "interrupt"
            assert "please deploy" not in r.text
        return
    # The same status, headers and body as for an id nobody ever used (ids swapped).
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with world.client(ALICE) as c:
        expected, _ = endpoint.request(world, c, thread=missing, run=missing)
    assert expected.status_code == 404
    assert r.text == expected.text.replace(missing, world.ask_thread if "thread" in
                                           endpoint.path else world.ask_run)
    assert r.headers["content-type"] == expected.headers["content-type"]
    assert "www-authenticate" not in r.headers


def test_tokens_file_lines_map_to_principals(world: World) -> None:
    # carol's line has blanks around both parts and colons inside the token.
    with world.client({"Authorization": "Bearer tok:with:colons"}) as c:
        assert c.get("/threads").json()["threads"] == []
    with world.client({"Authorization": "bearer   tok-alice"}) as c:
        listed = {t["threadId"] for t in c.get("/threads").json()["threads"]}
    assert {world.ask_thread, world.done_thread} <= listed


def test_thread_cursors_are_opaque_and_refused_to_another_principal(world: World) -> None:
    with world.client(ALICE) as c:
        first = c.get("/threads", params={"limit": 1}).json()
        cursor = first["nextCursor"]
        assert cursor is not None
        seen = [t["threadId"] for t in first["threads"]]
        while cursor is not None:
            page = c.get("/threads", params={"limit": 1, "cursor": cursor}).json()
            seen += [t["threadId"] for t in page["threads"]]
            cursor = page["nextCursor"]
        everything = [t["threadId"] for t in c.get("/threads").json()["threads"]]
    assert seen == everything  # complete and disjoint
    before = world.dump("alice"), world.dump("bob")
    with world.client(OTHER) as c:
        r = c.get("/threads", params={"cursor": first["nextCursor"]})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    assert (world.dump("alice"), world.dump("bob")) == before


def test_an_idempotent_retry_under_another_principal_starts_its_own_run(world: World) -> None:
    alice_before = world.dump("alice")
    body = world.bodies["done"]
    carol = {"Authorization": "Bearer tok:with:colons"}
    with world.client(carol) as c:
        # alice's thread, run id and idempotency key with another body: for carol the key
        # is unused, where a 422 idempotency_key_reused would reveal alice's request.
        other = demo_input(world.done_thread, world.done_run, "something else", steps=0,
                           step_delay_ms=10)
        r, frames = sse(c, "POST", "/agents/demo", json=other)
        assert r.status_code == 200, r.text
        assert "outlast-replayed" not in r.headers
        assert frames[-1].event["type"] == "RUN_FINISHED"
    with world.client(OTHER) as c:
        # alice's exact request: a new run of bob's, never an attachment to alice's run.
        r, frames = sse(c, "POST", "/agents/demo", json=body)
        assert r.status_code == 200, r.text
        assert "outlast-replayed" not in r.headers
        assert frames[0].event["type"] == "RUN_STARTED" and frames[0].id == 1
        # ... and bob's own retry attaches to bob's run.
        r, again = sse(c, "POST", "/agents/demo", json=body)
        assert r.headers["outlast-replayed"] == "true"
        assert [f.event for f in again] == [f.event for f in frames]
        assert c.get(f"/runs/{world.done_run}").json()["status"] == "succeeded"
    assert world.dump("alice") == alice_before
    with world.client(ALICE) as c:
        thread = c.get(f"/threads/{world.done_thread}").json()
        runs = c.get(f"/threads/{world.done_thread}/runs").json()["runs"]
    assert "something else" not in json.dumps(thread)
    assert [r["runId"] for r in runs] == [world.done_run]


def test_another_principal_never_meets_a_conflict_on_ids_the_owner_uses(world: World) -> None:
    thread = f"t-busy-{uuid.uuid4().hex[:6]}"
    busy = demo_input(thread, f"{thread}-run", steps=3, step_delay_ms=400)
    with world.client(ALICE) as alice, world.client(OTHER) as bob:
        with alice.stream("POST", "/agents/demo", json=busy) as live:
            assert live.status_code == 200
            assert alice.get(f"/runs/{busy['runId']}").json()["status"] in ("queued",
                                                                            "running")
            # alice's run is active on this thread; bob's run on "the same" thread is his
            # own: no run_already_active (it would carry alice's activeRunId), no
            # run_id_conflict, no thread_busy.
            r, frames = sse(bob, "POST", "/agents/demo",
                            json=demo_input(thread, busy["runId"], steps=0, step_delay_ms=10))
            assert r.status_code == 200, r.text
            assert frames[-1].event["type"] == "RUN_FINISHED"
            r = bob.post(f"/runs/{busy['runId']}/cancel")
            assert r.status_code == 200  # bob's own (final) run, not alice's
            assert bob.delete(f"/threads/{thread}").status_code == 204
            assert bob.get(f"/threads/{thread}").status_code == 404
            live.read()
        record = follow_final(alice, busy["runId"])
        assert record["status"] == "succeeded"  # bob's cancel and delete never reached it
        assert alice.get(f"/threads/{thread}").json()["status"] == "idle"


def test_the_owner_reaches_everything(world: World) -> None:
    """Last: the principal's own answers, including the ones that change data."""
    with world.client(ALICE) as c:
        statuses = {}
        for endpoint in MATRIX:
            thread = world.done_thread if endpoint.method == "DELETE" else None
            r, frames = endpoint.request(world, c, thread=thread)
            statuses[endpoint.label] = r.status_code
            if endpoint.label == "POST /agents/demo (hydrate)":
                assert "please deploy" in r.text
                assert frames[-1].event["outcome"]["type"] == "interrupt"
            if endpoint.label == "GET /threads/{id}":
                assert r.json()["interrupts"][0]["id"] == world.interrupt_id
            if endpoint.label == "POST /threads/{id}/resume":
                continuation = r.json()["run"]["runId"]
        expected = {e.label: 200 for e in MATRIX}
        expected["DELETE /threads/{id}"] = 204
        assert statuses == expected
        assert follow_final(c, continuation)["status"] == "succeeded"
        assert c.get(f"/threads/{world.done_thread}").status_code == 404


def test_only_hashes_of_tokens_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKENS)
    principals = Principals.from_file(path)
    assert principals.authenticate(_Conn("Bearer tok-alice")) == "alice"
    assert principals.authenticate(_Conn("Bearer tok:with:colons")) == "carol"
    held = repr(vars(principals))
    for token in ("tok-alice", "tok-bob", "tok:with:colons"):
        assert token not in held and token.encode().hex() not in held


def test_a_token_given_to_two_principals_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice:same\nbob:same\n")
    with pytest.raises(InvalidRequest, match=":2: this token is already given"):
        Principals.from_file(path)


@dataclass
class _Conn:
    """Just what ``Principals.authenticate`` reads of a request."""

    authorization: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": self.authorization}
