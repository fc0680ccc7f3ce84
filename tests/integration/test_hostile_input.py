"""Hostile input: every limit violation and every malformed request gets its typed 4xx
with the error shape of docs/spec.md, and the stored data stays byte-for-byte the same.

One real ``outlast serve`` with small limits serves the module; each case compares
every row of the SQLite store, and the database files themselves, before and after.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.hostile_agents import BLOAT_AGENT, HOSTILE_ENV, dump_store
from tests.support.runs import follow_final
from tests.support.server import ServerProcess, demo_input, parse_sse

MAX_BODY = 4096
MAX_MESSAGES = 5
MAX_EVENT = 2048
MAX_HEADERS = 4096
LIMITS = ["--max-body-bytes", str(MAX_BODY), "--max-messages", str(MAX_MESSAGES),
          "--max-event-bytes", str(MAX_EVENT), "--max-header-bytes", str(MAX_HEADERS),
          "--body-timeout", "1", "--keepalive", "2", "--agent", BLOAT_AGENT]


@dataclass
class Seeded:
    """The module's server and the data the cases aim at."""

    server: ServerProcess
    thread: str = "t-int"  # waits for an answer to one interrupt
    run: str = "r-int"
    done_thread: str = "t-done"
    done_run: str = "r-done"
    done_body: dict[str, Any] = field(default_factory=dict)
    last_seq: int = 0

    def snapshot(self) -> tuple[Any, ...]:
        """Every stored row, and the database files' bytes."""
        files = tuple(p.read_bytes() if p.exists() else b""
                      for p in (self.server.data_dir / "outlast.db",
                                self.server.data_dir / "outlast.db-wal"))
        return dump_store(self.server.data_dir), files


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    root = tmp_path_factory.mktemp("hostile")
    server = ServerProcess(root / "data", LIMITS, dict(HOSTILE_ENV))
    server.start()
    s = Seeded(server)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            ask = demo_input(s.thread, s.run, steps=1, approve_at=[1], step_delay_ms=10)
            s.done_body = demo_input(s.done_thread, s.done_run, steps=0)
            for body in (ask, s.done_body):
                assert c.post("/agents/demo", json=body).status_code == 200
                follow_final(c, body["runId"])
            s.last_seq = c.get(f"/runs/{s.done_run}").json()["lastSeq"]
            assert c.get(f"/threads/{s.thread}").json()["status"] == "interrupted"
        yield s
    finally:
        server.stop()


@dataclass(frozen=True)
class Case:
    """One hostile request and the error it must get."""

    label: str
    method: str
    path: str
    status: int
    code: str
    json: Any = None
    content: bytes | None = None
    headers: dict[str, Any] = field(default_factory=dict)
    stream: bool = False  # send the body chunked, without Content-Length


def _run_input(**over: Any) -> dict[str, Any]:
    body = demo_input("t-new", "r-new", steps=0)
    body.update(over)
    return body


def _messages(n: int) -> list[dict[str, Any]]:
    return [{"id": f"m{i}", "role": "user", "content": "hi"} for i in range(n)]


BAD_IDS = {
    "too long": "a" * 201,
    "slash": "a/b",
    "dot-dot": "..",
    "space": "a b",
    "leading punctuation": "-a",
    "newline": "a\n",
    "non-ASCII": "caf\u00e9",
    "empty": "",
}
# In a path (".." would be resolved away by the client before it is sent).
PATH_IDS = {"too long": "a" * 201, "space": "a%20b", "non-ASCII": "caf%C3%A9",
            "newline": "a%0A", "leading dot": ".x", "NUL": "a%00"}
TOO_BIG = {"pad": "x" * (MAX_BODY + 1)}
DEEP = {"state": json.loads("[" * 100 + "]" * 100)}
# b"\xb2" is "²" in a header (latin-1): a digit to str.isdigit(), not to int().
LAST_IDS: list[str | bytes] = ["abc", "-1", "1.5", b"\xb2", "9" * 17, str(2**53), "1 2"]

CASES: list[Case] = [
    # POST /agents/{agent}: size, shape, ids, limits, options.
    Case("agents: body over the limit (declared)", "POST", "/agents/demo", 413,
         "payload_too_large", json=_run_input(forwardedProps=TOO_BIG)),
    Case("agents: body over the limit (chunked)", "POST", "/agents/demo", 413,
         "payload_too_large", content=json.dumps(_run_input(forwardedProps=TOO_BIG)).encode(),
         stream=True),
    Case("agents: empty body", "POST", "/agents/demo", 422, "invalid_request", content=b""),
    Case("agents: not JSON", "POST", "/agents/demo", 422, "invalid_request", content=b"{nope"),
    Case("agents: not UTF-8", "POST", "/agents/demo", 422, "invalid_request",
         content=b'{"threadId": "\xff\xfe"}'),
    Case("agents: JSON but not an object", "POST", "/agents/demo", 422, "invalid_request",
         json=[1, 2]),
    Case("agents: no threadId", "POST", "/agents/demo", 422, "invalid_request",
         json={"runId": "r", "messages": []}),
    Case("agents: messages not a list", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(messages="hi")),
    Case("agents: too many messages", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(messages=_messages(MAX_MESSAGES + 1))),
    Case("agents: message id too long", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(messages=[{"id": "m" * 201, "role": "user", "content": "hi"}])),
    Case("agents: lone surrogate", "POST", "/agents/demo", 422, "invalid_request",
         content=json.dumps(_run_input(messages=[{"id": "m", "role": "user",
                                                  "content": "\ud800"}])).encode()),
    Case("agents: nested too deep", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(**DEEP)),
    Case("agents: nested past the parser", "POST", "/agents/demo", 422, "invalid_request",
         content=b'{"threadId": "t", "runId": "r", "messages": [], "state": '
         + b"[" * 2000 + b"]" * 2000 + b"}"),
    Case("agents: resume entry with a bad interruptId", "POST", "/agents/demo", 422,
         "invalid_request", json=_run_input(messages=[], resume=[
             {"interruptId": "../x", "status": "resolved"}])),
    Case("agents: unknown agent", "POST", "/agents/nobody", 404, "agent_not_found",
         json=_run_input()),
    Case("agents: bad Idempotency-Key", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(), headers={"Idempotency-Key": "a b"}),
    Case("agents: Idempotency-Key too long", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(), headers={"Idempotency-Key": "k" * 201}),
    Case("agents: bad Outlast-On-Disconnect", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(), headers={"Outlast-On-Disconnect": "explode"}),
    Case("agents: bad Outlast-Multitask", "POST", "/agents/demo", 422, "invalid_request",
         json=_run_input(), headers={"Outlast-Multitask": "both"}),
    Case("agents: answers that miss a pending interrupt", "POST", "/agents/demo", 422,
         "resume_incomplete", json=_run_input(threadId="t-int", runId="r-x", messages=[],
                                              resume=[{"interruptId": "nope",
                                                       "status": "resolved"}])),
    Case("agents: new input while an interrupt is pending", "POST", "/agents/demo", 422,
         "resume_incomplete", json=_run_input(threadId="t-int", runId="r-y")),
    Case("agents: runId of another request", "POST", "/agents/demo", 409, "run_id_conflict",
         json=_run_input(threadId="t-new", runId="r-done"),
         headers={"Idempotency-Key": "another-key"}),
    Case("agents: idempotency key reused with another body", "POST", "/agents/demo", 422,
         "idempotency_key_reused", json=_run_input(threadId="t-new", runId="r-done")),
    Case("agents: headers over the limit", "POST", "/agents/demo", 431, "headers_too_large",
         json=_run_input(), headers={"X-Pad": "p" * MAX_HEADERS}),
    *[Case(f"agents: threadId {name}", "POST", "/agents/demo", 422, "invalid_request",
           json=_run_input(threadId=bad)) for name, bad in BAD_IDS.items()],
    *[Case(f"agents: runId {name}", "POST", "/agents/demo", 422, "invalid_request",
           json=_run_input(runId=bad)) for name, bad in BAD_IDS.items()],
    *[Case(f"agents: Last-Event-ID {bad!r}", "POST", "/agents/demo", 400,
           "invalid_last_event_id", json=_run_input(), headers={"Last-Event-ID": bad})
      for bad in LAST_IDS],
    # POST /threads/{id}/resume
    Case("resume: body over the limit", "POST", "/threads/t-int/resume", 413,
         "payload_too_large", json={"resume": [], **TOO_BIG}),
    Case("resume: not JSON", "POST", "/threads/t-int/resume", 422, "invalid_request",
         content=b"resume"),
    Case("resume: no answers", "POST", "/threads/t-int/resume", 422, "invalid_request",
         json={"resume": []}),
    Case("resume: answer not an object", "POST", "/threads/t-int/resume", 422,
         "invalid_request", json={"resume": ["yes"]}),
    Case("resume: bad status", "POST", "/threads/t-int/resume", 422, "invalid_request",
         json={"resume": [{"interruptId": "i", "status": "maybe"}]}),
    Case("resume: bad interruptId", "POST", "/threads/t-int/resume", 422, "invalid_request",
         json={"resume": [{"interruptId": "a/b", "status": "resolved"}]}),
    Case("resume: bad runId", "POST", "/threads/t-int/resume", 422, "invalid_request",
         json={"resume": [{"interruptId": "i", "status": "resolved"}], "runId": "a b"}),
    Case("resume: lone surrogate", "POST", "/threads/t-int/resume", 422, "invalid_request",
         content=b'{"resume": [{"interruptId": "i", "status": "resolved", '
         b'"payload": "\\udfff"}]}'),
    Case("resume: an unknown interrupt", "POST", "/threads/t-int/resume", 422,
         "resume_incomplete", json={"resume": [{"interruptId": "nope",
                                                "status": "resolved"}]}),
    Case("resume: unknown thread", "POST", "/threads/t-none/resume", 404, "thread_not_found",
         json={"resume": [{"interruptId": "i", "status": "resolved"}]}),
    *[Case(f"resume: thread id {name}", "POST", f"/threads/{bad}/resume", 422,
           "invalid_request", json={"resume": [{"interruptId": "i", "status": "resolved"}]})
      for name, bad in PATH_IDS.items()],
    # GET /threads
    Case("threads: limit 0", "GET", "/threads?limit=0", 422, "invalid_request"),
    Case("threads: limit not a number", "GET", "/threads?limit=ten", 422, "invalid_request"),
    Case("threads: limit too large", "GET", "/threads?limit=100000", 422, "invalid_request"),
    Case("threads: unknown status", "GET", "/threads?status=sleepy", 422, "invalid_request"),
    Case("threads: forged cursor", "GET", "/threads?cursor=abc", 422, "invalid_request"),
    Case("threads: cursor too long", "GET", "/threads?cursor=" + "1" * 1001, 422,
         "invalid_request"),
    # GET/DELETE /threads/{id}, GET /threads/{id}/runs
    *[Case(f"thread: id {name}", method, f"/threads/{bad}{suffix}", 422, "invalid_request")
      for name, bad in PATH_IDS.items()
      for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/runs"))],
    Case("thread runs: limit too large", "GET", "/threads/t-int/runs?limit=501", 422,
         "invalid_request"),
    Case("thread runs: before of another thread", "GET", "/threads/t-int/runs?before=r-done",
         422, "invalid_request"),
    Case("thread: delete an unknown thread", "DELETE", "/threads/t-none", 404,
         "thread_not_found"),
    Case("thread: id with an encoded slash", "GET", "/threads/a%2Fb", 404, "not_found"),
    # GET /runs/{id}, GET /runs/{id}/events, POST /runs/{id}/cancel
    *[Case(f"run: id {name}", method, f"/runs/{bad}{suffix}", 422, "invalid_request")
      for name, bad in PATH_IDS.items()
      for method, suffix in (("GET", ""), ("GET", "/events"), ("POST", "/cancel"))],
    *[Case(f"events: after={bad!r}", "GET", f"/runs/r-done/events?after={bad}", 400,
           "invalid_last_event_id") for bad in ("abc", "-1", "1e3", "%C2%B2", "%D9%A1")],
    *[Case(f"events: Last-Event-ID {bad!r}", "GET", "/runs/r-done/events", 400,
           "invalid_last_event_id", headers={"Last-Event-ID": bad}) for bad in LAST_IDS],
    Case("events: follow not a boolean", "GET", "/runs/r-done/events?follow=perhaps", 422,
         "invalid_request"),
    Case("events: protocolVersion too long", "GET",
         "/runs/r-done/events?protocolVersion=" + "1" * 21, 422, "invalid_request"),
    Case("events: unknown run", "GET", "/runs/r-none/events", 404, "run_not_found"),
    Case("cancel: wait not a boolean", "POST", "/runs/r-done/cancel?wait=soon", 422,
         "invalid_request"),
    Case("cancel: unknown run", "POST", "/runs/r-none/cancel", 404, "run_not_found"),
    # The app around the routes.
    Case("no such route", "GET", "/nowhere", 404, "not_found"),
    Case("no such method", "PUT", "/threads", 405, "method_not_allowed"),
    Case("headers over the limit on a read", "GET", "/threads", 431, "headers_too_large",
         headers={"X-Pad": "p" * MAX_HEADERS}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_a_bad_request_gets_its_typed_error_and_changes_nothing(seeded: Seeded,
                                                                case: Case) -> None:
    before = seeded.snapshot()
    with httpx.Client(base_url=seeded.server.url, timeout=30) as c:
        kwargs: dict[str, Any] = {"headers": case.headers}
        if case.json is not None:
            kwargs["json"] = case.json
        elif case.content is not None:
            kwargs["content"] = iter([case.content]) if case.stream else case.content
        r = c.request(case.method, case.path, **kwargs)
        assert r.status_code == case.status, r.text
        assert r.headers["content-type"] == "application/json"
        error = r.json()["error"]
        assert error["code"] == case.code, error
        assert isinstance(error["message"], str) and error["message"]
        if case.status == 405:
            assert "GET" in r.headers["allow"]
        assert c.get("/healthz").status_code == 200
    assert seeded.snapshot() == before


def test_a_resume_point_past_the_end_of_the_log_is_refused(seeded: Seeded) -> None:
    """Last-Event-ID names a ``seq`` a client saw; there is none past the run's last."""
    before = seeded.snapshot()
    past = str(seeded.last_seq + 1)
    with httpx.Client(base_url=seeded.server.url, timeout=30) as c:
        for r in (c.get(f"/runs/{seeded.done_run}/events", headers={"Last-Event-ID": past}),
                  c.get(f"/runs/{seeded.done_run}/events?after={past}"),
                  # a retry that reattaches to the run of its idempotency key
                  c.post("/agents/demo", json=seeded.done_body,
                         headers={"Last-Event-ID": past})):
            assert r.status_code == 400, r.text
            assert r.json()["error"] == {
                "code": "invalid_last_event_id", "value": past, "lastSeq": seeded.last_seq,
                "message": r.json()["error"]["message"]}
        # The last seq itself is a fine resume point: the tail is empty, the stream ends.
        r = c.get(f"/runs/{seeded.done_run}/events",
                  headers={"Last-Event-ID": str(seeded.last_seq)})
        assert r.status_code == 200
        assert all(f.id is None for f in parse_sse(r.text))
    assert seeded.snapshot() == before


def _trickle(url: str) -> tuple[bytes, bool, float]:
    """Send a request whose body trickles in a byte at a time; return what came back,
    whether the server hung up, and after how long."""
    host, port = url.removeprefix("http://").split(":")
    started = time.monotonic()
    received = b""
    closed = False
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /agents/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        # Trickle one byte at a time, for up to 8 s: the server answers, then hangs up.
        while time.monotonic() - started < 8:
            try:
                readable, _, _ = select.select([sock], [], [], 0.2)
                if not readable:
                    sock.sendall(b" ")
                    continue
                chunk = sock.recv(65536)
            except OSError:
                # A byte sent after the server closed draws a reset, which can also
                # discard the answer not read yet: the connection is cut off either way.
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += chunk
    return received, closed, time.monotonic() - started


def test_a_slow_body_is_cut_off(seeded: Seeded) -> None:
    before = seeded.snapshot()
    answers = []
    for _ in range(3):
        received, closed, elapsed = _trickle(seeded.server.url)
        print(f"slow body: cut off after {elapsed:.2f} s (--body-timeout 1)")
        assert closed, "the server kept reading a body it had refused"
        assert elapsed < 6, f"cut off after {elapsed:.1f} s with --body-timeout 1"
        if received:
            answers.append(received)
            break
    assert answers, "the 408 never reached the client"
    head, _, body = answers[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answers[0]
    assert b"connection: close" in head.lower()
    assert json.loads(body)["error"]["code"] == "request_timeout"
    with httpx.Client(base_url=seeded.server.url) as c:
        assert c.get("/healthz").status_code == 200
    assert seeded.snapshot() == before


def test_a_request_head_past_every_limit_is_refused_without_harm(seeded: Seeded) -> None:
    """A head that keeps coming is buffered only up to about twice the header limit
    (the HTTP parser's cap): then a plain 400 and a hang-up, and the server is fine."""
    before = seeded.snapshot()
    host, port = seeded.server.url.removeprefix("http://").split(":")
    sent = 0
    received = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
        sock.settimeout(0.05)
        while sent < (1 << 20) and not received:
            try:
                sock.sendall(b"p" * 4096)
                sent += 4096
                received = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
    assert received.startswith(b"HTTP/1.1 400 "), received
    assert sent <= 4 * MAX_HEADERS + (64 << 10), f"{sent} bytes of header were read"
    with httpx.Client(base_url=seeded.server.url) as c:
        assert c.get("/healthz").status_code == 200
    assert seeded.snapshot() == before


def test_an_agent_emitting_an_oversized_event_fails_its_run_clearly(seeded: Seeded) -> None:
    with httpx.Client(base_url=seeded.server.url, timeout=30) as c:
        body = demo_input("t-bloat", "r-bloat")
        body["forwardedProps"] = {"bloat": {"bytes": MAX_EVENT * 4}}
        r = c.post("/agents/bloat", json=body)
        assert r.status_code == 200
        frames = parse_sse(r.text)
        last = frames[-1].event
        assert last["type"] == "RUN_ERROR", last
        record = c.get("/runs/r-bloat").json()
        assert record["status"] == "failed"
        error = json.dumps(record["error"])
        assert "payload_too_large" in error and f"limit of {MAX_EVENT}" in error, error
        # Nothing oversized was stored; what was said before the event was.
        stored = dump_store(seeded.server.data_dir)["events"]
        assert all(len(row[-1]) <= MAX_EVENT for row in stored)
        replay = parse_sse(c.get("/runs/r-bloat/events").text)
        assert any("about to say far too much" in json.dumps(f.event) for f in replay)
        assert c.get("/healthz").status_code == 200
        # The server goes on: the next run of another agent succeeds.
        c.post("/agents/demo", json=demo_input("t-after", "r-after", steps=0))
        assert follow_final(c, "r-after")["status"] == "succeeded"


def test_the_limits_are_what_the_flags_say(seeded: Seeded) -> None:
    """At each limit a request is accepted (so the refusals above are the limits, not
    something else), and the event limit binds agents only: the run's first event,
    which echoes an input larger than that limit, is the engine's and is stored."""
    with httpx.Client(base_url=seeded.server.url, timeout=30) as c:
        messages = _messages(MAX_MESSAGES)
        messages[0]["content"] = "y" * (MAX_EVENT + 100)
        body = demo_input("t-edge", "r-edge", messages=messages, steps=0)
        body["threadId"] = "t" * 200
        body["forwardedProps"]["pad"] = ""
        body["forwardedProps"]["pad"] = "x" * (MAX_BODY - len(json.dumps(body)))
        raw = json.dumps(body).encode()
        assert len(raw) == MAX_BODY
        r = c.post("/agents/demo", content=raw, headers={"X-Pad": "p" * (MAX_HEADERS // 2)})
        assert r.status_code == 200, r.text
        assert follow_final(c, "r-edge")["status"] == "succeeded"
        first = parse_sse(c.get("/runs/r-edge/events").text)[0].event
        assert first["type"] == "RUN_STARTED" and len(json.dumps(first)) > MAX_EVENT
