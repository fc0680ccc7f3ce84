"""Crashes are survived (G8) without losing or changing what anyone saw (G2) and
without running a side effect twice (G9): real ``outlast serve`` processes, real
SIGKILL at seeded random points, restarts on the same data directory.

Set ``OUTLAST_CRASH_SEED`` to replay one seed's schedule.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.protocol.fold import ThreadFold
from tests.support.runs import (
    effect_counts,
    effect_status,
    one_result_per_call,
    run_record,
    stored_log,
    uid,
    wait_final,
)
from tests.support.server import Frame, ServerProcess, collect, demo_input, sse_frames, wait_for

SEEDS = [int(os.environ["OUTLAST_CRASH_SEED"])] if os.environ.get("OUTLAST_CRASH_SEED") \
    else [11, 23, 37, 41]
TRIALS_PER_SEED = 5 if len(SEEDS) > 1 else 20
RUNS_PER_TRIAL = 4


@dataclass
class Watcher:
    """One client connection held open across a kill; keeps every frame it saw."""

    frames: list[Frame] = field(default_factory=list)
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    status: int | None = None
    task: asyncio.Task[None] | None = None

    def start(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Watcher:
        self.task = asyncio.create_task(self._read(c, method, url, **kwargs))
        return self

    async def _read(self, c: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> None:
        try:
            async with c.stream(method, url, **kwargs) as resp:
                self.status = resp.status_code
                self.opened.set()
                async for f in sse_frames(resp):
                    self.frames.append(f)
        except httpx.HTTPError:
            pass  # the server died under us: what we saw so far is the record
        finally:
            self.opened.set()

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task


@dataclass
class TrackedRun:
    thread_id: str
    run_id: str
    steps: int
    watchers: list[Watcher] = field(default_factory=list)
    # (step, verdict) when the run asks for approval; a person answers it with a
    # continuation run of a known id, while the kills go on.
    approval: tuple[int, str] | None = None

    @property
    def continuation(self) -> str:
        return f"{self.run_id}-answer"

    def expected_effects(self) -> Counter[int]:
        """How many times each step's tool must have run over the thread's runs."""
        denied = self.approval[0] if self.approval and self.approval[1] == "deny" else None
        return Counter({s: 1 for s in range(1, self.steps + 1) if s != denied})


async def check_log(c: httpx.AsyncClient, run_id: str, watchers: list[Watcher],
                    status: str, context: str) -> list[Frame]:
    """The run ended as expected, its log is contiguous and contains everything any
    client saw, unchanged (G2)."""
    record = await wait_final(c, run_id)
    assert record["status"] == status, (context, record)
    log = await stored_log(c, run_id)
    assert [f.id for f in log] == list(range(1, record["lastSeq"] + 1)), context
    assert log[-1].event["type"] == "RUN_FINISHED", context
    for w in watchers:
        for f in w.frames:
            if f.id is not None:  # synthesized frames (a mid-run RUN_STARTED) carry no id
                assert log[f.id - 1].event == f.event, (context, run_id, f.id)
    for f in log:
        if f.event["type"] == "CUSTOM" and f.event["name"] == "outlast.resumed":
            assert 2 <= f.event["value"]["attempt"] <= record["attempts"], context
            assert f.event["value"]["resumedFromSeq"] < f.id, context
    return log


async def check_thread(c: httpx.AsyncClient, server: ServerProcess, run: TrackedRun,
                       answers: dict[str, list[Watcher]], context: str) -> list[list[Frame]]:
    """Every run of the thread ended as it should, the logs fold to the thread's snapshot,
    no tool call has two results, and each step's tool ran exactly once over the runs."""
    logs = [await check_log(c, run.run_id, run.watchers,
                            "interrupted" if run.approval else "succeeded", context)]
    if run.approval:
        logs.append(await check_log(c, run.continuation, answers.get(run.run_id, []),
                                    "succeeded", context))
    fold = ThreadFold()
    for log in logs:
        for f in log:
            fold.apply(f.event)
    thread = (await c.get(f"/threads/{run.thread_id}")).json()
    assert thread["status"] == "idle" and thread["activeRun"] is None, context
    assert thread["interrupts"] == [], context
    assert fold.messages == thread["messages"], context
    assert fold.state == thread["state"], context
    one_result_per_call(thread["messages"])
    counts = effect_counts(server)
    ran = Counter({step: n for (rid, step), n in counts.items()
                   if rid in (run.run_id, run.continuation)})
    assert ran == run.expected_effects(), (context, ran)
    if run.approval and run.approval[1] == "edit":
        results = " ".join(m["content"] for m in thread["messages"] if m["role"] == "tool")
        assert "edited_by_a_person.py" in results, context
    return logs


@dataclass
class Person:
    """Answers a run's approval as soon as it is asked, through whichever server is up."""

    c: httpx.AsyncClient
    answers: dict[str, list[Watcher]] = field(default_factory=dict)

    async def answer(self, run: TrackedRun) -> None:
        assert run.approval is not None
        step, verdict = run.approval
        payload: dict[str, Any] = {"approved": verdict != "deny"}
        if verdict == "edit":
            payload["editedArgs"] = {"step": step, "target": "edited_by_a_person.py"}
        while True:
            try:
                c = self.c
                if (await c.get(f"/runs/{run.continuation}")).status_code == 200:
                    return  # admitted (perhaps by a request whose answer the kill ate)
                pending = (await c.get(f"/threads/{run.thread_id}")).json()["interrupts"]
                if pending:
                    # The same runId on every try: a retry attaches instead of re-answering.
                    w = Watcher().start(c, "POST", f"/threads/{run.thread_id}/resume",
                                        headers={"Accept": "text/event-stream"},
                                        json={"runId": run.continuation, "resume": [{
                                            "interruptId": pending[0]["id"],
                                            "status": "resolved", "payload": payload}]})
                    self.answers.setdefault(run.run_id, []).append(w)
                    await w.opened.wait()
                    if w.status == 200:
                        return
            except httpx.HTTPError:
                pass  # the server is down; ask the next one
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("seed", SEEDS)
async def test_sigkill_at_random_points(server_factory: Any, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data_dir = tmp_path / "store"
    server: ServerProcess = server_factory("--keepalive", "2", data_dir=data_dir)
    finished: list[tuple[TrackedRun, list[list[Frame]]]] = []
    kills = 0
    async with AsyncExitStack() as stack:
        c = await stack.enter_async_context(server.client())
        person = Person(c)
        for trial in range(TRIALS_PER_SEED):
            context = f"seed {seed} trial {trial}"
            runs: list[TrackedRun] = []
            for i in range(RUNS_PER_TRIAL):
                knobs: dict[str, Any] = {"steps": rng.randint(2, 4),
                                         "step_delay_ms": rng.choice([20, 60, 120]),
                                         "tokens_per_message": rng.randint(2, 6),
                                         "token_delay_ms": rng.choice([0, 5, 15])}
                run = TrackedRun(uid("t"), uid("r"), knobs["steps"])
                if i == 0 and rng.random() < 0.5:
                    run.approval = (rng.randint(1, run.steps),
                                    rng.choice(["approve", "deny", "edit"]))
                    knobs["approve_at"] = [run.approval[0]]
                w = Watcher().start(c, "POST", "/agents/demo",
                                    json=demo_input(run.thread_id, run.run_id, **knobs))
                run.watchers.append(w)
                runs.append(run)
            for run in runs:
                await run.watchers[0].opened.wait()
                assert run.watchers[0].status == 200, context
            people = [asyncio.create_task(person.answer(r)) for r in runs if r.approval]
            # One or two kills while the runs go on; after a restart, new clients
            # follow the runs so that the next kill also lands under open streams.
            for n in range(rng.choice([1, 1, 2])):
                await asyncio.sleep(rng.uniform(0.0, 0.6 if n == 0 else 0.3))
                server.kill()
                kills += 1
                server = server_factory("--keepalive", "2", data_dir=data_dir)
                c = person.c = await stack.enter_async_context(server.client())
                for run in runs:
                    run.watchers.append(
                        Watcher().start(c, "GET", f"/runs/{run.run_id}/events"))
            await asyncio.wait_for(asyncio.gather(*people), 30)
            for run in runs:
                finished.append((run, await check_thread(c, server, run, person.answers,
                                                         context)))
                for w in run.watchers + person.answers.get(run.run_id, []):
                    await w.close()
            busy = (await c.get("/threads", params={"status": "busy"})).json()["threads"]
            assert busy == [], context
        # Later crashes changed nothing of earlier runs; no step ran twice anywhere.
        assert kills >= TRIALS_PER_SEED
        for run, logs in finished:
            ids = [run.run_id, run.continuation][:len(logs)]
            assert [await stored_log(c, rid) for rid in ids] == logs
        counts = effect_counts(server)
        assert max(counts.values()) == 1
        assert sum(counts.values()) == sum(sum(r.expected_effects().values())
                                           for r, _ in finished)
    # The schedule really lands kills mid-run: many runs had to resume.
    resumed = [run for run, logs in finished
               if any(f.event.get("name") == "outlast.resumed" for log in logs for f in log)]
    assert len(resumed) >= len(finished) // 3, (len(resumed), len(finished))
    assert any(run.approval for run, _ in finished)


async def test_sigkill_while_a_run_is_queued_behind_another(server_factory: Any,
                                                            tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    server: ServerProcess = server_factory("--keepalive", "2", data_dir=data_dir)
    thread_id, first, second = uid("t"), uid("first"), uid("second")
    async with server.client() as c:
        head = Watcher().start(c, "POST", "/agents/demo", json=demo_input(
            thread_id, first, steps=3, step_delay_ms=250))
        await head.opened.wait()
        queued = Watcher().start(c, "POST", "/agents/demo",
                                 headers={"Outlast-Multitask": "enqueue"},
                                 json=demo_input(thread_id, second, steps=2))
        await queued.opened.wait()
        assert queued.status == 200

        async def first_working() -> bool:
            return bool((await run_record(c, first))["lastSeq"] > 12)

        await wait_for(first_working)
        assert (await run_record(c, second))["status"] == "queued"
        server.kill()
        await head.close()
        await queued.close()

    server = server_factory("--keepalive", "2", data_dir=data_dir)
    async with server.client() as c:
        a = TrackedRun(thread_id, first, 3, [head])
        b = TrackedRun(thread_id, second, 2, [queued])
        log_a = await check_run_unfolded(c, server, a)
        await check_run_unfolded(c, server, b)
        ra, rb = await run_record(c, first), await run_record(c, second)
        assert ra["attempts"] == 2 and rb["attempts"] == 1
        assert rb["startedAt"] >= ra["finishedAt"]
        assert any(f.event.get("name") == "outlast.resumed" for f in log_a)
        thread = (await c.get(f"/threads/{thread_id}")).json()
        assert thread["status"] == "idle"


async def check_run_unfolded(c: httpx.AsyncClient, server: ServerProcess,
                             run: TrackedRun) -> list[Frame]:
    """``check_run`` for a thread with several runs: the thread snapshot is the last run's."""
    record = await wait_final(c, run.run_id)
    assert record["status"] == "succeeded", record
    log = await stored_log(c, run.run_id)
    assert [f.id for f in log] == list(range(1, record["lastSeq"] + 1))
    for w in run.watchers:
        for f in w.frames:
            if f.id is not None:
                assert log[f.id - 1].event == f.event
    counts = effect_counts(server)
    assert [counts[(run.run_id, s)] for s in range(1, run.steps + 1)] == [1] * run.steps
    return log


async def test_sigkill_while_a_thread_waits_on_an_interrupt(server_factory: Any,
                                                            tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    server: ServerProcess = server_factory("--keepalive", "2", data_dir=data_dir)
    thread_id, run_id = uid("t"), uid("r")
    async with server.client() as c:
        _, frames = await collect(c, "POST", "/agents/demo",
                                  json=demo_input(thread_id, run_id, approve_at=[2]))
        assert frames[-1].event["outcome"]["type"] == "interrupt"
        before = (await c.get(f"/threads/{thread_id}")).json()
    server.kill()

    server = server_factory("--keepalive", "2", data_dir=data_dir)
    async with server.client() as c:
        after = (await c.get(f"/threads/{thread_id}")).json()
        assert after == before
        assert after["status"] == "interrupted"
        [interrupt] = after["interrupts"]
        assert await stored_log(c, run_id) == frames
        listed = (await c.get("/threads", params={"status": "interrupted"})).json()["threads"]
        assert [t["threadId"] for t in listed] == [thread_id]

        cont = uid("cont")
        r = await c.post(f"/threads/{thread_id}/resume", json={
            "runId": cont,
            "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                        "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        assert (await wait_final(c, cont))["status"] == "succeeded"
        counts = effect_counts(server)
        assert counts == {(run_id, 1): 1, (cont, 2): 1, (cont, 3): 1}
        thread = (await c.get(f"/threads/{thread_id}")).json()
        results = [m for m in thread["messages"] if m.get("toolCallId") == interrupt["toolCallId"]]
        assert len(results) == 1


@pytest.mark.parametrize("policy", [("--crash-policy", "fail"), ("--max-attempts", "1")],
                         ids=["crash-policy-fail", "attempts-used-up"])
async def test_a_crashed_run_that_may_not_resume_ends_with_a_clear_error(
        server_factory: Any, tmp_path: Path, policy: tuple[str, str]) -> None:
    data_dir = tmp_path / "store"
    args = ("--keepalive", "2", *policy)
    server: ServerProcess = server_factory(*args, data_dir=data_dir)
    thread_id, run_id = uid("t"), uid("r")
    async with server.client() as c:
        watcher = Watcher().start(c, "POST", "/agents/demo", json=demo_input(
            thread_id, run_id, steps=3, step_delay_ms=300))
        await watcher.opened.wait()

        async def working() -> bool:
            return bool((await run_record(c, run_id))["lastSeq"] > 12)

        await wait_for(working)
        server.kill()
        await watcher.close()

    server = server_factory(*args, data_dir=data_dir)
    async with server.client() as c:
        record = await wait_final(c, run_id)
        assert record["status"] == "failed"
        assert record["error"]["code"] == "crashed"
        assert "stopped" in record["error"]["message"]
        log = await stored_log(c, run_id)
        assert [f.id for f in log] == list(range(1, record["lastSeq"] + 1))
        assert all(log[f.id - 1].event == f.event for f in watcher.frames if f.id)
        assert log[-1].event["type"] == "RUN_ERROR"
        assert log[-1].event["code"] == "crashed"
        assert not [f for f in log if f.event.get("name") == "outlast.resumed"]
        fold = ThreadFold()
        for f in log:
            fold.apply(f.event)  # every construct the dead attempt left open is closed
        thread = (await c.get(f"/threads/{thread_id}")).json()
        assert thread["status"] == "error" and thread["activeRun"] is None
        assert fold.messages == thread["messages"]

        # The thread stays usable.
        again = uid("again")
        resp, frames = await collect(c, "POST", "/agents/demo", json=demo_input(
            thread_id, again, steps=2, messages=[
                *thread["messages"], {"id": "user-again", "role": "user", "content": "retry"}]))
        assert resp.status_code == 200
        assert frames[-1].event["type"] == "RUN_FINISHED"
        assert (await run_record(c, again))["status"] == "succeeded"
        assert (await c.get(f"/threads/{thread_id}")).json()["status"] == "idle"
        counts = effect_counts(server)
        assert counts[(again, 1)] == counts[(again, 2)] == 1
        assert all(n == 1 for n in counts.values())


async def test_sigkill_while_the_continuation_runs_the_approved_tool(server_factory: Any,
                                                                    tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    server: ServerProcess = server_factory("--keepalive", "2", data_dir=data_dir)
    thread_id, run_id, cont = uid("t"), uid("r"), uid("cont")
    async with server.client() as c:
        _, frames = await collect(c, "POST", "/agents/demo", json=demo_input(
            thread_id, run_id, steps=3, step_delay_ms=1500, approve_at=[2]))
        [interrupt] = frames[-1].event["outcome"]["interrupts"]
        watcher = Watcher().start(c, "POST", f"/threads/{thread_id}/resume",
                                  headers={"Accept": "text/event-stream"},
                                  json={"runId": cont, "resume": [
                                      {"interruptId": interrupt["id"], "status": "resolved",
                                       "payload": {"approved": True}}]})
        await watcher.opened.wait()
        assert watcher.status == 200

        async def in_the_tool() -> bool:
            return effect_status(server, cont, "step-2") == "started"

        await wait_for(in_the_tool)
        server.kill()
        await watcher.close()

    server = server_factory("--keepalive", "2", data_dir=data_dir)
    async with server.client() as c:
        record = await wait_final(c, cont)
        assert record["status"] == "succeeded" and record["attempts"] == 2
        log = await stored_log(c, cont)
        assert [f.id for f in log] == list(range(1, record["lastSeq"] + 1))
        assert all(log[f.id - 1].event == f.event for f in watcher.frames if f.id)
        thread = (await c.get(f"/threads/{thread_id}")).json()
        one_result_per_call(thread["messages"])
        assert effect_counts(server) == {(run_id, 1): 1, (cont, 2): 1, (cont, 3): 1}
        assert thread["status"] == "idle" and thread["interrupts"] == []


async def test_a_run_whose_agent_is_gone_after_a_restart_fails_clearly(
        server_factory: Any, tmp_path: Path) -> None:
    from tests.support.agents import AGENT_ENV, ASK_AGENT

    data = tmp_path / "gone"
    first: ServerProcess = server_factory("--agent", ASK_AGENT, data_dir=data, env=AGENT_ENV)
    async with first.client() as c:
        await collect(c, "POST", "/agents/demo", limit=2,
                      json=demo_input("gone-t", "gone-r1", steps=2, step_delay_ms=1500))
        queued = demo_input("gone-t", "gone-r2", "ask me")
        async with c.stream("POST", "/agents/ask", json=queued,
                            headers={"Outlast-Multitask": "enqueue"}) as resp:
            assert resp.status_code == 200  # admitted, queued behind gone-r1
        assert (await run_record(c, "gone-r2"))["status"] == "queued"
    first.kill()
    # The restarted server no longer registers "ask": the queued run must not hang.
    second: ServerProcess = server_factory(data_dir=data)
    async with second.client() as c:
        assert (await wait_final(c, "gone-r1"))["status"] == "succeeded"
        failed = await wait_final(c, "gone-r2")
        assert failed["status"] == "failed"
        assert failed["error"]["code"] == "agent_not_found"
        assert "not available" in failed["error"]["message"]
        thread = (await c.get("/threads/gone-t")).json()
        assert thread["activeRun"] is None and thread["status"] == "error"
