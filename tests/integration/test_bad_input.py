"""Malformed requests get the documented 4xx JSON error (docs/spec.md; never a 500)
and change nothing: the thread list and every table of the SQLite file stay as they were.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.runs import row_counts
from tests.support.server import ServerProcess, collect, demo_input

# One server for the whole module (``module_server``, which ``client`` then talks to):
# the tests share its store, so each uses its own thread and run ids.
pytestmark = pytest.mark.usefixtures("module_server")

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module", autouse=True)
def known_run(module_server: ServerProcess) -> None:
    """The module's server holds one finished run ("known-r" on "known-t")."""
    with httpx.Client(base_url=module_server.url, timeout=30) as client:
        with client.stream("POST", "/agents/demo",
                           json=demo_input("known-t", "known-r", steps=1)) as resp:
            assert resp.status_code == 200
            resp.read()
        assert client.get("/runs/known-r").json()["status"] == "succeeded"


def body(**changes: Any) -> dict[str, Any]:
    """A valid demo RunAgentInput with some fields replaced (None removes one)."""
    value = demo_input("fresh-t", "fresh-r")
    for key, new in changes.items():
        if new is None:
            value.pop(key, None)
        else:
            value[key] = new
    return value


CASES = [
    # POST /agents/{agent}: the body
    ("POST", "/agents/demo", {"content": b"{not json", "headers": JSON},
     422, "invalid_request", "malformed-json"),
    ("POST", "/agents/demo", {"content": b"", "headers": JSON},
     422, "invalid_request", "empty-body"),
    ("POST", "/agents/demo", {"json": [body()]}, 422, "invalid_request", "array-body"),
    ("POST", "/agents/demo", {"content": b"\xff\xfe{}", "headers": JSON},
     422, "invalid_request", "not-utf8"),
    ("POST", "/agents/demo", {"json": body(threadId=42)}, 422, "invalid_request",
     "thread-id-number"),
    ("POST", "/agents/demo", {"json": body(runId=None)}, 422, "invalid_request",
     "run-id-missing"),
    ("POST", "/agents/demo", {"json": body(messages="hello")}, 422, "invalid_request",
     "messages-string"),
    ("POST", "/agents/demo", {"json": body(messages=[{"role": "user", "content": "hi"}])},
     422, "invalid_request", "message-without-id"),
    ("POST", "/agents/demo", {"json": body(tools="all")}, 422, "invalid_request",
     "tools-string"),
    ("POST", "/agents/demo", {"json": body(threadId="a thread")}, 422, "invalid_request",
     "thread-id-space"),
    ("POST", "/agents/demo", {"json": body(runId="../etc")}, 422, "invalid_request",
     "run-id-punctuation"),
    ("POST", "/agents/demo", {"json": body(resume=[{"status": "resolved"}])},
     422, "invalid_request", "resume-without-interrupt-id"),
    # POST /agents/{agent}: a body declared as something other than JSON
    ("POST", "/agents/demo", {"content": json.dumps(body()).encode(),
                              "headers": {"Content-Type": "text/plain"}},
     415, "unsupported_media_type", "json-declared-as-text"),
    ("POST", "/agents/demo", {"content": json.dumps(body()).encode(),
                              "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
     415, "unsupported_media_type", "json-declared-as-a-form"),
    # POST /agents/demo: the demo's knobs are the agent's input, checked at admission
    ("POST", "/agents/demo", {"json": body(forwardedProps={"demo": {"steps": "lots"}})},
     422, "invalid_request", "demo-knob-of-the-wrong-type"),
    ("POST", "/agents/demo", {"json": body(forwardedProps={"demo": {"stepz": 3}})},
     422, "invalid_request", "demo-knob-unknown"),
    ("POST", "/agents/demo", {"json": body(forwardedProps={"demo": {"approve_at": 2}})},
     422, "invalid_request", "demo-knob-not-a-list"),
    # POST /agents/{agent}: the URL and headers
    ("POST", "/agents/nobody", {"json": body()}, 404, "agent_not_found", "unknown-agent"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Last-Event-ID": "abc"}},
     400, "invalid_last_event_id", "last-event-id-word"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Last-Event-ID": "-1"}},
     400, "invalid_last_event_id", "last-event-id-negative"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Last-Event-ID": "1.5"}},
     400, "invalid_last_event_id", "last-event-id-fraction"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Outlast-Multitask": "maybe"}},
     422, "invalid_request", "multitask-unknown"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Outlast-On-Disconnect": "pause"}},
     422, "invalid_request", "on-disconnect-unknown"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Idempotency-Key": "a key"}},
     422, "invalid_request", "idempotency-key-space"),
    ("POST", "/agents/demo", {"json": body(), "headers": {"Outlast-Webhook": "not a url"}},
     422, "invalid_request", "webhook-not-a-url"),
    # A hydration (no messages, no resume) checks the header the same way
    ("POST", "/agents/demo", {"json": body(threadId="known-t", messages=[]),
                              "headers": {"Outlast-Webhook": "not a url"}},
     422, "invalid_request", "hydration-webhook-not-a-url"),
    ("POST", "/agents/demo", {"json": body(threadId="known-t", messages=[]),
                              "headers": {"Outlast-Webhook": "https://elsewhere.example/x"}},
     422, "invalid_request", "hydration-webhook-not-allowed"),
    # Runs and threads that do not exist
    ("GET", "/runs/nope-r", {}, 404, "run_not_found", "unknown-run"),
    ("GET", "/runs/nope-r/events", {}, 404, "run_not_found", "unknown-run-events"),
    ("POST", "/runs/nope-r/cancel", {}, 404, "run_not_found", "unknown-run-cancel"),
    ("GET", "/threads/nope-t", {}, 404, "thread_not_found", "unknown-thread"),
    ("GET", "/threads/nope-t/runs", {}, 404, "thread_not_found", "unknown-thread-runs"),
    ("DELETE", "/threads/nope-t", {}, 404, "thread_not_found", "unknown-thread-delete"),
    # Replay positions that are not event ids
    ("GET", "/runs/known-r/events", {"headers": {"Last-Event-ID": "x1"}},
     400, "invalid_last_event_id", "events-last-event-id-word"),
    ("GET", "/runs/known-r/events?after=ten", {}, 400, "invalid_last_event_id",
     "events-after-word"),
    ("GET", "/runs/known-r/events?after=-3", {}, 400, "invalid_last_event_id",
     "events-after-negative"),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "code"),
                         [pytest.param(*c[:5], id=c[5]) for c in CASES])
async def test_a_bad_request_gets_its_error_and_stores_nothing(
        client: httpx.AsyncClient, module_server: ServerProcess, method: str, path: str,
        kwargs: dict[str, Any], status: int, code: str) -> None:
    threads = (await client.get("/threads")).json()
    rows = row_counts(module_server)
    assert rows["runs"] >= 1 and rows["events"] > 1  # the module's run is there to lose

    resp = await client.request(method, path, **kwargs)

    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    error = resp.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert row_counts(module_server) == rows
    assert (await client.get("/threads")).json() == threads
    assert (await client.get("/runs/fresh-r")).status_code == 404


async def test_the_valid_request_the_cases_start_from_is_admitted(
        client: httpx.AsyncClient) -> None:
    # Each bad case above differs from this request in one thing only (and its ids).
    valid = body(threadId="valid-t", runId="valid-r")
    resp, frames = await collect(client, "POST", "/agents/demo", json=valid,
                                 headers={"Idempotency-Key": "a-key",
                                          "Outlast-Multitask": "enqueue",
                                          "Outlast-On-Disconnect": "continue"})
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
    _, tail = await collect(client, "GET", "/runs/valid-r/events?after=3",
                            headers={"Last-Event-ID": "3"})
    assert next(f.id for f in tail if f.id is not None) == 4


@pytest.fixture
async def small(server_factory: Any) -> AsyncIterator[tuple[ServerProcess, httpx.AsyncClient]]:
    srv: ServerProcess = server_factory("--max-body-bytes", "2048")
    async with srv.client() as client:
        yield srv, client


async def test_a_body_over_the_limit_is_refused_with_payload_too_large(
        small: tuple[ServerProcess, httpx.AsyncClient]) -> None:
    srv, client = small
    fits = body(threadId="fits-t", runId="fits-r")
    resp, frames = await collect(client, "POST", "/agents/demo", json=fits)
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
    rows, threads = row_counts(srv), (await client.get("/threads")).json()

    big = body(threadId="big-t", runId="big-r",
               messages=[{"id": "u1", "role": "user", "content": "x" * 3000}])
    raw = json.dumps(big).encode()
    assert len(raw) > 2048

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(raw), 512):
            yield raw[i:i + 512]

    declared = await client.post("/agents/demo", content=raw, headers=JSON)
    streamed = await client.post("/agents/demo", content=chunks(), headers=JSON)
    assert "content-length" not in {k.lower() for k in streamed.request.headers}
    for resp in (declared, streamed):
        assert resp.status_code == 413, resp.text
        error = resp.json()["error"]
        assert error["code"] == "payload_too_large" and error["message"]
    assert row_counts(srv) == rows
    assert (await client.get("/threads")).json() == threads
    assert (await client.get("/threads/big-t")).status_code == 404


async def test_a_knob_of_the_wrong_type_is_named(client: httpx.AsyncClient) -> None:
    resp = await client.post("/agents/demo", json=body(
        threadId="knob-t", runId="knob-r", forwardedProps={"demo": {"steps": "lots"}}))
    assert resp.status_code == 422
    error = resp.json()["error"]
    assert error["field"] == "forwardedProps.demo.steps"
    assert "forwardedProps.demo.steps must be a whole number" in error["message"]
    assert '"lots"' in error["message"]
    assert (await client.get("/threads/knob-t")).status_code == 404


async def test_a_json_body_without_content_type_is_read_as_json(
        client: httpx.AsyncClient) -> None:
    raw = json.dumps(body(threadId="untyped-t", runId="untyped-r")).encode()
    resp, frames = await collect(client, "POST", "/agents/demo", content=raw)
    assert "content-type" not in resp.request.headers
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
    refused = await client.post("/agents/demo", content=raw,
                                headers={"Content-Type": "text/plain"})
    message = refused.json()["error"]["message"]
    assert refused.status_code == 415 and "Content-Type: application/json" in message
    forked = await client.post("/threads/untyped-t/fork", content=b"{}")
    assert forked.status_code == 201, forked.text


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("OPTIONS", "/threads/known-t", "GET, DELETE"),
    ("POST", "/threads/known-t", "GET, DELETE"),
    ("GET", "/runs/known-r/cancel", "POST"),
    ("DELETE", "/agents/demo", "POST"),
    ("PUT", "/threads", "GET"),
])
async def test_a_405_lists_every_method_the_path_serves(
        client: httpx.AsyncClient, method: str, path: str, allow: str) -> None:
    resp = await client.request(method, path)
    assert resp.status_code == 405
    assert resp.headers["allow"] == allow
    error = resp.json()["error"]
    assert error["code"] == "method_not_allowed" and allow in error["message"]
    if "GET" in allow:  # (the others would change what the module's tests read)
        assert (await client.get(path)).status_code == 200
