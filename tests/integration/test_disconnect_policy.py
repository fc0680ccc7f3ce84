"""Transport is not lifecycle (G1, G4): a client that goes away, or stops reading, ends a run
only when its request asked for ``on_disconnect=cancel``; then the run is cancelled
promptly and its final state saved.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.runs import FINAL, run_in_status
from tests.support.server import ServerProcess, collect, demo_input, parse_sse, wait_for

# One server for the whole module (``module_server``, which ``client`` then talks to):
# the tests share its store, so each uses its own thread and run ids.
pytestmark = pytest.mark.usefixtures("module_server")


@pytest.fixture(scope="module")
def impatient(module_server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """Server default on_disconnect=cancel, and a 1 s keepalive (so a 1 s send timeout)."""
    return module_server_factory("--keepalive", "1", "--on-disconnect", "cancel")


async def raw_request(url: str, body: dict[str, Any], headers: dict[str, str] | None = None,
                      *, rcvbuf: int | None = None) -> socket.socket:
    """Send ``POST /agents/demo`` on a plain socket and return it unread."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, int(port)))
    raw = json.dumps(body).encode()
    lines = [b"POST /agents/demo HTTP/1.1", b"Host: 127.0.0.1",
             b"Content-Type: application/json", b"Content-Length: " + str(len(raw)).encode()]
    lines += [f"{k}: {v}".encode() for k, v in (headers or {}).items()]
    await loop.sock_sendall(sock, b"\r\n".join(lines) + b"\r\n\r\n" + raw)
    return sock


async def test_first_write_fails(client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    # The client sends the request and closes the socket before reading a byte, so the
    # server's first write of the response fails. The run is admitted anyway, shows as the
    # thread's active run, and can be stopped by its id (G4).
    for n in range(3):
        thread_id, run_id = f"gone-t{n}", f"gone-r{n}"
        body = demo_input(thread_id, run_id, steps=3, step_delay_ms=1500)
        sock = await raw_request(module_server.url, body)
        sock.close()
        await run_in_status(client, run_id, "running")
        thread = (await client.get(f"/threads/{thread_id}")).json()
        assert thread["activeRun"]["runId"] == run_id
        assert thread["status"] == "busy"

        resp = await client.post(f"/runs/{run_id}/cancel?wait=true")
        assert resp.status_code == 200 and resp.json()["status"] == "cancelled"
        _, frames = await collect(client, "GET", f"/runs/{run_id}/events")
        assert frames[0].event["type"] == "RUN_STARTED"
        assert frames[-1].event["outcome"] == {"type": "cancelled"}
    assert "Traceback" not in "\n".join(module_server.log)


async def test_a_disconnect_with_continue_leaves_the_run_running(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    for run_id, headers in (("stay-r1", {}), ("stay-r2", {"Outlast-On-Disconnect": "continue"})):
        body = demo_input(f"{run_id}-t", run_id, steps=2, step_delay_ms=100)
        resp, seen = await collect(client, "POST", "/agents/demo", json=body, limit=3,
                                   headers=headers)
        assert resp.status_code == 200 and len(seen) == 3
        run = await run_in_status(client, run_id, *FINAL)
        assert run["status"] == "succeeded"
        assert sum(line.startswith(f"{run_id} ") for line in module_server.effects()) == 2


async def test_on_disconnect_cancel_cancels_the_run_when_its_creating_stream_goes(
        client: httpx.AsyncClient) -> None:
    body = demo_input("bye-t", "bye-r", steps=4, step_delay_ms=1500)
    headers = {"Outlast-On-Disconnect": "cancel"}
    resp, seen = await collect(client, "POST", "/agents/demo", json=body, limit=3,
                               headers=headers)
    assert resp.status_code == 200 and len(seen) == 3
    dropped = time.monotonic()
    run = await run_in_status(client, "bye-r", *FINAL)
    latency = time.monotonic() - dropped
    print(f"on_disconnect=cancel: cancelled {latency * 1000:.0f} ms after the disconnect")
    assert run["status"] == "cancelled"
    assert latency < 3.0  # G1 "promptly"; the run alone would take over 6 s
    _, frames = await collect(client, "GET", "/runs/bye-r/events")
    assert [(f.id, f.event) for f in frames[:3]] == [(f.id, f.event) for f in seen]
    assert frames[-1].event["outcome"] == {"type": "cancelled"}
    thread = (await client.get("/threads/bye-t")).json()
    assert thread["activeRun"] is None
    assert thread["asOf"] == {"runId": "bye-r", "seq": run["lastSeq"]}  # final state saved


async def test_only_the_creating_stream_cancels_on_disconnect(
        client: httpx.AsyncClient) -> None:
    body = demo_input("mine-t", "mine-r", steps=2, step_delay_ms=300)
    headers = {"Outlast-On-Disconnect": "cancel"}
    creating = asyncio.create_task(collect(client, "POST", "/agents/demo", json=body,
                                           headers=headers))
    await run_in_status(client, "mine-r", "running")
    # A retry that attaches and then goes away: the run is not its to cancel.
    resp, _ = await collect(client, "POST", "/agents/demo", json=body, headers=headers, limit=2)
    assert resp.headers["Outlast-Replayed"] == "true"
    resp, frames = await creating
    assert frames[-1].event["type"] == "RUN_FINISHED" and "outcome" not in frames[-1].event
    assert (await client.get("/runs/mine-r")).json()["status"] == "succeeded"


async def test_a_silent_client_is_noticed_and_with_cancel_its_run_is_cancelled(
        impatient: ServerProcess) -> None:
    # The socket stays open and nothing is read: once the kernel buffers fill, sends
    # block, and the 1 s send timeout ends the stream. The server default here is
    # on_disconnect=cancel, so the run is cancelled long before it would finish (~9 s).
    pace = {"steps": 3, "step_delay_ms": 3000, "tokens_per_message": 20000,
            "token_delay_ms": 0}
    async with impatient.client() as client:
        sock = await raw_request(impatient.url, demo_input("mute-t", "mute-r", **pace),
                                 rcvbuf=4096)
        try:
            started = time.monotonic()
            run = await run_in_status(client, "mute-r", *FINAL)
            elapsed = time.monotonic() - started
        finally:
            sock.close()
        print(f"silent client: run cancelled after {elapsed:.2f} s")
        assert run["status"] == "cancelled"
        assert elapsed < 6.0
        thread = (await client.get("/threads/mute-t")).json()
        assert thread["asOf"] == {"runId": "mute-r", "seq": run["lastSeq"]}
    log = "\n".join(impatient.log)
    assert "Traceback" not in log  # a dropped client is no crash
    assert "without completing response" not in log  # nor an app's mistake


async def test_a_silent_client_with_continue_is_dropped_and_the_run_goes_on(
        impatient: ServerProcess) -> None:
    pace = {"steps": 1, "step_delay_ms": 0, "tokens_per_message": 20000, "token_delay_ms": 0}
    async with impatient.client() as client:
        async def subscribers() -> float:
            metrics = (await client.get("/metrics")).text
            [value] = [float(line.split()[1]) for line in metrics.splitlines()
                       if line.startswith("outlast_subscribers ")]
            return value

        assert await subscribers() == 0
        sock = await raw_request(impatient.url, demo_input("deaf-t", "deaf-r", **pace),
                                 {"Outlast-On-Disconnect": "continue"}, rcvbuf=4096)
        try:
            await wait_for(lambda: _equals(subscribers(), 1), interval=0.01)
            # Noticed: the server lets go of the stream while the socket is still open.
            await wait_for(lambda: _equals(subscribers(), 0), timeout=10, interval=0.05)
            run = await run_in_status(client, "deaf-r", *FINAL)
        finally:
            sock.close()
        assert run["status"] == "succeeded"  # G1: only the stream ended
    log = "\n".join(impatient.log)
    assert "Traceback" not in log  # a dropped client is no crash
    assert "without completing response" not in log  # nor an app's mistake


async def _equals(value: Any, expected: float) -> bool:
    return bool(await value == expected)


async def test_a_quiet_stream_carries_keepalives_at_its_interval(
        impatient: ServerProcess) -> None:
    # Keepalive 1 s, a step of 3.5 s with nothing to send: comments keep the connection
    # (and the proxies on its way) alive, one a second, never a flood.
    body = demo_input("quiet-t", "quiet-r", steps=1, step_delay_ms=3500)
    async with impatient.client() as client:
        text = ""
        async with client.stream("POST", "/agents/demo", json=body) as resp:
            assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
            assert resp.headers["cache-control"] == "no-cache"
            async for chunk in resp.aiter_text():
                text += chunk
    frames = parse_sse(text)
    assert frames[-1].event["type"] == "RUN_FINISHED"
    assert 2 <= text.count(": keepalive\n\n") <= 4, text.count(": keepalive\n\n")
    assert "Traceback" not in "\n".join(impatient.log)


