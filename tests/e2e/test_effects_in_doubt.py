"""Effects in doubt become questions (G9): a tool cut off by SIGKILL between the journal's
"started" and its result may or may not have happened, so the resumed run asks a person
(an interrupt with ``reason: "confirmation"``) instead of failing or running it again.
Each answer — it happened (with the result), run it again, fail the run — does exactly
that, after restarts, on SQLite and PostgreSQL; answers of the wrong shape, for another
thread, or given twice are refused with a typed error and change nothing.

The agent is the ChatAgent against the scripted OpenAI-compatible server; its
``slow_step`` tool logs its start and its end to ``$CHAT_TOOL_LOG``, so the count of
"done" lines says from outside how many times the effect ran to completion.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import one_result_per_call, uid, wait_final
from tests.support.server import ServerProcess, collect, wait_for

AGENT = "chat=tests.support.chat_agents:factory"
STARTED = "slow_step start A"
DONE = "slow_step done A"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.001).start()
    yield fake
    await fake.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    if request.param == "sqlite":
        return ()
    # A restarted process cannot prove the killed one gone on a shared database: it
    # takes the run over once the lease expires, so a short one.
    return ("--store", request.getfixturevalue("pg_url"), "--lease-ttl", "1")


class Setup:
    """Servers over one store, the scripted model, and the tool's log."""

    def __init__(self, server_factory: Any, model: FakeOpenAI, tmp_path: Path,
                 store_args: tuple[str, ...]) -> None:
        self.factory, self.model, self.store_args = server_factory, model, store_args
        self.data, self.log = tmp_path / "data", tmp_path / "tools.log"

    def start(self, slow: float) -> ServerProcess:
        server: ServerProcess = self.factory(
            "--agent", AGENT, *self.store_args, data_dir=self.data,
            env={"OUTLAST_OPENAI_BASE_URL": self.model.url, "CHAT_TOOL_LOG": str(self.log),
                 "CHAT_SLOW_SECONDS": str(slow)})
        return server

    def executed(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def body(thread: str, run: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": "do step A"}],
            "tools": [], "context": [], "state": {}}


async def cut_off(setup: Setup) -> tuple[ServerProcess, str, str, dict[str, Any]]:
    """Kill the server while ``slow_step`` runs, restart it: the new server, the thread,
    the run, and the question the resumed run asked."""
    setup.model.replies = [Reply(calls=[Call("slow_step", {"label": "A"}, id="call-A")])]
    server = setup.start(slow=60)
    thread, run = uid("t"), uid("r")
    ran = [*setup.executed(), STARTED]
    async with server.client() as c:
        await collect(c, "POST", "/agents/chat", limit=1, json=body(thread, run))

        async def in_the_tool() -> bool:
            return setup.executed() == ran

        await wait_for(in_the_tool)
    server.kill()
    server = setup.start(slow=0)
    async with server.client() as c:
        record = await wait_final(c, run)
        assert record["status"] == "interrupted" and record["attempts"] == 2, record
        view = (await c.get(f"/threads/{thread}")).json()
    assert view["status"] == "interrupted"
    [question] = view["interrupts"]
    assert [i["id"] for i in record["interrupts"]] == [question["id"]]
    assert setup.executed() == ran, "nothing ran again on its own"
    return server, thread, run, question


def answer(question: dict[str, Any], payload: Any, status: str = "resolved"
           ) -> dict[str, Any]:
    return {"runId": uid("cont"), "resume": [
        {"interruptId": question["id"], "status": status, "payload": payload}]}


@pytest.mark.parametrize("said", ["happened", "run_again", "fail", "cancelled"])
async def test_a_person_decides_what_an_effect_in_doubt_did(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path,
        store_args: tuple[str, ...], said: str) -> None:
    if said == "cancelled" and store_args:
        pytest.skip("the store plays no part in reading a cancelled answer: SQLite's case")
    setup = Setup(server_factory, model, tmp_path, store_args)
    server, thread, run, question = await cut_off(setup)
    assert question["reason"] == "confirmation"
    assert question["toolCallId"] == "call-A"
    meta = question["metadata"]
    assert meta == {"kind": "effect_in_doubt", "effect": "tool:call-A", "tool": "slow_step",
                    "args": {"label": "A"}, "attempt": 1, "runId": run}
    assert "slow_step" in question["message"] and "happen" in question["message"]
    assert {o["properties"]["answer"]["const"]
            for o in question["responseSchema"]["oneOf"]} == {"happened", "run_again", "fail"}
    if said == "run_again":  # the question outlives another restart
        server.stop()
        server = setup.start(slow=0)
    model.replies = [Reply(text="Step A is settled.")]
    asked = len(model.requests)
    payload = {"happened": {"answer": "happened", "result": "A was done by hand"},
               "run_again": {"answer": "run_again"}, "fail": {"answer": "fail"},
               "cancelled": None}[said]
    request = answer(question, payload, "cancelled" if said == "cancelled" else "resolved")
    async with server.client() as c:
        r = await c.post(f"/threads/{thread}/resume", json=request)
        assert r.status_code == 200, r.text
        cont = await wait_final(c, request["runId"])
        view = (await c.get(f"/threads/{thread}")).json()
        # Answering again changes nothing.
        again = await c.post(f"/threads/{thread}/resume",
                             json=answer(question, {"answer": "run_again"}))
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "interrupt_not_pending"
    assert view["interrupts"] == []
    one_result_per_call(view["messages"])
    [result] = [m["content"] for m in view["messages"] if m.get("toolCallId") == "call-A"]
    if said == "happened":
        assert cont["status"] == "succeeded", cont
        assert setup.executed() == [STARTED], "the effect never ran again"
        assert result == "A was done by hand"
        assert model.requests[-1]["messages"][-1]["content"] == "A was done by hand"
    elif said == "run_again":
        assert cont["status"] == "succeeded", cont
        assert setup.executed() == [STARTED, STARTED, DONE], "ran once more, to its end"
        assert result == "A done"
    else:
        assert cont["status"] == "failed", cont
        assert cont["error"]["code"] == "effect_uncertain"
        assert "slow_step" in cont["error"]["message"]
        assert setup.executed() == [STARTED], "nothing ran"
        assert len(model.requests) == asked, "the model was not asked again"
    if said != "fail" and said != "cancelled":
        assert view["messages"][-1]["content"] == "Step A is settled."


async def test_wrong_answers_are_refused_and_change_nothing(
        server_factory: Any, model: FakeOpenAI, tmp_path: Path) -> None:
    setup = Setup(server_factory, model, tmp_path, ())
    first, _, _, other_question = await cut_off(setup)  # another thread, on the same store
    first.stop()
    server, thread, _, question = await cut_off(setup)
    assert other_question["id"] != question["id"]
    async with server.client() as c:
        before = (await c.get(f"/threads/{thread}")).json()
        runs_before = (await c.get(f"/threads/{thread}/runs")).json()["runs"]
        bad: list[Any] = [
            "yes", True, None, 1, [], {}, {"approved": True},
            {"answer": "maybe"}, {"answer": 1}, {"answer": "happened"},
            {"answer": "run_again", "result": "x"}, {"answer": "fail", "why": "no"},
            {"answer": "happened", "result": "x", "extra": 1},
        ]
        for payload in bad:
            r = await c.post(f"/threads/{thread}/resume", json=answer(question, payload))
            assert r.status_code == 422, (payload, r.text)
            assert r.json()["error"]["code"] == "invalid_answer", (payload, r.text)
            assert r.json()["error"]["interruptId"] == question["id"]
        # Through the agent endpoint too (AG-UI resume).
        r = await c.post("/agents/chat", json={**body(thread, uid("r")), "messages": [],
                                               "resume": answer(question, "yes")["resume"]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_answer"
        # The other thread's question is not this thread's to answer.
        r = await c.post(f"/threads/{thread}/resume",
                         json=answer(other_question, {"answer": "run_again"}))
        assert r.status_code in (409, 422), r.text
        assert r.json()["error"]["code"] in ("interrupt_not_pending", "resume_incomplete")
        # Not an answer at all: no payload with an unknown status.
        r = await c.post(f"/threads/{thread}/resume",
                         json=answer(question, {"answer": "fail"}, status="maybe"))
        assert r.status_code == 422
        after = (await c.get(f"/threads/{thread}")).json()
        assert after == before
        assert (await c.get(f"/threads/{thread}/runs")).json()["runs"] == runs_before
    assert setup.executed() == [STARTED, STARTED], "neither tool ran again"
