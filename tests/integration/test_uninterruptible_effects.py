"""An effect that cannot be interrupted, found in doubt, is asked about: never reconciled
(the check would race it where it may still run) nor run again.

An earlier attempt, held by a process that is gone (or cut off: a partition), journaled
the effect as started; this process takes the run over. With ``interruptible=False``
the agent's ``reconcile`` is not called and ``fn`` does not run: the run ends with the
in-doubt question. An interruptible effect in the same place is reconciled as before.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from outlast.agent import NOT_DONE, Agent, RunContext
from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.store.base import FINAL, AdmitRequest, RunRecord
from outlast.store.sqlite import SQLiteStore


class OneEffect(Agent):
    """Runs one effect, ``interruptible`` as its input's forwardedProps say."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.checked: list[str] = []

    async def run(self, ctx: RunContext) -> Any:
        props = ctx.forwarded_props or {}

        async def fn() -> str:
            self.ran.append(ctx.run_id)
            return "done"

        async def reconcile() -> Any:
            self.checked.append(ctx.run_id)
            return NOT_DONE

        return await ctx.effect("charge", fn, reconcile=reconcile, tool="charge",
                                args={"cents": 100},
                                interruptible=props.get("interruptible", True))


async def taken_over(tmp_path: Path, agent: OneEffect, *, interruptible: bool) -> RunRecord:
    """A run whose first attempt, by a process now gone, started the effect; this
    engine takes it over and runs it to its end."""
    body = {"threadId": "t1", "runId": "r1", "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "go"}], "state": {},
            "tools": [], "context": [], "forwardedProps": {"interruptible": interruptible}}
    store = SQLiteStore(tmp_path / "o.db")
    await store.open()
    try:  # the process that is gone: it claimed the run and started the effect
        result = await store.admit(AdmitRequest(
            principal="alice", thread_id="t1", run_id="r1", agent="one", key="r1",
            fingerprint="f", input_json=json.dumps(body), options_json="{}",
            multitask="reject", resume=[], has_new_input=True, title=None, now=time.time(),
            claim_instance="gone", claim_ttl=5.0, claim_limit=1, claim_start=True))
        [claimed] = result.claimed
        await store.effect_start(claimed.rid, "charge", "gone", claimed.attempts)
    finally:
        await store.close()
    engine = Engine(Settings(data_dir=tmp_path, lease_ttl=5.0, crash_policy="resume"),
                    SQLiteStore(tmp_path / "o.db"), {"one": agent})
    await engine.start()  # takes over the runs of the process that is gone
    try:
        async with asyncio.timeout(30):
            while True:
                run = await engine.store.get_run_by_rid(claimed.rid)
                assert run is not None
                if run.status in FINAL:
                    return run
                await asyncio.sleep(0.02)
    finally:
        await engine.stop()


async def test_an_uninterruptible_effect_in_doubt_is_asked_about(tmp_path: Path) -> None:
    agent = OneEffect()
    run = await taken_over(tmp_path, agent, interruptible=False)
    assert run.status == "interrupted" and run.attempts == 2
    assert run.outcome is not None
    [question] = run.outcome["interrupts"]
    assert question["metadata"]["kind"] == "effect_in_doubt"
    assert question["metadata"]["effect"] == "charge"
    assert agent.checked == [] and agent.ran == []


async def test_an_interruptible_effect_in_doubt_is_reconciled(tmp_path: Path) -> None:
    agent = OneEffect()
    run = await taken_over(tmp_path, agent, interruptible=True)
    assert run.status == "succeeded" and run.attempts == 2
    assert agent.checked == ["r1"] and agent.ran == ["r1"]
