"""The framework hosts across a SIGKILL mid-reply, each driven by its real package
through a real ``outlast serve``: the tool's side effect counted once, one answer, the cut
reply never sent back to the model, on the resumed attempt or on a later turn. An
approval answered after a restart: test_framework_hosts_restarts.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.hosts import FEATURES, Host, body, executed, model, start, with_maf
from tests.support.runs import one_result_per_call, stored_log, wait_final, wait_streamed
from tests.support.server import collect

__all__ = ["model"]  # the scripted model each test gets (a fixture)


@pytest.mark.parametrize("host", with_maf())
async def test_sigkill_mid_reply_resumes_with_the_tool_run_once_and_one_answer(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path, host: Host) -> None:
    data, log = tmp_path / "kill-data", tmp_path / "tools.log"
    srv = start(server_factory, host, model, log, data_dir=data)
    model.replies = [
        Reply(text="Checking.", calls=[Call("get_weather", {"city": "Lima"}, id="p-k1")]),
        Reply(text=" ".join(f"word{i}" for i in range(300)), token_delay=0.05),
        Reply(text="The one final answer."),
    ]
    async with srv.client() as c:
        await collect(c, "POST", f"/agents/{host.name}", limit=1,
                      json=body("p-kill", "p-k", "go"))
        await wait_streamed(c, "p-k", "word5")
    srv.kill()
    assert executed(log) == ["get_weather Lima"]
    srv = start(server_factory, host, model, log, data_dir=data)
    async with srv.client() as c:
        done = await wait_final(c, "p-k")
        assert done["status"] == "succeeded" and done["attempts"] == 2, done["error"]
        thread = (await c.get("/threads/p-kill")).json()
        events = [f.event for f in await stored_log(c, "p-k")]
        resumed = model.requests[-1]["messages"]
        # A later turn of the thread: the cut reply stays out of every request.
        model.replies = [Reply(text="Anything else?")]
        _, more = await collect(c, "POST", f"/agents/{host.name}",
                                json=body("p-kill", "p-k2", "thanks"))
        assert more[-1].event["type"] == "RUN_FINISHED", more[-1].event
    assert executed(log) == ["get_weather Lima"], "the tool ran once"
    messages = thread["messages"]
    one_result_per_call(messages)
    answers = [m for m in messages if m["role"] == "assistant" and m.get("content")
               and not m.get("toolCalls")]
    mark = [(m.get("metadata") or {}).get("finishReason") for m in answers]
    final = [m["content"] for m, f in zip(answers, mark, strict=True) if f != "interrupted"]
    assert final == ["The one final answer."], "one answer"
    cut = [m["content"] for m, f in zip(answers, mark, strict=True) if f == "interrupted"]
    assert len(cut) == 1 and cut[0].startswith("word0 word1")
    # The cut reply never went back to the model, in the resumed attempt or on the later
    # turn; the tool's result and the one answer did.
    later = model.requests[-1]["messages"]
    for sent in (resumed, later):
        assert not any("word0" in str(m.get("content")) for m in sent), sent
        assert any(m.get("tool_call_id") == host.sent_call_id("p-k1") for m in sent), sent
    assert any("The one final answer." in str(m.get("content")) for m in later), later
    assert later[-1]["role"] == "user" and "thanks" in str(later[-1]["content"]), later
    assert_valid(events, FEATURES)
