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


ANSWERS = {"happened": {"answer": "happened", "result": "done by hand"},
           "run_again": {"answer": "run_again"}}


@pytest.mark.parametrize("host", with_maf())
async def test_a_tool_cut_off_by_sigkill_asks_a_person(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    """SIGKILL while a tool runs: the resumed run asks whether it happened; the answer
    decides (the person's result, or one more run), through the framework's own loop.
    Both answers on one server's life: two threads, each with its tool cut off. The
    second thread's run starts while the first one's tool blocks its thread: a host
    that called a synchronous tool on the event loop (ADK's default) would stall it."""
    data, log = tmp_path / "doubt-data", tmp_path / "tools.log"

    def serve(**env: str) -> Any:
        return server_factory("--agent", f"{host.name}={host.factory}", data_dir=data, env={
            host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
            "HOST_TOOL_LOG": str(log), **env})

    srv = serve(HOST_SLOW_SECONDS="60")
    async with srv.client() as c:
        for said in ANSWERS:
            model.replies = [Reply(calls=[Call("slow_step", {"label": said}, id=f"d-{said}")])]
            await collect(c, "POST", f"/agents/{host.name}", limit=1,
                          json=body(f"d-t-{said}", f"d-r-{said}", "go"))

            async def in_the_tool(said: str = said) -> bool:
                return f"slow_step start {said}" in executed(log)

            await wait_for(in_the_tool)
    srv.kill()
    assert executed(log) == [f"slow_step start {said}" for said in ANSWERS]
    srv = serve()
    async with srv.client() as c:
        for said, payload in ANSWERS.items():
            thread = await settled(c, model, srv, said, payload)
            [result] = [m["content"] for m in thread["messages"]
                        if m.get("toolCallId") == f"d-{said}"]
            ran = [line for line in executed(log) if line.endswith(f" {said}")]
            if said == "happened":
                assert ran == ["slow_step start happened"], "never ran again"
                assert "done by hand" in result
            else:
                assert ran == ["slow_step start run_again", "slow_step start run_again",
                               "slow_step done run_again"], "ran once more"
                assert "run_again done" in result
            sent = model.requests[-1]["messages"]
            assert any(m.get("tool_call_id") == host.sent_call_id(f"d-{said}") and result in
                       str(m.get("content")) for m in sent), (said, "the model saw the result")


async def settled(c: Any, model: FakeOpenAI, srv: Any, said: str,
                  payload: dict[str, Any]) -> dict[str, Any]:
    """The resumed run of thread ``d-t-<said>`` asks about its tool; the answer ``payload``
    settles it in a continuation. The thread after it."""
    record = await wait_final(c, f"d-r-{said}")
    assert record["status"] == "interrupted" and record["attempts"] == 2, (
        said, record, (await c.get(f"/threads/d-t-{said}")).json()["messages"],
        "\n".join(srv.log[-30:]))
    [question] = (await c.get(f"/threads/d-t-{said}")).json()["interrupts"]
    assert question["reason"] == "confirmation" and question["toolCallId"] == f"d-{said}"
    assert question["metadata"]["tool"] == "slow_step"
    assert question["metadata"]["args"] == {"label": said}
    model.replies = [Reply(text="Settled.")]
    r = await c.post(f"/threads/d-t-{said}/resume", json={"runId": f"d-c-{said}", "resume": [
        {"interruptId": question["id"], "status": "resolved", "payload": payload}]})
    assert r.status_code == 200, r.text
    done = await wait_final(c, f"d-c-{said}")
    assert done["status"] == "succeeded", (said, done, "\n".join(srv.log[-30:]))
    thread: dict[str, Any] = (await c.get(f"/threads/d-t-{said}")).json()
    assert_valid([f.event for f in await stored_log(c, f"d-c-{said}")], FEATURES)
    one_result_per_call(thread["messages"])
    assert thread["messages"][-1]["content"] == "Settled.", said
    return thread
