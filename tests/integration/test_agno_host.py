"""What only the Agno host has, driven by the real ``agno`` package through a real
``outlast serve``: Agno's own session (its ``session_state``) kept in the thread, so a
new process continues it, one thread's never another's; and a served object that is
not an Agno agent refused with a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import HOSTS, body, executed, model, params
from tests.support.server import ServerProcess, collect

__all__ = ["model"]  # the scripted model each test gets (a fixture)

pytestmark = pytest.mark.parametrize("host", params("agno"))


def _serve(server_factory: Any, model: FakeOpenAI, log: Path, data: Path,
           target: str) -> ServerProcess:
    host = HOSTS["agno"]
    srv: ServerProcess = server_factory(
        "--agent", f"{host.name}={host.factory}", data_dir=data,
        env={host.variable: target, "OUTLAST_OPENAI_BASE_URL": model.url,
             "HOST_TOOL_LOG": str(log)})
    return srv


async def _visit(srv: ServerProcess, model: FakeOpenAI, thread: str, run: str) -> str:
    model.replies = [Reply(calls=[Call("note_visit", {}, id=f"call_{run}")]),
                     Reply(text="Noted.")]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/agno", json=body(thread, run, "visit"))
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
    [result] = [f.event["content"] for f in frames if f.event["type"] == "TOOL_CALL_RESULT"]
    return str(result)


async def test_agnos_session_state_continues_in_a_new_process(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Any) -> None:
    data, log = tmp_path / "data", tmp_path / "tools.log"
    target = "tests.support.agno_agents:visits_agent"
    srv = _serve(server_factory, model, log, data, target)
    assert await _visit(srv, model, "v-a", "v-1") == "visit 1"
    srv.stop()
    srv = _serve(server_factory, model, log, data, target)  # its memory is gone
    assert await _visit(srv, model, "v-a", "v-2") == "visit 2"
    # Another thread has its own session.
    assert await _visit(srv, model, "v-b", "v-3") == "visit 1"
    assert executed(log) == ["note_visit 1", "note_visit 2", "note_visit 1"]
    # The conversation went on too: the model saw the first turn in the second.
    second = model.requests[2]["messages"]
    assert [m["role"] for m in second].count("user") == 2, json.dumps(second)


async def test_an_object_that_is_not_an_agno_agent_is_refused(host: Any) -> None:
    from outlast.agents.agno import AgnoHost, serves

    assert not serves(object())
    with pytest.raises(TypeError, match=r"agno\.agent\.Agent"):
        AgnoHost(object())
