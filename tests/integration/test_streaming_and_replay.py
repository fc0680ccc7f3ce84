"""A run's event stream, live and replayed: contiguous seqs, exact tails, reattaching mid-run,
dropped connections and readers that never read (spec §4, G1, G2, G9, G10).

Every test talks to a real ``outlast serve`` on loopback over real HTTP; the run log is the
server's SQLite file.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.runs import fold_of, stream_into, wait_final, with_ids
from tests.support.server import Frame, ServerProcess, collect, demo_input, wait_for

# One server for the whole module (``module_server``, which ``client`` then talks to):
# the tests share its store, so each uses its own thread and run ids.
pytestmark = pytest.mark.usefixtures("module_server")

JS_DIR = Path(__file__).resolve().parents[1] / "js"


def assert_fold_is_thread(fold: ThreadFold, thread: dict[str, Any]) -> None:
    assert fold.messages == thread["messages"]
    assert fold.state == thread["state"]


async def test_a_complete_run_streams_run_started_to_run_finished_with_contiguous_ids(
        client: httpx.AsyncClient) -> None:
    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=demo_input("complete-t", "complete-r", steps=2))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.headers["Outlast-Run-Id"] == "complete-r"
    assert resp.headers["Outlast-Thread-Id"] == "complete-t"
    assert "Outlast-Replayed" not in resp.headers  # this request created the run
    assert all(f.id is not None for f in frames)  # a fresh stream synthesizes nothing
    assert [f.id for f in frames] == list(range(1, len(frames) + 1))
    assert frames[0].event["type"] == "RUN_STARTED"
    assert frames[0].event["runId"] == "complete-r"
    assert frames[-1].event["type"] == "RUN_FINISHED"
    assert {f.event["type"] for f in frames} >= {
        "TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_RESULT", "STATE_DELTA"}

    run = (await client.get("/runs/complete-r")).json()
    assert run["status"] == "succeeded"
    assert run["lastSeq"] == len(frames)
    thread = (await client.get("/threads/complete-t")).json()
    assert_fold_is_thread(fold_of([f.event for f in frames]), thread)
    assert thread["asOf"] == {"runId": "complete-r", "seq": len(frames)}


async def test_replay_after_any_seq_of_a_finished_run_is_exactly_the_tail(
        client: httpx.AsyncClient) -> None:
    _, live = await collect(client, "POST", "/agents/demo",
                            json=demo_input("tail-t", "tail-r", steps=2))
    n = len(live)
    events = [f.event for f in live]
    thread = (await client.get("/threads/tail-t")).json()
    for k in range(n + 1):
        resp, frames = await collect(client, "GET", f"/runs/tail-r/events?after={k}&follow=false")
        assert resp.status_code == 200
        assert resp.headers["Outlast-Run-Id"] == "tail-r"
        assert resp.headers["Outlast-Thread-Id"] == "tail-t"
        assert with_ids(frames) == with_ids(live[k:]), f"after={k}"
        synthesized = [f for f in frames if f.id is None]
        if k == 0:
            assert synthesized == []
        else:
            # Mid-run start: a synthesized RUN_STARTED first, re-opening frames, then the log.
            assert frames[0].id is None and frames[0].event["type"] == "RUN_STARTED"
            first_id = next((i for i, f in enumerate(frames) if f.id is not None), len(frames))
            assert all(f.id is None for f in frames[:first_id])
        # A stream of a final run always ends with the run's final event.
        assert frames[-1].event == live[-1].event, f"after={k}"
        # Folded onto what the client already had, every stream gives the thread.
        resumed = fold_of([f.event for f in frames], fold_of(events[:k]))
        assert_fold_is_thread(resumed, thread)

    mid = n // 2
    for k in (0, mid, n - 1, n):
        # Last-Event-ID and ?after= mean the same, following (the default) or not.
        _, by_header = await collect(client, "GET", "/runs/tail-r/events",
                                     headers={"Last-Event-ID": str(k)})
        _, by_query = await collect(client, "GET", f"/runs/tail-r/events?after={k}")
        assert with_ids(by_header) == with_ids(by_query) == with_ids(live[k:])
        assert by_header[-1].event == by_query[-1].event == live[-1].event


async def test_a_stream_of_a_running_run_matches_the_live_stream_from_any_seq(
        client: httpx.AsyncClient) -> None:
    live: list[Frame] = []
    body = demo_input("running-t", "running-r", steps=3, step_delay_ms=250,
                      tokens_per_message=8, token_delay_ms=25)
    task = asyncio.create_task(stream_into(client, "POST", "/agents/demo", live, json=body))

    def open_message_seq() -> int | None:
        # A seq inside a text message of the second step or later: the run goes on.
        open_ids: set[str] = set()
        for f in live:
            t, mid = f.event["type"], f.event.get("messageId")
            if t == "TEXT_MESSAGE_START":
                open_ids.add(mid)
            elif t == "TEXT_MESSAGE_END":
                open_ids.discard(mid)
            elif t == "TEXT_MESSAGE_CONTENT" and mid in open_ids and f.id and f.id > 20:
                return f.id
        return None

    async def picked() -> int | None:
        return open_message_seq()

    k: int = await wait_for(picked, timeout=20, interval=0.005)
    message_id = next(f.event["messageId"] for f in live if f.id == k)

    async def moved_on() -> bool:
        return len(live) >= k + 2

    await wait_for(moved_on, timeout=20, interval=0.005)
    run = (await client.get("/runs/running-r")).json()
    assert run["status"] == "running"

    # ?follow=false: replay to the live edge and close, while the run goes on.
    _, edge = await collect(client, "GET", f"/runs/running-r/events?after={k}&follow=false")
    assert edge[0].id is None and edge[0].event["type"] == "RUN_STARTED"
    assert edge[0].event["runId"] == "running-r"
    # The state as of k, then the message open at k re-opened (no id, no content),
    # before the log continues.
    assert edge[1].id is None and edge[1].event["type"] == "STATE_SNAPSHOT"
    assert edge[1].event["snapshot"] == fold_of([f.event for f in live[:k]]).state
    assert edge[2].id is None
    assert edge[2].event == {"type": "TEXT_MESSAGE_START", "messageId": message_id,
                             "role": "assistant"}
    edge_ids = with_ids(edge)
    assert edge_ids and edge_ids[0][0] == k + 1
    assert [s for s, _ in edge_ids] == list(range(k + 1, k + 1 + len(edge_ids)))
    assert edge[-1].event["type"] != "RUN_FINISHED"  # the run had not ended

    # Following from k (header and query) while it runs: the tail, live, to the end.
    followers = [
        asyncio.create_task(collect(client, "GET", "/runs/running-r/events",
                                    headers={"Last-Event-ID": str(k)})),
        asyncio.create_task(collect(client, "GET", f"/runs/running-r/events?after={k}")),
    ]
    await task
    assert live[-1].event["type"] == "RUN_FINISHED"
    assert [f.id for f in live] == list(range(1, len(live) + 1))
    assert edge_ids == with_ids(live[k:k + len(edge_ids)])
    thread = (await client.get("/threads/running-t")).json()
    for follower in followers:
        _, frames = await follower
        assert frames[0].id is None and frames[0].event["type"] == "RUN_STARTED"
        assert with_ids(frames) == with_ids(live[k:])
        assert frames[-1].event == live[-1].event
        resumed = fold_of([f.event for f in frames], fold_of([f.event for f in live[:k]]))
        assert_fold_is_thread(resumed, thread)


async def test_a_dropped_stream_leaves_the_run_complete_with_each_effect_once(
        client: httpx.AsyncClient, module_server: ServerProcess) -> None:
    body = demo_input("drop-t", "drop-r", steps=3, step_delay_ms=100, token_delay_ms=10)
    resp, seen = await collect(client, "POST", "/agents/demo", json=body, limit=5)
    assert resp.status_code == 200 and len(seen) == 5
    assert (await client.get("/runs/drop-r")).json()["status"] in ("queued", "running")

    run = await wait_final(client, "drop-r")
    assert run["status"] == "succeeded"  # G1: the disconnect ended nothing
    effects = [line.split() for line in module_server.effects() if line.startswith("drop-r ")]
    assert sorted(step for _, step, _ in effects) == ["1", "2", "3"]  # G9: each tool once
    _, replay = await collect(client, "GET", "/runs/drop-r/events")
    assert with_ids(replay[:5]) == with_ids(seen)  # G2: what was shown is in the log as shown
    assert replay[-1].event["type"] == "RUN_FINISHED"
    assert len(replay) == run["lastSeq"]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def silent_subscriber(url: str, body: dict[str, Any]) -> socket.socket:
    """Send the request on a socket with a tiny receive window that is never read."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (host, int(port)))
    raw = json.dumps(body).encode()
    await loop.sock_sendall(sock, b"POST /agents/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            b"Content-Type: application/json\r\nContent-Length: "
                            + str(len(raw)).encode() + b"\r\n\r\n" + raw)
    return sock


async def test_a_reader_that_never_reads_neither_slows_the_run_nor_grows_memory(
        server_factory: Any) -> None:
    # G10. A per-subscriber buffer would hold every unread frame (over 12 MB here) in
    # the server; kernel socket buffers take a few MB at most, so the subscriber stalls
    # early, stays attached (a long keepalive keeps the send timeout out of the way),
    # and the run must neither wait for it nor keep what it has not read.
    srv: ServerProcess = server_factory("--keepalive", "60")
    pace = {"steps": 1, "step_delay_ms": 0, "tokens_per_message": 45000, "token_delay_ms": 0}

    async with srv.client() as client:
        pid = srv.proc.pid  # type: ignore[union-attr]

        async def unwatched(run_id: str) -> float:
            started = time.monotonic()
            resp, _ = await collect(client, "POST", "/agents/demo", limit=1,
                                    json=demo_input(f"{run_id}-t", run_id, **pace))
            assert resp.status_code == 200
            run = await wait_final(client, run_id)
            assert run["status"] == "succeeded"
            return time.monotonic() - started

        # Also the warm-up: allocator arenas and SQLite page caches grow on the first run.
        alone = await unwatched("g10-alone")

        sock = await silent_subscriber(srv.url, demo_input("g10-silent-t", "g10-silent", **pace))
        try:
            before = rss_kib(pid)
            started = time.monotonic()
            run = await wait_final(client, "g10-silent")
            elapsed = time.monotonic() - started
            after = rss_kib(pid)
            metrics = (await client.get("/metrics")).text
            subscribers = [float(line.split()[1]) for line in metrics.splitlines()
                           if line.startswith("outlast_subscribers ")]
        finally:
            sock.close()

        assert run["status"] == "succeeded"
        # The silent reader was still attached when the run ended: it really did not read.
        assert subscribers == [1.0]
        _, frames = await collect(client, "GET", "/runs/g10-silent/events?follow=false")
        unread = sum(len(json.dumps(f.event)) for f in frames)
        assert unread > 12 * 1024 * 1024

    growth = after - before
    print(f"G10: unwatched run {alone:.2f} s, with a silent reader {elapsed:.2f} s; "
          f"RSS growth {growth} KiB for {unread // 1024} KiB of unread frames")
    assert elapsed < 3 * alone + 2.0
    assert growth * 1024 < unread / 3


def stock_client() -> str | None:
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail("@ag-ui/client harness unavailable under CI")
        return None
    return node


async def test_resumed_streams_fold_to_the_thread_in_the_stock_client(
        client: httpx.AsyncClient) -> None:
    node = stock_client()
    if node is None:
        pytest.skip("node or tests/js/node_modules is missing (npm ci --prefix tests/js)")
    _, live = await collect(client, "POST", "/agents/demo",
                            json=demo_input("stock-t", "stock-r", steps=2))
    thread = (await client.get("/threads/stock-t")).json()
    events = [f.event for f in live]
    cuts = sorted({0, 7, len(live) // 2, len(live) - 1, len(live)})
    scenarios = []
    for k in cuts:
        _, frames = await collect(client, "GET", f"/runs/stock-r/events?after={k}")
        had = fold_of(events[:k])
        scenarios.append({"threadId": "stock-t", "messages": had.messages, "state": had.state,
                          "runs": [{"events": [f.event for f in frames]}]})
    proc = await asyncio.to_thread(
        subprocess.run, [node, str(JS_DIR / "fold.mjs")], check=True, timeout=60,
        input=json.dumps({"scenarios": scenarios}), capture_output=True, text=True)
    for k, result in zip(cuts, json.loads(proc.stdout)["scenarios"], strict=True):
        assert result["errors"] == [None], f"after={k}"
        assert result["messages"] == thread["messages"], f"after={k}"
        assert result["state"] == thread["state"], f"after={k}"
