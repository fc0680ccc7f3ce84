"""Hostile load: request heads that arrive a byte a second are closed after
``--head-timeout`` while a normal client still streams its run, connections past
``--max-connections`` are refused at once, and the server's memory stays bounded."""

from __future__ import annotations

import asyncio
import json
import resource
from pathlib import Path
from typing import Any

from tests.support.server import ServerProcess, collect, demo_input, wait_for

SLOW_CONNECTIONS = 1000
HEAD = (b"GET /threads HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"p" * 200 + b"\r\n\r\n")


def raise_open_files_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def rss_kib(server: ServerProcess) -> int:
    assert server.proc is not None
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    line = next(ln for ln in status.splitlines() if ln.startswith("VmRSS:"))
    return int(line.split()[1])


def address(server: ServerProcess) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


class SlowHeads:
    """Connections typing ``HEAD`` one byte a second; each reconnects when closed."""

    def __init__(self, server: ServerProcess, count: int) -> None:
        self.host, self.port = address(server)
        self.count = count
        self.open = 0
        self.closed_by_server = [0] * count
        self.answers: list[bytes] = []  # whatever the server said before closing
        self.completed = 0  # heads the server let finish: must stay 0
        self.stop = asyncio.Event()
        self.tasks = [asyncio.create_task(self._one(i)) for i in range(count)]

    async def _one(self, i: int) -> None:
        while not self.stop.is_set():
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.open += 1
            try:
                for byte in HEAD:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    try:
                        answer = await asyncio.wait_for(reader.read(4096), 1.0)
                    except TimeoutError:
                        if self.stop.is_set():
                            return
                        continue  # still open: the next byte, a second later
                    self.closed_by_server[i] += 1
                    if answer:
                        self.answers.append(answer)
                    break
                else:
                    self.completed += 1
            except (ConnectionResetError, BrokenPipeError):
                self.closed_by_server[i] += 1
            finally:
                self.open -= 1
                writer.close()

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def test_slow_heads_are_closed_while_a_normal_client_streams_a_run(
        server_factory: Any) -> None:
    raise_open_files_limit(SLOW_CONNECTIONS + 1024)
    server: ServerProcess = server_factory("--head-timeout", "2")
    pace = {"steps": 2, "step_delay_ms": 50, "tokens_per_message": 5, "token_delay_ms": 5}
    async with server.client() as c:
        resp, frames = await collect(c, "POST", "/agents/demo",
                                     json=demo_input("warm-t", "warm-r", **pace))
        assert frames[-1].event["type"] == "RUN_FINISHED"
    before = rss_kib(server)
    slow = SlowHeads(server, SLOW_CONNECTIONS)
    try:
        await wait_for(lambda: _at_least(slow.open, SLOW_CONNECTIONS * 9 // 10), timeout=30)
        async with server.client() as c:
            resp, frames = await collect(c, "POST", "/agents/demo",
                                         json=demo_input("busy-t", "busy-r", **pace))
        assert resp.status_code == 200
        assert frames[0].event["type"] == "RUN_STARTED"
        assert frames[-1].event["type"] == "RUN_FINISHED"
        # Every slow connection is closed by the server, long before its head (230
        # bytes at one a second) could have arrived.
        await wait_for(lambda: _at_least(min(slow.closed_by_server), 1), timeout=60)
        peak = rss_kib(server)
    finally:
        await slow.close()
    assert slow.completed == 0
    assert all(a.startswith(b"HTTP/1.1 408 ") and b"request_timeout" in a
               for a in slow.answers), slow.answers[:3]
    assert peak - before < 50 * 1024, f"RSS grew from {before} KiB to {peak} KiB"
    async with server.client() as c:
        assert (await c.get("/healthz")).status_code == 200


async def _at_least(value: int, bound: int) -> bool:
    return value >= bound


async def test_a_stream_longer_than_the_head_timeout_is_no_slow_head(
        server_factory: Any) -> None:
    server: ServerProcess = server_factory("--head-timeout", "1")
    host, port = address(server)
    async with server.client() as c:
        resp, frames = await collect(c, "POST", "/agents/demo", json=demo_input(
            "long-t", "long-r", steps=3, step_delay_ms=1000))
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"

    # A kept-alive connection: the next head gets the same deadline as the first,
    # even when it trickles in (each byte would reset uvicorn's keep-alive timer).
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = await reader.readuntil(b"}")
        assert first.startswith(b"HTTP/1.1 200 ")
        closed = False
        for byte in HEAD:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.read(4096), 0.3)
            except TimeoutError:
                continue
            assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer
            closed = True
            break
        assert closed, "the trickling second head was never cut off"
    finally:
        writer.close()


async def test_connections_past_the_cap_are_refused_at_once(server_factory: Any) -> None:
    cap = 20
    server: ServerProcess = server_factory("--max-connections", str(cap))
    host, port = address(server)
    idle = [await asyncio.open_connection(host, port) for _ in range(cap)]
    for reader, writer in idle:  # answered, so surely counted; then kept alive, idle
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await reader.readuntil(b"}")).startswith(b"HTTP/1.1 200 ")
    try:
        async def refused() -> dict[str, Any] | None:
            reader, writer = await asyncio.open_connection(host, port)
            try:
                raw = await asyncio.wait_for(reader.read(), 30)
            finally:
                writer.close()
            if not raw.startswith(b"HTTP/1.1 503 "):
                return None
            return json.loads(raw.split(b"\r\n\r\n", 1)[1])  # type: ignore[no-any-return]

        body = await wait_for(refused, timeout=20)
        assert body["error"]["code"] == "unavailable"
        assert f"limit of {cap} open connections" in body["error"]["message"]
    finally:
        for _, writer in idle:
            writer.close()

    async def served() -> bool:
        async with server.client() as c:
            try:
                return (await c.get("/healthz")).status_code == 200
            except Exception:
                return False

    assert await wait_for(served, timeout=20)
