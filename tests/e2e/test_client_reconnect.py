"""The Python client's ``events()`` across a SIGKILL of the server and its restart on the
same data directory and port: the run resumes (G8) and the client, reconnecting by
itself, yields every stored event exactly once, in order, ending with the final one."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import KINDS, open_client
from tests.support.runs import stored_log, uid
from tests.support.server import ServerProcess, demo_input, wait_for


@pytest.mark.parametrize("kind", KINDS)
async def test_events_survive_a_server_kill_and_restart(
        server_factory: Any, tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    first: ServerProcess = server_factory("--keepalive", "2", data_dir=data)
    port = first.url.rsplit(":", 1)[1]
    thread, run = uid("t"), uid("r")
    seen: list[tuple[int, dict[str, Any]]] = []
    async with open_client(kind, first.url, retry_for=120) as c:
        await c.call("run", "demo", demo_input(thread, run, steps=4, step_delay_ms=300,
                                               tokens_per_message=6, token_delay_ms=10))
        reader = asyncio.create_task(c.events(run, into=seen))

        async def tool_running() -> bool:
            return any(e["type"] == "TOOL_CALL_END" for _, e in seen)

        await wait_for(tool_running)
        first.kill()  # mid-run, inside a tool's effect; the client's connection drops too
        killed_at = len(seen)
        second: ServerProcess = server_factory("--keepalive", "2", "--port", port,
                                               data_dir=data)
        events = await asyncio.wait_for(reader, 180)  # a guard against a hang only
        record = await c.call("wait", run)

    assert events is seen and len(events) > killed_at
    assert [s for s, _ in events] == list(range(1, record.last_seq + 1)), "each seq once"
    assert events[-1][1]["type"] == "RUN_FINISHED" and record.status == "succeeded"
    assert record.attempts >= 2, "the run was resumed by the restarted server"
    async with second.client() as http:
        stored = await stored_log(http, run)
    assert [e for _, e in events] == [f.event for f in stored]
    steps = Counter(line.split()[1] for line in second.effects() if line.split()[0] == run)
    assert steps == Counter({"1": 1, "2": 1, "3": 1, "4": 1}), "each step's tool ran once"
