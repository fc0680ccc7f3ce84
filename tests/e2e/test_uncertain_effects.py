"""A side effect cut off by a crash (G9): the journal knows it started but not whether
it finished. With a reconcile check the resumed run finds out by itself; without one
the engine asks a person (an ``effect_in_doubt`` confirmation) and does what they say.

Real server processes, real SIGKILL while the demo's tool is running (the kill lands
after the journal recorded the start and before the tool wrote its ``effects.log`` line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import cli
from tests.support.runs import (
    effect_counts,
    effect_status,
    one_result_per_call,
    stored_log,
    uid,
    wait_final,
)
from tests.support.server import ServerProcess, collect, demo_input, wait_for

# Long enough that the kill surely lands inside step 1's tool.
SLOW_TOOL: dict[str, Any] = {"steps": 2, "step_delay_ms": 1500}


async def kill_inside_the_first_tool(server_factory: Any, data_dir: Path,
                                     **knobs: Any) -> tuple[ServerProcess, str, str]:
    """Start a run, SIGKILL the server while step 1's tool runs, restart; the new server."""
    server: ServerProcess = server_factory("--keepalive", "2", data_dir=data_dir)
    thread_id, run_id = uid("t"), uid("r")
    async with server.client() as c:
        resp, _ = await collect(c, "POST", "/agents/demo", limit=1,
                                json=demo_input(thread_id, run_id, **SLOW_TOOL, **knobs))
        assert resp.status_code == 200

        async def in_the_tool() -> bool:
            return effect_status(server, run_id, "step-1") == "started"

        await wait_for(in_the_tool)
        server.kill()
    assert server.effects() == []  # the tool never got to write its line
    return server_factory("--keepalive", "2", data_dir=data_dir), thread_id, run_id


@pytest.mark.parametrize("said", ["run_again", "happened"])
async def test_a_tool_cut_off_by_a_crash_asks_before_running_again(
        server_factory: Any, tmp_path: Path, said: str) -> None:
    server, thread_id, run_id = await kill_inside_the_first_tool(
        server_factory, tmp_path / "store", reconcile=False)
    async with server.client() as c:
        record = await wait_final(c, run_id)
        assert record["status"] == "interrupted" and record["attempts"] == 2
        thread = (await c.get(f"/threads/{thread_id}")).json()
        assert thread["status"] == "interrupted"
        [interrupt] = thread["interrupts"]
        assert interrupt["reason"] == "confirmation"
        meta = interrupt["metadata"]
        assert (meta["kind"], meta["effect"], meta["attempt"]) == ("effect_in_doubt",
                                                                   "step-1", 1)
        assert meta["tool"] == "search_docs" and meta["args"]["step"] == 1
        assert [i["id"] for i in record["interrupts"]] == [interrupt["id"]]
        # The question's call waits for its answer; nothing ran a second time on its own.
        assert not any(m.get("toolCallId") == interrupt["toolCallId"]
                       for m in thread["messages"] if m["role"] == "tool")
        assert effect_counts(server) == {}
        assert effect_status(server, run_id, "step-1") == "started"

        if said == "run_again":
            cont = uid("cont")
            r = await c.post(f"/threads/{thread_id}/resume", json={"runId": cont, "resume": [{
                "interruptId": interrupt["id"], "status": "resolved",
                "payload": {"answer": "run_again"}}]})
            assert r.status_code == 200, r.text
        else:  # from the command line, as an operator would
            shown = cli(server, "thread", thread_id)
            assert "did it happen?" in shown.stdout
            assert f"outlast answer {thread_id} --happened --result JSON" in shown.stdout
            out = cli(server, "answer", thread_id, "--happened", "--result", '{"found": 3}',
                      "--json")
            assert out.returncode == 0, out.stderr
            cont = json.loads(out.stdout)["runId"]
        assert (await wait_final(c, cont))["status"] == "succeeded"

        thread = (await c.get(f"/threads/{thread_id}")).json()
        assert thread["status"] == "idle" and thread["interrupts"] == []
        one_result_per_call(thread["messages"])
        results = {m["toolCallId"]: m["content"] for m in thread["messages"]
                   if m["role"] == "tool"}
        if said == "run_again":
            assert effect_counts(server) == {(cont, 1): 1, (cont, 2): 1}
        else:
            assert effect_counts(server) == {(cont, 2): 1}
            assert results[interrupt["toolCallId"]] == '{"found": 3}'
        assert [t["status"] for t in thread["state"]["todos"]] == ["done", "done"]


async def test_a_tool_cut_off_by_a_crash_is_reconciled_without_asking(
        server_factory: Any, tmp_path: Path) -> None:
    server, thread_id, run_id = await kill_inside_the_first_tool(
        server_factory, tmp_path / "store")
    async with server.client() as c:
        record = await wait_final(c, run_id)
        assert record["status"] == "succeeded" and record["attempts"] == 2
        # The reconcile check found no trace of the tool, so it ran once more: once in all.
        assert effect_counts(server) == {(run_id, 1): 1, (run_id, 2): 1}
        assert effect_status(server, run_id, "step-1") == "completed"
        log = await stored_log(c, run_id)
        assert [f.id for f in log] == list(range(1, record["lastSeq"] + 1))
        thread = (await c.get(f"/threads/{thread_id}")).json()
        assert thread["interrupts"] == [] and thread["status"] == "idle"
        one_result_per_call(thread["messages"])
