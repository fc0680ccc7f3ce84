"""What a client that was not there sees: a run that outlived its dropped stream (§5),
a run's progress on a fresh hydration mid-run (§6)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from outlast.conformance.checks.verdicts import (
    RAN_AGENT,
    answered,
    completed,
    fail,
    passed,
    ran_agent,
    why_incomplete,
)
from outlast.conformance.report import Result
from outlast.conformance.session import Session, after_user, snapshot_messages, text_of, texts
from outlast.conformance.wire import Exchange, Frame, is_final


# -- survives-disconnect (§5) -------------------------------------------------------
async def survives_disconnect(s: Session) -> Result:
    check = "survives-disconnect"
    thread, run = s.ids("disconnect")
    body = s.run_input(thread, run)
    first = await s.post(body, limit=3)
    if (why := answered(first)) is not None:
        return fail(check, f"the run did not start: {why}", first)
    if first.ended:
        return fail(check, "the run ended within its first 3 events: nothing to drop; "
                    "give it a longer task (--prompt, --forwarded-props)", first)
    dropped = time.monotonic()
    done, tried = await s.wait_thread(thread, completed(s, body["messages"][0]["id"], run),
                                      dropped + 3 * s.run_seconds + 10)
    if not done:
        return fail(check, "dropped after 3 events; no client ever saw the run "
                    "complete: " + why_incomplete(s, tried[-1], body["messages"][0]["id"]),
                    first, *tried)
    return passed(check, f"dropped after 3 events; the run's final message was visible "
                  f"{time.monotonic() - dropped:.1f} s later", first, tried[-1])


# -- progress-visible (§6) ----------------------------------------------------------
async def progress_visible(s: Session) -> Result:
    check = "progress-visible"
    thread = s.reference_thread  # its first run ended: a reload must not show that end
    _, run = s.ids("progress")
    body = s.run_input(thread, run, text="And now the next part.")
    seen: dict[str, Any] = {}
    hydrated: asyncio.Future[Exchange] = asyncio.get_running_loop().create_future()

    # After a message's end (a safe point is behind the run); for an agent whose runs
    # say one message (as the reference run did), well into that message.
    several = s.reference is not None and len(texts(s.reference.frames)) >= 2

    async def on_frame(ex: Exchange, f: Frame) -> None:
        if f.type == "TEXT_MESSAGE_END" and "message" not in seen and "task" not in seen:
            seen["message"] = f.event.get("messageId")
        elif "task" not in seen and not is_final(f) and \
                ("message" in seen or (not several and len(ex.frames) >= 8)):
            seen["task"] = asyncio.create_task(s.hydrate(thread))
            seen["task"].add_done_callback(
                lambda t: hydrated.set_result(t.result()) if not t.cancelled() else None)

    live = await s.post(body, on_frame=on_frame)
    s.keep(live, "progress-visible: the second run")
    if (why := answered(live)) is not None:
        return fail(check, f"the second run on a thread did not run: {why}", live)
    if "task" not in seen:
        return fail(check, "the run ended within 8 events and before a message of it had "
                    "ended: nothing mid-run to look at; give it a longer task", live)
    hyd = await hydrated
    final = live.frames[-1].at if live.frames and live.ended else None
    if final is not None and hyd.frames and hyd.frames[0].at > final:
        return fail(check, "the run ended before the hydration answered; give it a longer "
                    "task", live, hyd)
    messages = snapshot_messages(hyd)
    if ran_agent(hyd):
        return fail(check, f"mid-run, {RAN_AGENT}", hyd, live)
    if messages is None:
        return fail(check, "hydrating the thread mid-run (§6) returned no MESSAGES_SNAPSHOT",
                    hyd, live)
    ended_id = seen.get("message")
    ended_text = dict(texts(live.frames)).get(ended_id or "", "")
    user_id = body["messages"][0]["id"]
    after = after_user(messages, user_id)
    if after is None:
        return fail(check, "mid-run, the thread's snapshot does not hold this run's user "
                    f"message {user_id!r}: a reload shows the previous run's end", hyd, live)
    if ended_id is not None and not any(m.get("id") == ended_id or
               (ended_text and text_of(m.get("content")) == ended_text) for m in after):
        return fail(check, f"mid-run, the snapshot lacks message {ended_id!r}, which had "
                    "ended before the hydration: a reload does not show this run's progress",
                    hyd, live)
    started = next((f.event for f in hyd.frames if f.type == "RUN_STARTED"), {})
    if started.get("runId") != run:
        return fail(check, f"the hydration shows the run's progress but its RUN_STARTED names "
                    f"{started.get('runId')!r}, not the active run {run!r}: the client cannot "
                    "tell a run is active", hyd)
    return passed(check, "mid-run, a fresh client saw this run's user message"
                  + (" and its first finished message" if ended_id else "")
                  + ", and the active run's id", hyd)
