"""A lease no blocked event loop can lose (G8).

An agent that blocks the event loop for twice the lease TTL (``time.sleep``, as a
synchronous HTTP call would) keeps its lease: the lease thread renews it whatever the
loop does. Its run is not taken over — by another process on PostgreSQL, or by its own
process once the loop runs again — and finishes once, in its first attempt; the log
says that the loop stalled, naming the run, and when it ran again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.hostile_agents import BLOCKING_AGENT, HOSTILE_ENV
from tests.support.runs import uid
from tests.support.server import ServerProcess, collect, wait_for

TTL = 1.0
BLOCK = 2 * TTL + 0.5


def blocking_input(thread_id: str, run_id: str) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {"block": BLOCK}}


async def run_blocked(servers: list[ServerProcess], block_log: Path) -> str:
    """One blocking run, created on the first server; checks it ran once, unstolen."""
    run_id = uid("r")
    async with servers[0].client() as c:
        _, frames = await collect(c, "POST", "/agents/blocking",
                                  json=blocking_input(uid("t"), run_id))
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        record = (await c.get(f"/runs/{run_id}")).json()
    assert record["status"] == "succeeded", record
    assert record["attempts"] == 1, record  # never taken over
    assert block_log.read_text().splitlines() == [f"{run_id} 1"]  # the blocking step once
    texts = [lambda s=s: "\n".join(s.log) for s in servers]

    async def said_both() -> bool:
        return any("the event loop has not run for" in t() and run_id in t() for t in texts) \
            and any("the event loop runs again" in t() for t in texts)

    await wait_for(said_both, timeout=10)
    for server in servers:
        assert "taking it over" not in "\n".join(server.log)
        assert "Traceback" not in "\n".join(server.log)
    return run_id


async def test_a_blocked_loop_keeps_its_lease_on_sqlite(server_factory: Any,
                                                        tmp_path: Path) -> None:
    block_log = tmp_path / "block.log"
    env = {**HOSTILE_ENV, "BLOCK_LOG": str(block_log)}
    server = server_factory("--agent", BLOCKING_AGENT, "--lease-ttl", str(TTL), env=env)
    await run_blocked([server], block_log)


@pytest.mark.postgres
async def test_a_blocked_loop_keeps_its_lease_from_another_process(
        server_factory: Any, pg_url: str, tmp_path: Path) -> None:
    block_log = tmp_path / "block.log"
    env = {**HOSTILE_ENV, "BLOCK_LOG": str(block_log)}
    args = ("--store", pg_url, "--agent", BLOCKING_AGENT, "--lease-ttl", str(TTL))
    a = server_factory(*args, env=env)
    b = server_factory(*args, env=env)  # polls for expired leases every TTL / 3
    await run_blocked([a, b], block_log)
