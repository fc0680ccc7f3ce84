"""The threat model (docs/threat-model.md), tried as each hostile client would.

Sections follow the document: a web page that rebinds its name to 127.0.0.1, a
page on another origin sending requests it cannot read, a page that frames or
imitates the web client, a run's creator naming a webhook outside its prefix, a
client with another principal's token, and any client that can connect. Every
refusal is checked to change nothing: the SQLite store's rows are compared before
and after. The exhaustive tables of malformed input and limits are in
test_hostile_input.py, test_access_control.py and e2e/test_slow_heads.py; this
module keeps one check per line of the model.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.config import Settings
from outlast.engine.webhooks import admissible
from tests.support.hostile_agents import dump_store
from tests.support.runs import follow_final
from tests.support.server import ServerProcess, demo_input
from tests.support.webhook_receiver import Answer, Received, Receiver

APP = "https://app.example"
SECRET = "whsec_" + base64.b64encode(b"threat-model-secret-key").decode()


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def port_of(server: ServerProcess) -> int:
    return int(server.url.rsplit(":", 1)[1])


def raw_request(server: ServerProcess, head: bytes, body: bytes = b"",
                within: float = 10.0) -> tuple[int, bytes]:
    """Send ``head`` (a request line and headers, CRLF-terminated) and ``body`` as
    bytes, exactly, with no client normalising the target; the status and the body."""
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=within) as sock:
        sock.sendall(head + b"Connection: close\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def stored(server: ServerProcess) -> dict[str, Any]:
    """Every stored row but the webhook outbox's (its deliveries retry on their own)."""
    rows: dict[str, Any] = dump_store(server.data_dir)
    rows.pop("webhooks", None)
    return rows


def error_code(resp: httpx.Response) -> str:
    code: str = resp.json()["error"]["code"]
    return code


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    def policy(request: Received, _earlier: int) -> Answer:
        # A receiver that bounces notifications elsewhere: the sender must not follow.
        if request.path.startswith("/outlast/bounce"):
            return Answer(307, {"Location": "/admin/delete"})
        if request.path.startswith("/outlast/flaky"):
            return Answer(503)
        return Answer(204)

    r = Receiver(policy).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver,
          ) -> Iterator[ServerProcess]:
    """A default local install (no tokens, loopback), with one CORS origin and a
    webhook prefix."""
    server = ServerProcess(tmp_path_factory.mktemp("local") / "data", [
        "--keepalive", "2", "--cors-origin", APP, "--webhook-secret", SECRET,
        "--webhook-allow", receiver.url("/outlast/"), "--webhook-retry-base", "0.2",
        "--webhook-retry-max", "0.5"])
    server.start()
    with httpx.Client(base_url=server.url, timeout=30) as c:
        body = demo_input("t-seed", "r-seed", steps=1, approve_at=[1], step_delay_ms=10)
        assert c.post("/agents/demo", json=body).status_code == 200
        follow_final(c, "r-seed")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An install with tokens that also answers to api.example.com."""
    root = tmp_path_factory.mktemp("tokens")
    (root / "tokens").write_text("alice:tok-alice\nbob:tok-bob\n")
    server = ServerProcess(root / "data", [
        "--tokens-file", str(root / "tokens"), "--allowed-host", "api.example.com",
        "--allowed-host", ".corp.example", "--keepalive", "2"])
    server.start()
    with httpx.Client(base_url=server.url, timeout=30, headers=ALICE) as c:
        body = demo_input("t-alice", "r-alice", steps=1, approve_at=[1], step_delay_ms=10)
        assert c.post("/agents/demo", json=body).status_code == 200
        follow_final(c, "r-alice")
    yield server
    server.stop()


ALICE = {"Authorization": "Bearer tok-alice"}
BOB = {"Authorization": "Bearer tok-bob"}


# -- A web page that rebinds its name to 127.0.0.1 -----------------------------------

REBOUND = ["evil.example:{port}", "evil.example", "127.0.0.1.nip.io:{port}",
           "localhost.evil.example:{port}", "127.0.0.1@evil.example", "0.0.0.0:{port}",
           "[::2]:{port}", "localhost:{port}/x", "evil.example:notaport", ""]


@pytest.mark.parametrize("host", REBOUND)
def test_a_rebound_name_reads_nothing_and_starts_nothing(local: ServerProcess,
                                                         host: str) -> None:
    name = host.format(port=port_of(local))
    before = stored(local)
    with httpx.Client(base_url=local.url, timeout=30, headers={"Host": name}) as c:
        for method, path, body in [
            ("GET", "/threads", None), ("GET", "/threads/t-seed", None),
            ("GET", "/runs/r-seed/events?follow=false", None), ("GET", "/", None),
            ("POST", "/agents/demo", demo_input(uid("t"), uid("r"))),
            ("POST", "/runs/r-seed/cancel", None),
        ]:
            resp = c.request(method, path, json=body,
                             headers={"Origin": f"http://{name}"} if method == "POST" else {})
            assert resp.status_code == 403, (name, path, resp.text)
            assert error_code(resp) == "host_not_allowed"
            assert "--allowed-host" in resp.json()["error"]["message"]
    assert stored(local) == before


def test_a_request_without_a_host_is_refused(local: ServerProcess) -> None:
    status, body = raw_request(local, b"GET /threads HTTP/1.0\r\n")
    assert status == 403 and b"host_not_allowed" in body


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST",
                                  "localhost.:{port}", "[::1]:{port}", "127.0.0.1"])
def test_loopback_names_are_served_in_any_spelling(local: ServerProcess, host: str) -> None:
    with httpx.Client(base_url=local.url, timeout=30,
                      headers={"Host": host.format(port=port_of(local))}) as c:
        assert c.get("/threads").status_code == 200


def test_probes_answer_any_name(local: ServerProcess) -> None:
    with httpx.Client(base_url=local.url, timeout=30, headers={"Host": "10.1.2.3:8765"}) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"status": "ready"}
        assert c.get("/metrics").status_code == 403


@pytest.mark.parametrize(("host", "served"), [
    ("api.example.com", True), ("API.example.com:443", True), ("corp.example", True),
    ("a.b.corp.example:8443", True), ("127.0.0.1", True), ("localhost:1", True),
    ("evil.example", False), ("api.example.com.evil.example", False),
    ("notcorp.example", False),
])
def test_with_tokens_the_allowed_hosts_are_served_and_no_others(
        tokens: ServerProcess, host: str, served: bool) -> None:
    with httpx.Client(base_url=tokens.url, timeout=30, headers={**ALICE, "Host": host}) as c:
        resp = c.get("/threads/t-alice")
        if served:
            assert resp.status_code == 200, resp.text
        else:  # a valid token does not make a foreign name acceptable
            assert resp.status_code == 403 and error_code(resp) == "host_not_allowed"


@pytest.mark.parametrize(("value", "says"), [
    ("api.example.com:8765", "without port"), ("https://api.example.com", "not a URL"),
    ("a b", "host name"), ("", "host name"), ("[::1]:80", "without port"),
])
def test_a_bad_allowed_host_stops_the_server_with_one_line(tmp_path: Path, value: str,
                                                           says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--port", "0",
                           "--data-dir", str(tmp_path / "data"), "--allowed-host", value],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_help_says_what_allowed_host_does() -> None:
    done = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--help"],
                          capture_output=True, text=True, timeout=60)
    text = " ".join(done.stdout.split())
    assert "--allowed-host NAME" in text and "DNS rebinding" in text
    assert "OUTLAST_ALLOWED_HOSTS" in text


# -- A page on another origin that sends requests it cannot read -----------------------

def changing_operations(server: ServerProcess) -> list[tuple[str, str]]:
    """Every operation of the OpenAPI document that changes something."""
    with httpx.Client(base_url=server.url, timeout=30) as c:
        paths = c.get("/openapi.json").json()["paths"]
    return [(method.upper(), path) for path, item in paths.items() for method in item
            if method.upper() not in ("GET", "HEAD", "OPTIONS")]


def fill(path: str) -> str:
    return (path.replace("{thread_id}", "t-seed").replace("{run_id}", "r-seed")
            .replace("{agent}", "demo").replace("{agent_name}", "demo"))


@pytest.mark.parametrize("origin", ["http://evil.example", "http://evil.example:{port}",
                                    "null", "https://app.example.evil", "http://localhost:1"])
def test_a_foreign_origin_changes_nothing_on_any_route(local: ServerProcess,
                                                       origin: str) -> None:
    operations = changing_operations(local)
    assert {m for m, _ in operations} >= {"POST", "DELETE"} and len(operations) >= 5
    before = stored(local)
    with httpx.Client(base_url=local.url, timeout=30) as c:
        for method, path in operations:
            body = demo_input("t-seed", uid("r")) if path.startswith("/agents") else {}
            resp = c.request(method, fill(path), json=body,
                             headers={"Origin": origin.format(port=port_of(local))})
            assert resp.status_code == 403, (method, path, resp.text)
            assert error_code(resp) == "origin_not_allowed"
            assert "access-control-allow-origin" not in resp.headers
    assert stored(local) == before


@pytest.mark.parametrize("origin", ["http://127.0.0.1:{port}", "http://localhost:{port}", APP])
def test_the_servers_own_origin_and_cors_origins_may_change_things(local: ServerProcess,
                                                                   origin: str) -> None:
    origin = origin.format(port=port_of(local))
    host = origin.removeprefix("http://") if origin != APP else f"127.0.0.1:{port_of(local)}"
    run_id = uid("r")
    with httpx.Client(base_url=local.url, timeout=30,
                      headers={"Origin": origin, "Host": host}) as c:
        resp = c.post("/agents/demo", json=demo_input(uid("t"), run_id, steps=0))
        assert resp.status_code == 200, resp.text
        assert c.get(f"/runs/{run_id}").json()["status"] == "succeeded"


def test_a_foreign_origin_may_read_but_the_browser_is_not_told_it_may(
        local: ServerProcess) -> None:
    with httpx.Client(base_url=local.url, timeout=30,
                      headers={"Origin": "http://evil.example"}) as c:
        resp = c.get("/threads")
    assert resp.status_code == 200 and "access-control-allow-origin" not in resp.headers


def test_a_preflight_from_a_foreign_origin_is_not_granted(local: ServerProcess) -> None:
    with httpx.Client(base_url=local.url, timeout=30) as c:
        foreign = c.options("/agents/demo", headers={
            "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
        listed = c.options("/agents/demo", headers={
            "Origin": APP, "Access-Control-Request-Method": "POST"})
    assert foreign.headers.get("access-control-allow-origin") is None
    assert listed.headers.get("access-control-allow-origin") == APP


# -- A page that frames or imitates the web client -------------------------------------

SECURED = ["/", "/static/app.js", "/threads", "/runs/r-seed", "/runs/nope", "/openapi.json",
           "/runs/r-seed/events?follow=false", "/healthz", "/docs", "/no/such/route"]


@pytest.mark.parametrize("path", SECURED)
def test_every_response_carries_the_security_headers(local: ServerProcess, path: str) -> None:
    with httpx.Client(base_url=local.url, timeout=30) as c:
        resp = c.get(path)
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["referrer-policy"] == "no-referrer"
    assert resp.headers["x-frame-options"] == "DENY"
    policy = resp.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    if path != "/docs":
        assert "unsafe-inline" not in policy and "script-src" not in policy


def test_the_web_client_has_no_inline_script_and_docs_allow_only_their_own(
        local: ServerProcess) -> None:
    with httpx.Client(base_url=local.url, timeout=30) as c:
        page = c.get("/").text
        docs = c.get("/docs")
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), "an inline script"
    assert not re.search(r"\son[a-z]+=", page), "an inline event handler"
    scripts = re.findall(r"<script>(.*?)</script>", docs.text, re.DOTALL)
    assert scripts
    policy = docs.headers["content-security-policy"]
    allowed = re.findall(r"'sha256-([^']+)'", policy)
    assert sorted(allowed) == sorted(
        base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in scripts)


# -- A run's creator naming a webhook outside its prefix -------------------------------

ESCAPES = ["../admin/delete", "%2e%2e/admin/delete", "%2E%2E%2Fadmin/delete",
           "./../admin/delete", ".%2e/admin/delete", "%2e./admin/delete",
           "%252e%252e%252fadmin/delete", "..%5Cadmin/delete", "..\\admin/delete",
           "x/%2E%2E/%2E%2E/admin/delete", "./x", "x/."]


@pytest.mark.parametrize("tail", ESCAPES)
def test_a_webhook_that_climbs_out_of_its_prefix_is_refused_at_admission(
        local: ServerProcess, receiver: Receiver, tail: str) -> None:
    thread_id, run_id = uid("t"), uid("r")
    before = stored(local)
    with httpx.Client(base_url=local.url, timeout=30) as c:
        resp = c.post("/agents/demo", json=demo_input(thread_id, run_id, steps=0),
                      headers={"Outlast-Webhook": receiver.url("/outlast/") + tail})
        assert resp.status_code == 422 and error_code(resp) == "invalid_request", resp.text
        assert resp.json()["error"]["header"] == "Outlast-Webhook"
        assert c.get(f"/runs/{run_id}").status_code == 404
    assert stored(local) == before


@pytest.mark.parametrize("tail", ESCAPES)
def test_a_stored_delivery_that_climbs_out_is_never_attempted(tail: str) -> None:
    """Delivery checks each URL again (a row stored by an older, laxer check)."""
    prefix = "http://hooks.internal/outlast/"
    settings = Settings(webhook_secret=SECRET, webhook_allow=[prefix])
    assert admissible(settings, prefix + "ok")
    assert not admissible(settings, prefix + tail)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/outlastx", "http://127.0.0.1:{port}/OUTLAST/x",
    "http://127.0.0.1:{other}/outlast/x", "http://user@127.0.0.1:{port}/outlast/x",
    "https://127.0.0.1:{port}/outlast/x", "http://127.0.0.1:{port}.evil.example/outlast/x",
])
def test_a_webhook_beside_its_prefix_is_refused(local: ServerProcess, receiver: Receiver,
                                                 url: str) -> None:
    url = url.format(port=receiver.port, other=receiver.port + 1)
    with httpx.Client(base_url=local.url, timeout=30) as c:
        resp = c.post("/agents/demo", json=demo_input(uid("t"), uid("r"), steps=0),
                      headers={"Outlast-Webhook": url})
    assert resp.status_code == 422, (url, resp.text)


def test_a_delivery_reaches_only_its_prefix_and_follows_no_redirect(
        local: ServerProcess, receiver: Receiver) -> None:
    spelled = f"HTTP://127.0.0.1:{receiver.port}/outlast/bounce"  # the scheme in any case
    run_id = uid("r")
    with httpx.Client(base_url=local.url, timeout=30) as c:
        resp = c.post("/agents/demo", json=demo_input(uid("t"), run_id, steps=0),
                      headers={"Outlast-Webhook": spelled})
        assert resp.status_code == 200, resp.text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            hooks = c.get(f"/runs/{run_id}").json()["webhooks"]
            if hooks and hooks[0]["attempts"] >= 2:
                break
            time.sleep(0.1)
        [hook] = c.get(f"/runs/{run_id}").json()["webhooks"]
    assert hook["attempts"] >= 2 and "redirects are not followed" in hook["lastError"]
    paths = {r.path for r in receiver.snapshot()}
    assert "/outlast/bounce" in paths
    assert all(p.startswith("/outlast/") for p in paths), paths


def test_a_stored_delivery_no_longer_allowed_is_never_sent(
        tmp_path: Path, receiver: Receiver) -> None:
    """A run admitted under a prefix the operator has since removed: its retries stop."""
    data = tmp_path / "data"
    common = ["--webhook-secret", SECRET, "--webhook-retry-base", "0.2",
              "--webhook-retry-max", "0.3", "--keepalive", "2"]
    first = ServerProcess(data, [*common, "--webhook-allow", receiver.url("/outlast/flaky/")])
    first.start()
    run_id = uid("r")
    try:
        with httpx.Client(base_url=first.url, timeout=30) as c:
            resp = c.post("/agents/demo", json=demo_input(uid("t"), run_id, steps=0),
                          headers={"Outlast-Webhook": receiver.url("/outlast/flaky/x")})
            assert resp.status_code == 200
            deadline = time.monotonic() + 30
            while not any(r.path == "/outlast/flaky/x" for r in receiver.snapshot()):
                assert time.monotonic() < deadline, "the first attempt never came"
                time.sleep(0.05)
    finally:
        first.stop()
    second = ServerProcess(data, [*common, "--webhook-allow", receiver.url("/outlast/ok/")])
    second.start()
    try:
        sent = sum(1 for r in receiver.snapshot() if r.path == "/outlast/flaky/x")
        with httpx.Client(base_url=second.url, timeout=30) as c:
            deadline = time.monotonic() + 30
            while (hook := c.get(f"/runs/{run_id}").json()["webhooks"][0])["status"] != "expired":
                assert time.monotonic() < deadline, hook
                time.sleep(0.1)
        assert "no longer allowed" in hook["lastError"]
        assert sum(1 for r in receiver.snapshot() if r.path == "/outlast/flaky/x") == sent
    finally:
        second.stop()


# -- A client with another principal's token -------------------------------------------

@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/threads/t-alice"), ("GET", "/threads/t-alice/runs"), ("GET", "/runs/r-alice"),
    ("GET", "/runs/r-alice/events?follow=false"), ("POST", "/runs/r-alice/cancel"),
    ("DELETE", "/threads/t-alice"),
])
def test_another_principal_meets_exactly_what_a_missing_resource_says(
        tokens: ServerProcess, method: str, path: str) -> None:
    before = dump_store(tokens.data_dir)
    with httpx.Client(base_url=tokens.url, timeout=30, headers=BOB) as c:
        foreign = c.request(method, path)
        missing = c.request(method, path.replace("alice", "nobody"))
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["error"]["code"] == missing.json()["error"]["code"]
    assert dump_store(tokens.data_dir) == before


# -- Any client that can connect -------------------------------------------------------

@pytest.mark.parametrize("target", [
    b"/static/../../config.py", b"/static/%2e%2e/%2e%2e/config.py",
    b"/static/..%2f..%2fconfig.py", b"/static/%2E%2E%5C%2E%2E%5Cconfig.py",
    b"/static/%252e%252e/%252e%252e/config.py", b"/static//etc/passwd",
    b"/docs/assets/../../../../etc/passwd", b"/docs/assets/%2e%2e/%2e%2e/etc/passwd",
    b"/static/..\\..\\config.py",
])
def test_static_paths_never_climb_out(local: ServerProcess, target: bytes) -> None:
    host = f"Host: 127.0.0.1:{port_of(local)}\r\n".encode()
    status, body = raw_request(local, b"GET " + target + b" HTTP/1.1\r\n" + host)
    assert status in (400, 404), (target, status)
    assert b"root:" not in body and b"Settings" not in body


@pytest.mark.parametrize(("label", "body", "status"), [
    ("nested 100,000 deep", {"state": "DEEP"}, 422),
    ("an id with a slash", {"threadId": "a/b"}, 422),
    ("an id with dots", {"threadId": ".."}, 422),
    ("an id with markup", {"threadId": "<script>"}, 422),
    ("an id with a control character", {"threadId": "a\x01"}, 422),
    ("an id of 10 kB", {"threadId": "a" * 10_000}, 422),
    ("a body over the limit", {"state": {"x": "y" * (2 << 20)}}, 413),
])
def test_malformed_input_gets_a_typed_error_and_changes_nothing(
        local: ServerProcess, label: str, body: dict[str, Any], status: int) -> None:
    before = stored(local)
    with httpx.Client(base_url=local.url, timeout=30) as c:
        content = json.dumps({**demo_input("t-bad", "r-bad"), **body}).replace(
            '"DEEP"', "[" * 100_000 + "]" * 100_000)
        resp = c.post("/agents/demo", content=content,
                      headers={"Content-Type": "application/json"})
    assert resp.status_code == status, (label, resp.text)
    assert resp.json()["error"]["code"] in ("invalid_request", "payload_too_large")
    assert stored(local) == before


def test_a_slow_head_is_closed_not_served(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", ["--head-timeout", "1"]).start()
    try:
        with socket.create_connection(("127.0.0.1", port_of(server)), timeout=30) as sock:
            sock.sendall(b"GET /threads HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            answer = b""
            try:  # a timeout here (the server kept waiting) fails the test
                while chunk := sock.recv(4096):
                    answer += chunk
            except ConnectionResetError:
                pass
        assert b" 200 " not in answer
    finally:
        server.stop()
