"""A server killed and restarted mid-run (§10): the run completes, the events a client
saw before the kill stay in its log, a pending approval survives and can be answered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from outlast.conformance.checks.interrupts import (
    answer_interrupts,
    offers_interrupts,
    raise_interrupt,
)
from outlast.conformance.checks.verdicts import answered, completed, fail, logged, why_incomplete
from outlast.conformance.report import Result
from outlast.conformance.session import Session, pending_interrupts, signature
from outlast.conformance.wire import Exchange

Approval = tuple[str, list[dict[str, Any]]]  # a thread and its pending interrupts


async def restart(s: Session) -> Result:
    check = "restart"
    cmd = s.options.restart_cmd
    if not cmd:
        return Result(check, "skip", "not asked: give --restart-cmd CMD to check it")
    approval: Approval | None = None
    if offers_interrupts(s):
        thread, pending, problem, _ = await raise_interrupt(s, check)
        if problem is not None:
            return problem
        approval = (thread, pending)
    thread, run = s.ids("restart")
    body = s.run_input(thread, run)
    key = {"Idempotency-Key": run}
    before = await s.post(body, headers=key, limit=5)
    if (why := answered(before)) is not None:
        return fail(check, f"the run did not start: {why}", before)
    if before.ended:
        return fail(check, "the run ended within 5 events: too short to restart mid-run",
                    before)
    if (why := await run_restart_cmd(cmd)) is not None:
        return Result(check, "fail", why)
    await answering_again(s, thread)
    user_id = body["messages"][0]["id"]
    done, tried = await s.wait_thread(thread, completed(s, user_id, run),
                                      time.monotonic() + 3 * s.run_seconds + 60)
    if not done:
        return fail(check, "after the restart no client saw the run complete: "
                    + why_incomplete(s, tried[-1], user_id), before, *tried)
    evidence = [tried[-1]]
    problem, replay = await kept_before(s, body, key, before)
    if problem is not None:
        return problem
    problem, answer = await approval_survived(s, check, approval, tried[-1])
    if problem is not None:
        return problem
    evidence += [e for e in (replay, answer) if e is not None]
    return Result(check, "pass", "killed and restarted mid-run: the run completed"
                  + (" and its events before the kill were kept" if logged(before.frames)
                     else "") + ("; the pending approval survived and was answered"
                                 if approval else ""),
                  [e.evidence(frames=6) for e in evidence])


async def run_restart_cmd(cmd: str) -> str | None:
    """Run ``--restart-cmd``; why it failed, or None."""
    proc = await asyncio.create_subprocess_shell(
        cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        return f"--restart-cmd did not finish within 120 s: {cmd}"
    if proc.returncode != 0:
        return f"--restart-cmd exited {proc.returncode}: {out.decode(errors='replace')[-500:]}"
    return None


async def answering_again(s: Session, thread: str) -> None:
    """Wait (up to a minute) until the server answers again."""
    deadline = time.monotonic() + 60
    while True:
        probe = await s.hydrate(thread, within=3)
        if probe.status is not None or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.3)


async def kept_before(s: Session, body: dict[str, Any], key: dict[str, str],
                      before: Exchange) -> tuple[Result | None, Exchange | None]:
    """The run's log after the restart begins with the events a client saw before it
    (§3: stored before shown); nothing to compare when those carried no ids."""
    if not logged(before.frames):
        return None, None
    replay = await s.post(body, headers=key)
    want = [(f.id, signature(f.event)) for f in logged(before.frames)]
    got = [(f.id, signature(f.event)) for f in logged(replay.frames)][: len(want)]
    if got != want:
        return fail("restart", "after the restart, the run's log does not begin with the "
                    "events a client saw before it (§3: stored before shown)", before,
                    replay), replay
    s.keep(replay, "restart: the run replayed after the restart")
    return None, replay


async def approval_survived(s: Session, check: str, approval: Approval | None,
                            seen: Exchange) -> tuple[Result | None, Exchange | None]:
    """The interrupts pending before the restart are pending after it, and answering
    them finishes their run."""
    if approval is None:
        return None, None
    thread, pending = approval
    still = pending_interrupts(await s.hydrate(thread))
    if {i.get("id") for i in still} != {i.get("id") for i in pending}:
        return fail(check, f"after the restart the pending interrupts are "
                    f"{[i.get('id') for i in still]}, not {[i.get('id') for i in pending]}",
                    seen), None
    return await answer_interrupts(s, check, thread, pending)
