"""Interrupts that outlive the client (§9): raised with nobody connected, visible on
hydration, answered later."""

from __future__ import annotations

import time
from typing import Any

from outlast.conformance.checks.verdicts import answered, fail, passed, ran_agent
from outlast.conformance.report import Result
from outlast.conformance.session import Session, pending_interrupts
from outlast.conformance.wire import Exchange, final_event


# -- interrupt-durable (§9) ----------------------------------------------------------
def offers_interrupts(s: Session) -> bool:
    hitl = s.advertised("humanInTheLoop")
    return not (isinstance(hitl, dict) and (hitl.get("interrupts") is False
                                            or hitl.get("supported") is False))


async def raise_interrupt(s: Session, check: str
                          ) -> tuple[str, list[dict[str, Any]], Result | None, Exchange]:
    """Start an approval run, drop the client after its first event, and wait until
    hydration shows its pending interrupts."""
    thread, run = s.ids(check.split("-")[0])
    first = await s.post(s.run_input(thread, run, approval=True), limit=1)
    if (why := answered(first)) is not None:
        return thread, [], fail(check, f"the approval run did not start: {why}", first), first
    if first.ended:
        return thread, [], fail(check, "the approval run ended at its first event", first), \
            first
    found, tried = await s.wait_thread(
        thread, lambda ex: None if ran_agent(ex) else pending_interrupts(ex),
        time.monotonic() + 3 * s.run_seconds + 10)
    if not found:
        return thread, [], fail(
            check, "the client dropped after the approval run's first event; hydrating the "
            "thread never showed a pending interrupt (RUN_FINISHED outcome interrupt)",
            first, *tried), tried[-1]
    return thread, found, None, tried[-1]


async def answer_interrupts(s: Session, check: str, thread: str,
                            pending: list[dict[str, Any]]) -> tuple[Result | None, Exchange]:
    ans = await s.post(s.answer_input(thread, pending))
    if (why := answered(ans)) is not None:
        return fail(check, f"answering the interrupt (resume[]) failed: {why}", ans), ans
    last = final_event(ans)
    owed = {str(i["toolCallId"]) for i in pending if isinstance(i.get("toolCallId"), str)}
    s.keep(ans, f"{check}: the answer's run", owed=owed)
    if last is None or last["type"] != "RUN_FINISHED":
        return fail(check, "the run that answered the interrupt did not finish", ans), ans
    again = {i.get("id") for i in pending_interrupts(ans)}
    if again & {i.get("id") for i in pending}:
        return fail(check, "after the answer the same interrupt is still pending", ans), ans
    return None, ans


async def interrupt_durable(s: Session) -> Result:
    check = "interrupt-durable"
    if not offers_interrupts(s):
        return Result(check, "skip", "the server advertises no interrupts")
    thread, pending, problem, hyd = await raise_interrupt(s, check)
    if problem is not None:
        return problem
    problem, ans = await answer_interrupts(s, check, thread, pending)
    if problem is not None:
        return problem
    return passed(check, f"with no client connected, interrupt {pending[0].get('id')!r} was "
                  "visible on hydration and answering it finished the run", hyd, ans)
