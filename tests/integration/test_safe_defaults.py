"""Safe defaults: without tokens the server stays on loopback unless told otherwise,
CORS is off until origins are listed, and the log never holds tokens, message
contents or tool arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.hostile_agents import BLOAT_AGENT, HOSTILE_ENV, PATCHY_AGENT
from tests.support.server import ServerProcess, demo_input, parse_sse

APP = "https://app.example"


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    """``outlast serve`` that is expected to exit on its own."""
    return subprocess.run(
        [sys.executable, "-m", "outlast.cli.main", "serve", "--port", "0",
         "--data-dir", str(tmp_path / "data"), *args],
        capture_output=True, text=True, timeout=30, env={**_environ(), **(env or {})})


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OUTLAST_")}


def local_url(server: ServerProcess) -> str:
    """The server's URL through loopback, whatever address it is bound to."""
    return "http://127.0.0.1:" + server.url.rsplit(":", 1)[1]


@pytest.mark.parametrize(("args", "env"), [
    (["--host", "0.0.0.0"], {}),
    (["--host", "::"], {}),
    (["--host", "192.0.2.10"], {}),
    ([], {"OUTLAST_HOST": "0.0.0.0"}),
], ids=["0.0.0.0", "::", "a LAN address", "OUTLAST_HOST"])
def test_a_bind_beyond_loopback_without_tokens_is_refused_and_says_why(
        tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    done = serve(tmp_path, *args, env=env)
    assert done.returncode == 2, done
    assert "refusing to bind" in done.stderr
    assert "--tokens-file" in done.stderr and "--insecure" in done.stderr
    assert "read and control every run" in done.stderr  # why, not only what
    assert "outlast serving on" not in done.stdout
    assert not (tmp_path / "data").exists(), "nothing is created before the refusal"


def test_an_unreadable_tokens_file_stops_the_server_with_a_message(tmp_path: Path) -> None:
    missing = serve(tmp_path, "--tokens-file", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "cannot read --tokens-file" in missing.stderr
    bad = tmp_path / "tokens"
    bad.write_text("alice:tok-alice\njust-a-token-without-a-principal\n")
    malformed = serve(tmp_path, "--tokens-file", str(bad))
    assert malformed.returncode == 2 and ":2: expected principal:token" in malformed.stderr
    assert "just-a-token-without-a-principal" not in malformed.stderr
    assert "Traceback" not in missing.stderr + malformed.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_insecure_allows_a_wide_bind_and_warns(server_factory: Any, how: str) -> None:
    if how == "flag":
        server = server_factory("--host", "0.0.0.0", "--insecure")
    else:
        server = server_factory(env={"OUTLAST_HOST": "0.0.0.0", "OUTLAST_INSECURE": "1"})
    assert server.url.startswith("http://0.0.0.0:")
    with httpx.Client(base_url=local_url(server)) as c:
        assert c.get("/threads").status_code == 200  # the single local principal
    assert any("without authentication" in line for line in server.log)


def test_tokens_allow_a_wide_bind(server_factory: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:tok-alice\n")
    server = server_factory("--host", "0.0.0.0", "--tokens-file", str(tokens))
    with httpx.Client(base_url=local_url(server)) as c:
        assert c.get("/threads").status_code == 401
        assert c.get("/threads", headers={"Authorization": "Bearer tok-alice"}).status_code \
            == 200
    assert not any("without authentication" in line for line in server.log)


def test_without_tokens_loopback_serves_one_local_principal(server_factory: Any) -> None:
    server = server_factory("--host", "localhost")
    with httpx.Client(base_url=local_url(server), timeout=30) as c:
        r = c.post("/agents/demo", json=demo_input("t-local", "r-local", steps=0))
        assert r.status_code == 200
        # Any Authorization header, or none, is the same caller.
        listed = c.get("/threads", headers={"Authorization": "Bearer whatever"}).json()
        assert [t["threadId"] for t in listed["threads"]] == ["t-local"]


def _preflight(c: httpx.Client, origin: str) -> httpx.Response:
    return c.options("/agents/demo", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, idempotency-key"})


def test_cors_is_off_by_default(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url) as c:
        r = _preflight(c, APP)
        assert r.status_code == 405  # no CORS layer answers preflights
        assert not any(h.startswith("access-control-") for h in r.headers)
        r = c.get("/threads", headers={"Origin": APP})
        assert r.status_code == 200
        assert not any(h.startswith("access-control-") for h in r.headers)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cors_allows_exactly_the_listed_origins(server_factory: Any, how: str) -> None:
    if how == "flag":
        server = server_factory("--cors-origin", APP, "--cors-origin", "http://localhost:3000")
    else:
        server = server_factory(env={"OUTLAST_CORS_ORIGINS": f"{APP},http://localhost:3000"})
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for origin in (APP, "http://localhost:3000"):
            r = _preflight(c, origin)
            assert r.status_code == 200, r.text
            assert r.headers["access-control-allow-origin"] == origin
            allowed = r.headers["access-control-allow-headers"].lower()
            assert "authorization" in allowed and "idempotency-key" in allowed
        r = c.post("/agents/demo", headers={"Origin": APP},
                   json=demo_input("t-cors", "r-cors", steps=0))
        assert r.headers["access-control-allow-origin"] == APP
        exposed = r.headers["access-control-expose-headers"].lower()
        assert "outlast-run-id" in exposed and "outlast-thread-id" in exposed
        for stranger in ("https://evil.example", "https://app.example.evil", "null"):
            r = _preflight(c, stranger)
            assert r.status_code == 400
            assert "access-control-allow-origin" not in r.headers
            r = c.get("/threads", headers={"Origin": stranger})
            assert "access-control-allow-origin" not in r.headers


def test_the_log_holds_no_tokens_message_contents_or_tool_arguments(
        server_factory: Any, tmp_path: Path) -> None:
    secret = uuid.uuid4().hex
    token = f"tok-{secret}"
    wrong = f"wrong-{secret}"
    words = f"content-{secret}"
    argument = f"argument-{secret}"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{token}\n")
    server = server_factory("--tokens-file", str(tokens), "--max-event-bytes", "4096",
                            "--agent", BLOAT_AGENT, "--agent", PATCHY_AGENT,
                            env=dict(HOSTILE_ENV))
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=30) as c:
        # A conversation with contents and a tool call with arguments, in the input ...
        history = [
            {"id": "u1", "role": "user", "content": words},
            {"id": "a1", "role": "assistant", "content": words, "toolCalls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "lookup", "arguments": json.dumps({"q": argument})}}]},
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": words},
            {"id": "u2", "role": "user", "content": words},
        ]
        body = demo_input("t-log", "r-log", messages=history, steps=1, approve_at=[1],
                          step_delay_ms=10)
        body["state"] = {"note": words}
        assert c.post("/agents/demo", json=body).status_code == 200
        thread = c.get("/threads/t-log").json()
        assert thread["status"] == "interrupted", thread
        # ... in an approval that edits the tool's arguments ...
        answer = {"interruptId": thread["interrupts"][0]["id"], "status": "resolved",
                  "payload": {"approved": True, "editedArgs": {"target": argument}}}
        r = c.post("/threads/t-log/resume", json={"resume": [answer], "runId": "r-log-2"},
                   headers={"Accept": "text/event-stream"})
        assert r.status_code == 200 and argument in r.text
        # ... in refused requests, failing runs and bad tokens.
        c.post("/agents/demo", json={**body, "runId": "r-log-3", "messages": [
            {"id": "x", "role": "nobody", "content": words}]})
        c.post("/agents/demo", content=f'{{"threadId": "{words}'.encode())
        c.post("/agents/demo", json={**body, "threadId": words + "/x"})
        c.post("/agents/demo", json=demo_input("t-log2", "r-log4", words, fail_at=1, steps=1))
        bloat = demo_input("t-bloat", "r-bloat", words)
        bloat["forwardedProps"] = {"bloat": {"bytes": 10_000}}
        assert parse_sse(c.post("/agents/bloat", json=bloat).text)[-1].event["type"] == \
            "RUN_ERROR"
        # ... and in state that patches fail against (the engine warns about those).
        r = c.post("/agents/patchy", json=demo_input("t-patch", "r-patch", words))
        assert parse_sse(r.text)[-1].event["type"] == "RUN_FINISHED"
        for bad in (wrong, f"{token}x", token[:-1]):
            assert c.get("/threads", headers={"Authorization": f"Bearer {bad}"}).status_code \
                == 401
        assert c.get("/threads", headers={"Authorization": wrong}).status_code == 401
    with httpx.Client(base_url=server.url) as c:
        r = c.request("BREW", "/threads", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 405
    server.stop()  # the whole log, shutdown included
    log = "\n".join(server.log)
    assert "outlast serving on" in log  # the log was captured ...
    assert "STATE_DELTA not applied" in log  # ... with warnings about the run in it
    for leaked in (secret, token, wrong, words, argument):
        assert leaked not in log, f"{leaked!r} is in the server's log:\n{log}"


CHROMIUM = os.environ.get("OUTLAST_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.browser
def test_the_web_client_sends_its_access_token(server_factory: Any, tmp_path: Path) -> None:
    """The page itself loads without a token; its API calls carry the one it was given
    (a ``#token=`` link, kept in localStorage, or the key button)."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"Chromium not found at {CHROMIUM}")
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api")
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:tok-web\n")
    server = server_factory("--tokens-file", str(tokens), "--keepalive", "2")
    knobs = json.dumps(json.dumps({"steps": 1, "step_delay_ms": 10, "tokens_per_message": 3,
                                   "token_delay_ms": 5}))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context()
            context.add_init_script(f"localStorage.setItem('outlast.demo', {knobs})")
            page = context.new_page()
            # No token: the page loads, and the first API answer says what to do.
            page.goto(server.url + "/")
            page.get_by_test_id("composer").fill("hello without a token")
            page.get_by_test_id("send").click()
            sync_api.expect(page.get_by_test_id("error")).to_contain_text(
                "access token", timeout=20_000)
            # A #token= link: kept, taken out of the address bar, sent with every call.
            page.goto(server.url + "/#token=tok-web")
            assert "tok-web" not in page.url
            page.get_by_test_id("composer").fill("hello with a token")
            page.get_by_test_id("send").click()
            sync_api.expect(page.get_by_test_id("run-status")).to_have_text(
                "succeeded", timeout=20_000)
            assert page.evaluate("localStorage.getItem('outlast.token')") == "tok-web"
            # The key button replaces it (here: forgets it), and the page starts over.
            page.once("dialog", lambda dialog: dialog.accept(""))
            page.get_by_test_id("token").click()
            page.wait_for_load_state()
            assert page.evaluate("localStorage.getItem('outlast.token')") is None
        finally:
            browser.close()
    with httpx.Client(base_url=server.url,
                      headers={"Authorization": "Bearer tok-web"}) as c:
        titles = [t["title"] for t in c.get("/threads").json()["threads"]]
    assert titles == ["hello with a token"]
