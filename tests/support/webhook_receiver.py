"""A real webhook receiver on 127.0.0.1: an HTTP server in a thread of the test that
records every request and answers as the test's policy says. It can go down (its
socket closed: connections are refused) and come back on the same port."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request the receiver got, and what it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    started: float
    ended: float = 0.0
    status: int = 0

    @property
    def id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def event(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.body)
        return result


@dataclass
class Answer:
    """What the policy answers: a status, headers, and how long to take first."""

    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


# The policy sees the request and how many earlier requests carried its webhook-id.
Policy = Callable[[Received, int], Answer]


def accept(_request: Received, _earlier: int) -> Answer:
    """Acknowledge everything."""
    return Answer(204)


class Receiver:
    """The server; ``arrived`` grows as requests come in, ``requests`` as they are
    answered."""

    def __init__(self, policy: Policy = accept, port: int = 0) -> None:
        self.policy = policy
        self.port = port
        self.requests: list[Received] = []  # answered (or being answered)
        self.arrived: list[Received] = []  # every request, from the moment it arrives
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(length), time.monotonic())
                with receiver._lock:
                    earlier = sum(1 for r in receiver.arrived if r.id == got.id)
                    receiver.arrived.append(got)
                answer = receiver.policy(got, earlier)
                if answer.delay:
                    time.sleep(answer.delay)
                # Stamped before the answer leaves: the sender's next attempt can only
                # start after it, so overlapping stamps mean overlapping deliveries.
                got.status = answer.status
                got.ended = time.monotonic()
                with receiver._lock:
                    receiver.requests.append(got)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle(self) -> None:
                # A sender killed mid-request leaves a broken pipe: expected, not news.
                try:
                    super().handle()
                except OSError:
                    pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Go down: the socket closes, so connections are refused until ``start``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def of(self, webhook_id: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.id == webhook_id]

    def acknowledged(self) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if 200 <= r.status < 300]

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.requests)
