"""The framework hosts across restarts and failures, each driven by its real package
through a real ``outlast serve``: an approval answered after a restart (and a later
turn), and a model stream that breaks mid-reply (the run fails; the partial reply stays
in the thread, marked, and never goes back to the model). A SIGKILL mid-reply:
test_framework_hosts_sigkill.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_every_reattach_valid, assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import (
    FEATURES,
    Host,
    body,
    executed,
    model,
    params,
    start,
    with_maf,
)
from tests.support.runs import one_result_per_call, stored_log, wait_final
from tests.support.server import collect

__all__ = ["model"]  # the scripted model each test gets (a fixture)


@pytest.mark.parametrize("host", params())
async def test_approvals_survive_a_restart(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    """Each of the host's answers (approved, denied, edited) to an approval asked before
    a restart, given after it: one server's life for them all, each on its own thread."""
    data, log = tmp_path / "data", tmp_path / "tools.log"
    path = f"/agents/{host.name}"
    srv = start(server_factory, host, model, log, data_dir=data)
    asked: dict[str, dict[str, Any]] = {}
    async with srv.client() as c:
        for case, *_ in host.answers:
            call = f"p-mail-{case}"
            model.replies = [Reply(text="I will send it.", calls=[
                Call("send_email", {"to": "ann@example.com", "subject": "Hi"}, id=call)])]
            _, frames = await collect(c, "POST", path,
                                      json=body(f"p-ap-{case}", f"p-ap1-{case}", "email ann"))
            finished = frames[-1].event
            assert finished["outcome"]["type"] == "interrupt", (case, finished)
            [asked[case]] = finished["outcome"]["interrupts"]
            assert asked[case]["toolCallId"] == call, case
            assert "ann@example.com" in json.dumps(asked[case]), case
            assert_valid([f.event for f in frames], (*FEATURES, "human-in-the-loop"))
    assert executed(log) == [], "nothing runs before the person answers"
    srv.stop()
    srv = start(server_factory, host, model, log, data_dir=data)  # its memory is gone
    async with srv.client() as c:
        for case, payload, runs, said in host.answers:
            before = len(executed(log))
            await answered_after_restart(c, model, path, case, asked[case], payload)
            assert executed(log)[before:] == runs, (case, executed(log))
            thread = (await c.get(f"/threads/p-ap-{case}")).json()
            one_result_per_call(thread["messages"])
            [result] = [m for m in thread["messages"]
                        if m.get("toolCallId") == f"p-mail-{case}"]
            assert said in result["content"], (case, result)
            assert thread["messages"][-1]["content"] == "Anything else?", case
            assert thread["interrupts"] == [], case


async def answered_after_restart(c: Any, model: FakeOpenAI, path: str, case: str,
                                 interrupt: dict[str, Any], payload: dict[str, Any]) -> None:
    """Answer an approval the previous process asked; the continuation and a later turn."""
    model.replies = [Reply(text="Done.")]
    r = await c.post(f"/threads/p-ap-{case}/resume", json={"resume": [{
        "interruptId": interrupt["id"], "status": "resolved", "payload": payload}]})
    assert r.status_code == 200, (case, r.text)
    run_id = r.json()["run"]["runId"]
    done = await wait_final(c, run_id)
    assert done["status"] == "succeeded", (case, done)
    continuation = [f.event for f in await stored_log(c, run_id)]
    await assert_every_reattach_valid(c, run_id, FEATURES, owed=[f"p-mail-{case}"])
    # It answers the previous run's call (docs/spec.md, "Streams a client continues").
    first = next(i for i, e in enumerate(continuation) if e["type"] == "TOOL_CALL_RESULT")
    assert_valid(continuation, FEATURES, allowed={("AGUI207", first)})
    thread = (await c.get(f"/threads/p-ap-{case}")).json()
    assert thread["messages"][-1]["content"] == "Done.", case
    # A later turn: the model sees the whole conversation once.
    model.replies = [Reply(text="Anything else?")]
    _, more = await collect(c, "POST", path,
                            json=body(f"p-ap-{case}", f"p-ap3-{case}", "thanks"))
    assert more[-1].event["type"] == "RUN_FINISHED", (case, more[-1].event)
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles.count("user") == 2 and roles[-1] == "user", (case, roles)


@pytest.mark.parametrize("host", with_maf())
async def test_a_reply_cut_off_by_a_failure_never_goes_back_to_the_model(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    srv = start(server_factory, host, model, tmp_path / "tools.log",
                data_dir=tmp_path / "data")
    model.replies = [Reply(text=" ".join(f"word{i}" for i in range(40)), cut_after=12)]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", f"/agents/{host.name}",
                                  json=body("p-fail", "p-f1", "go"))
        assert frames[-1].event["type"] == "RUN_ERROR", [f.event["type"] for f in frames]
        assert (await c.get("/runs/p-f1")).json()["status"] == "failed"
        model.replies = [Reply(text="A fresh answer.")]
        _, more = await collect(c, "POST", f"/agents/{host.name}",
                                json=body("p-fail", "p-f2", "try again"))
        assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
        thread = (await c.get("/threads/p-fail")).json()
    # The partial reply is in the thread, marked as cut off by the failure ...
    [cut] = [m for m in thread["messages"] if "word0" in str(m.get("content"))]
    assert cut["role"] == "assistant" and cut["metadata"]["finishReason"] == "error", cut
    assert thread["messages"][-1]["content"] == "A fresh answer."
    # ... and the later turn sent the model both user messages, not the partial reply.
    later = model.requests[-1]["messages"]
    assert not any("word0" in str(m.get("content")) for m in later), later
    said = [str(m.get("content")) for m in later if m["role"] == "user"]
    assert any("go" in s for s in said) and "try again" in said[-1], later
    assert_valid([f.event for f in frames], FEATURES)
