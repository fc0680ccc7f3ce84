"""What a second request does to a running run: another run on its busy thread (§7),
a cancel (§8)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from outlast.conformance.checks.verdicts import answered, fail, passed
from outlast.conformance.report import Result
from outlast.conformance.session import Session
from outlast.conformance.wire import Exchange, Frame, final_event

CONTENT_TYPES = ("RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "STATE_DELTA")


# -- busy-thread (§7) ---------------------------------------------------------------
async def busy_thread(s: Session) -> Result:
    check = "busy-thread"
    thread, run = s.ids("busy")
    _, other = s.ids("busy")
    body = s.run_input(thread, run)
    second: dict[str, asyncio.Task[Exchange]] = {}

    async def on_frame(ex: Exchange, f: Frame) -> None:
        if len(ex.frames) == 3 and "task" not in second:
            second["task"] = asyncio.create_task(
                s.post(s.run_input(thread, other, text="Something else meanwhile.")))

    x = await s.post(body, on_frame=on_frame)
    if (why := answered(x)) is not None:
        return fail(check, f"the first run did not start: {why}", x)
    if "task" not in second:
        return fail(check, "the first run ended within 3 events: too short", x)
    y = await second["task"]
    s.keep(x, "busy-thread: the first run")
    if y.status == 409:
        error = (y.json() or {}).get("error") if isinstance(y.json(), dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if code != "run_already_active":
            return fail(check, f"409 with code {code!r}, not 'run_already_active' (§7)", y)
        active = error.get("activeRunId") if isinstance(error, dict) else None
        if active not in (None, run):
            return fail(check, f"409 names active run {active!r}, not {run!r}", y)
        return passed(check, "a second run on the busy thread was refused: 409 "
                      "run_already_active" + (" naming the active run" if active else ""), y)
    if (why := answered(y)) is not None:
        return fail(check, f"a second run on the busy thread got no defined answer (§7): "
                    f"{why}", y)
    s.keep(y, "busy-thread: the second run")
    x_end = x.frames[-1].at if x.ended and x.frames else None
    y_work = next((f.at for f in y.frames if f.type not in CONTENT_TYPES), None)
    if x_end is not None and y_work is not None and y_work >= x_end:
        last = final_event(x) or {}
        how = "the first was cancelled" if (last.get("outcome") or {}).get("type") == \
            "cancelled" or last.get("type") == "RUN_ERROR" else "it was queued"
        return passed(check, f"a second run on the busy thread ran after the first ended "
                      f"({how})", x, y)
    return fail(check, "two runs executed on one thread at once: the second's events came "
                "while the first was still running (§7 asks for 409 run_already_active, a "
                "queue, or interrupting the first)", x, y)


# -- cancel (§8) ---------------------------------------------------------------------
async def cancel(s: Session) -> Result:
    check = "cancel"
    if s.details.get("cancel") is False:
        return Result(check, "skip", "the server advertises no cancel (cancel: false)")
    thread, run = s.ids("cancel")
    url = s.resource("cancel", run)
    asked: dict[str, Any] = {}

    async def on_frame(ex: Exchange, f: Frame) -> None:
        if len(ex.frames) == 3 and "task" not in asked:
            asked["at"] = time.monotonic()
            asked["task"] = asyncio.create_task(s.wire.request("POST", url))

    live = await s.post(s.run_input(thread, run), on_frame=on_frame)
    if (why := answered(live)) is not None:
        return fail(check, f"the run did not start: {why}", live)
    if "task" not in asked:
        return fail(check, "the run ended within 3 events: too short to cancel", live)
    answer = await asked["task"]
    if answer.status is None or answer.status >= 300:
        return fail(check, f"POST {url} answered {answer.status or answer.error}", answer, live)
    s.keep(live, "cancel: the cancelled run")
    last = final_event(live)
    if last is None:
        return fail(check, "the cancelled run's stream did not end with RUN_FINISHED or "
                    "RUN_ERROR", answer, live)
    took = live.frames[-1].at - asked["at"]
    kind = (last.get("outcome") or {}).get("type") if last["type"] == "RUN_FINISHED" \
        else last.get("code")
    if kind != "cancelled":
        return fail(check, f"the run ended with {last['type']} {kind!r}, not cancelled: the "
                    f"cancel did not stop it ({took:.2f} s after asking)", answer, live)
    if took > s.options.cancel_within:
        return fail(check, f"the run ended cancelled {took:.2f} s after the cancel was sent "
                    f"(§8: within {s.options.cancel_within:g} s)", answer, live)
    return passed(check, f"POST {url} → {answer.status}; the stream ended cancelled "
                  f"{took:.2f} s later", answer, live)
