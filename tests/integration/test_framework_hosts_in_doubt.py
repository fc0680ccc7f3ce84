"""The framework hosts (and the Agent Framework adapter) with a tool cut off by SIGKILL:
the resumed run asks a person whether it happened, and the answer decides, through the
framework's own loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import (
    FEATURES,
    Host,
    body,
    executed,
    model,
    with_maf,
)
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import collect, wait_for

__all__ = ["model"]  # the scripted model each test gets (a fixture)


@pytest.mark.parametrize("said", ["happened", "run_again"])
@pytest.mark.parametrize("host", with_maf())
async def test_a_tool_cut_off_by_sigkill_asks_a_person(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host,
        said: str) -> None:
    """SIGKILL while a tool runs: the resumed run asks whether it happened; the answer
    decides (the person's result, or one more run), through the framework's own loop."""
    data, log = tmp_path / "doubt-data", tmp_path / "tools.log"
    slow = {"HOST_SLOW_SECONDS": "60"}
    srv = server_factory("--agent", f"{host.name}={host.factory}", data_dir=data, env={
        host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
        "HOST_TOOL_LOG": str(log), **slow})
    model.replies = [Reply(calls=[Call("slow_step", {"label": "A"}, id="d-1")])]
    async with srv.client() as c:
        await collect(c, "POST", f"/agents/{host.name}", limit=1,
                      json=body("d-t", "d-r", "go"))

        async def in_the_tool() -> bool:
            return executed(log) == ["slow_step start A"]

        await wait_for(in_the_tool)
    srv.kill()
    srv = server_factory("--agent", f"{host.name}={host.factory}", data_dir=data, env={
        host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
        "HOST_TOOL_LOG": str(log)})
    async with srv.client() as c:
        record = await wait_final(c, "d-r")
        assert record["status"] == "interrupted" and record["attempts"] == 2, (
            record, executed(log), (await c.get("/threads/d-t")).json()["messages"],
            "\n".join(srv.log[-30:]))
        [question] = (await c.get("/threads/d-t")).json()["interrupts"]
        assert question["reason"] == "confirmation" and question["toolCallId"] == "d-1"
        assert question["metadata"]["tool"] == "slow_step"
        assert question["metadata"]["args"] == {"label": "A"}
        assert executed(log) == ["slow_step start A"]
        model.replies = [Reply(text="Settled.")]
        payload = {"answer": "happened", "result": "done by hand"} if said == "happened" \
            else {"answer": "run_again"}
        r = await c.post("/threads/d-t/resume", json={"runId": "d-c", "resume": [
            {"interruptId": question["id"], "status": "resolved", "payload": payload}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "d-c")
        assert done["status"] == "succeeded", (done, "\n".join(srv.log[-30:]))
        thread = (await c.get("/threads/d-t")).json()
        events = [f.event for f in await stored_log(c, "d-c")]
    one_result_per_call(thread["messages"])
    [result] = [m["content"] for m in thread["messages"] if m.get("toolCallId") == "d-1"]
    if said == "happened":
        assert executed(log) == ["slow_step start A"], "never ran again"
        assert "done by hand" in result
    else:
        assert executed(log) == ["slow_step start A", "slow_step start A",
                                 "slow_step done A"], "ran once more"
        assert "A done" in result
    assert thread["messages"][-1]["content"] == "Settled."
    sent = model.requests[-1]["messages"]
    assert any(m.get("tool_call_id") == host.sent_call_id("d-1") and result in str(
        m.get("content")) for m in sent), "the model saw the settled result"
    assert_valid(events, FEATURES)
