"""The checks of docs/resumable-ag-ui.md, one function each. A check sends only what
the document defines, judges only what comes back over HTTP, and says why."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from outlast.conformance.report import Result
from outlast.conformance.session import (
    Session,
    after_user,
    pending_interrupts,
    signature,
    snapshot_messages,
    text_of,
    texts,
)
from outlast.conformance.wire import Exchange, Frame, final_event, is_final

CONTENT_TYPES = ("RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "STATE_DELTA")


def fail(check: str, detail: str, *exchanges: Exchange) -> Result:
    return Result(check, "fail", detail, [e.evidence() for e in exchanges])


def passed(check: str, detail: str, *exchanges: Exchange) -> Result:
    return Result(check, "pass", detail, [e.evidence(frames=6) for e in exchanges])


def answered(ex: Exchange) -> str | None:
    """Why a run's stream is not one (None when it is: 2xx SSE that ended a run)."""
    if ex.error and not ex.frames:
        return ex.error
    if ex.status is None or ex.status >= 300:
        return f"answered {ex.status}: {ex.text[:200]}"
    if not ex.frames:
        return "answered with no AG-UI event"
    return None


AGENT_WORK = ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK",
              "TOOL_CALL_START", "TOOL_CALL_CHUNK", "REASONING_START",
              "REASONING_MESSAGE_START", "STEP_STARTED")


def ran_agent(ex: Exchange) -> bool:
    """True when a hydration (§6) executed the agent: its stream follows no active run
    (its RUN_STARTED names the hydration's own runId) yet carries the agent's work.
    Its snapshot then shows that new execution, not the thread as it was."""
    own = ex.body.get("runId") if isinstance(ex.body, dict) else None
    started = next((f.event for f in ex.frames if f.type == "RUN_STARTED"), {})
    return started.get("runId") == own and any(f.type in AGENT_WORK for f in ex.frames)


RAN_AGENT = ("hydrating the thread (an input with no messages, §6) executed the agent "
             "instead of showing the thread")


def completed(s: Session, user_id: str, run_id: str) -> Any:
    """A predicate on a hydration: the run of ``user_id`` is no longer active and the
    thread shows as many messages of it as the reference run said (or its very last
    message: a model's words may differ from run to run, a count does not)."""
    final = s.final_text()
    count = len([t for _, t in texts(s.reference.frames) if t.strip()]) \
        if s.reference is not None else 1

    def done(ex: Exchange) -> Any:
        messages = snapshot_messages(ex)
        if messages is None or ran_agent(ex):
            return None
        after = after_user(messages, user_id)
        if after is None:
            return None
        said = [t for m in after if m.get("role") == "assistant"
                if (t := text_of(m.get("content"))).strip()]
        if final is not None and final in said:
            return True
        started = next((f.event for f in ex.frames if f.type == "RUN_STARTED"), {})
        return len(said) >= max(count, 1) and started.get("runId") != run_id
    return done


def why_incomplete(s: Session, ex: Exchange, user_id: str) -> str:
    messages = snapshot_messages(ex)
    if ex.status is None or ex.status >= 300:
        return f"hydrating the thread answered {ex.status or ex.error}"
    if ran_agent(ex):
        return RAN_AGENT
    if messages is None:
        return "hydrating the thread (§6) returned no MESSAGES_SNAPSHOT"
    if after_user(messages, user_id) is None:
        return f"the thread's messages do not hold the run's user message {user_id!r}"
    return f"the thread never showed the run's final message {s.final_text()!r}"


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


# -- reattach (§4) ------------------------------------------------------------------
def logged(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.id is not None]


def continuation_problem(stream: Exchange, log: list[Frame], cursor: int) -> str | None:
    """Why ``stream`` is not exactly the logged events after ``cursor`` (§4)."""
    if not stream.frames:
        return "it carried no event"
    if stream.frames[0].type != "RUN_STARTED":
        return f"it began with {stream.frames[0].type}, not RUN_STARTED"
    first_logged = next((i for i, f in enumerate(stream.frames) if f.id is not None),
                        len(stream.frames))
    late = [f for f in stream.frames[first_logged:] if f.id is None]
    if late:
        return f"an event without an id came after a logged one ({late[0].type})"
    want = [(f.seq, signature(f.event)) for f in log if (f.seq or 0) > cursor]
    got = [(f.seq, signature(f.event)) for f in logged(stream.frames)]
    if got != want:
        for i, (w, g) in enumerate(zip(want, got, strict=False)):
            if w != g:
                return f"its event #{i + 1} after the cursor is id {g[0]} {g[1].get('type')}, " \
                       f"the log's is id {w[0]} {w[1].get('type')}"
        return f"it carried {len(got)} logged events after {cursor}; the log has {len(want)}"
    if not stream.ended:
        return f"it did not end with the run's end ({stream.error or 'dropped'})"
    return None


async def reattach(s: Session) -> Result:
    check = "reattach"
    if s.advertised("transport", "resumable") is False:
        return Result(check, "skip", "the server advertises transport.resumable: false")
    thread, run = s.ids("reattach")
    body = s.run_input(thread, run)
    key = {"Idempotency-Key": run}
    first = await s.post(body, headers=key, limit=6)
    if (why := answered(first)) is not None:
        return fail(check, f"the run did not start: {why}", first)
    seqs = [f.seq for f in logged(first.frames)]
    if not seqs or None in seqs:
        return fail(check, "the stream's events carry no integer SSE id (§3): there is "
                    "nothing to reattach after", first)
    cursor = seqs[-1]
    assert cursor is not None
    again = await s.post(body, headers={**key, "Last-Event-ID": str(cursor)})
    # The GET route, from an earlier cursor (mid-way through what was read).
    mid = seqs[len(seqs) // 2] or 0
    events_url = s.resource("events", run)
    got = await s.wire.stream("GET", events_url, headers={"Last-Event-ID": str(mid)},
                              within=s.options.timeout)
    log = await s.post(body, headers=key)  # after the end: the whole log
    if (why := answered(log)) is not None or not log.ended:
        return fail(check, f"a retry after the run's end did not replay it: {why or log.error}",
                    log)
    numbers = [f.seq for f in logged(log.frames)]
    if numbers != list(range(1, len(numbers) + 1)):
        return fail(check, "the run's event ids are not 1, 2, 3, ... (§3)", log)
    held = [f.event for f in logged(log.frames) if (f.seq or 0) <= cursor]
    if [signature(f.event) for f in logged(first.frames)] != \
            [signature(e) for e in held]:
        return fail(check, f"the first {cursor} events differ between the first stream and "
                    "the replay of the whole run (§3: an event's id names one event)",
                    first, log)
    problem = continuation_problem(again, log.frames, cursor)
    if problem is not None:
        return fail(check, f"POST with Last-Event-ID: {cursor}: {problem}", again, log)
    s.keep(again, f"reattach: POST after {cursor}", held=held)
    s.keep(log, "reattach: the whole run replayed")
    note = ""
    if got.status == 200:
        problem = continuation_problem(got, log.frames, mid)
        if problem is not None:
            return fail(check, f"GET {events_url} with Last-Event-ID: {mid}: {problem}", got, log)
        s.keep(got, f"reattach: GET after {mid}",
               held=[f.event for f in logged(log.frames) if (f.seq or 0) <= mid])
        note = f", and GET of its events after {mid}"
    elif "events" in s.details:
        return fail(check, f"the advertised events route answered {got.status or got.error}",
                    got)
    else:
        note = f" (no events route at {events_url}: {got.status or got.error})"
    return passed(check, f"dropped after id {cursor}; POST with Last-Event-ID gave exactly "
                  f"ids {cursor + 1}..{numbers[-1]}{note}", again)


# -- retry-attaches (§2) ------------------------------------------------------------
async def retry_attaches(s: Session) -> Result:
    check = "retry-attaches"
    thread, run = s.ids("retry")
    body = s.run_input(thread, run)
    key = {"Idempotency-Key": run}
    started = asyncio.Event()
    second: dict[str, asyncio.Task[Exchange]] = {}

    async def on_frame(ex: Exchange, f: Frame) -> None:
        if len(ex.frames) == 4 and "task" not in second:
            second["task"] = asyncio.create_task(s.post(body, headers=key))
            started.set()

    a = await s.post(body, headers=key, on_frame=on_frame)
    if (why := answered(a)) is not None:
        return fail(check, f"the run did not start: {why}", a)
    if "task" not in second:
        return fail(check, "the run ended within 4 events: too short to retry mid-run", a)
    b = await second["task"]
    c = await s.post(body, headers=key)
    s.keep(a, "retry-attaches: the first request")
    for ex, when in ((b, "during the run"), (c, "after the run")):
        if (why := answered(ex)) is not None:
            return fail(check, f"the same request sent again {when}: {why}", ex)
        s.keep(ex, f"retry-attaches: the same request {when}")
        mine, theirs = texts(a.frames), texts(ex.frames)
        if [m for m, _ in theirs] != [m for m, _ in mine]:
            if not theirs:
                return fail(check, f"the same request sent again {when} did not attach: its "
                            "stream carried none of the run's messages (the first's: "
                            f"{[m for m, _ in mine][:4]})", a, ex)
            return fail(check, f"the same request sent again {when} ran the agent again: its "
                        f"messages are {[m for m, _ in theirs][:4]}, the first's "
                        f"{[m for m, _ in mine][:4]}", a, ex)
        if logged(a.frames):
            if [(f.id, signature(f.event)) for f in logged(ex.frames)] != \
                    [(f.id, signature(f.event)) for f in logged(a.frames)]:
                return fail(check, f"the same request sent again {when} did not carry the "
                            "same events with the same ids", a, ex)
        elif [signature(e) for e in ex.events] != [signature(e) for e in a.events]:
            return fail(check, f"the same request sent again {when} did not carry the same "
                        "events", a, ex)
    final = s.final_text()
    hyd = await s.hydrate(thread)
    messages = snapshot_messages(hyd)
    if messages is not None and final:
        count = sum(text_of(m.get("content")) == final for m in messages)
        if count > 1:
            return fail(check, f"the thread holds the run's final message {count} times: "
                        "a retry executed the run again", hyd)
    return passed(check, "sent 3 times (during and after the run): one execution, the same "
                  f"{len(a.frames)} events each time", b)


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


# -- restart (§10) -------------------------------------------------------------------
async def restart(s: Session) -> Result:
    check = "restart"
    cmd = s.options.restart_cmd
    if not cmd:
        return Result(check, "skip", "not asked: give --restart-cmd CMD to check it")
    interrupts = offers_interrupts(s)
    approval: tuple[str, list[dict[str, Any]]] | None = None
    if interrupts:
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
    proc = await asyncio.create_subprocess_shell(
        cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        return Result(check, "fail", f"--restart-cmd did not finish within 120 s: {cmd}")
    if proc.returncode != 0:
        return Result(check, "fail", f"--restart-cmd exited {proc.returncode}: "
                      f"{out.decode(errors='replace')[-500:]}")
    deadline = time.monotonic() + 60
    while True:  # the server answers again
        probe = await s.hydrate(thread, within=3)
        if probe.status is not None or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.3)
    done, tried = await s.wait_thread(thread, completed(s, body["messages"][0]["id"], run),
                                      time.monotonic() + 3 * s.run_seconds + 60)
    if not done:
        return fail(check, "after the restart no client saw the run complete: "
                    + why_incomplete(s, tried[-1], body["messages"][0]["id"]), before, *tried)
    evidence = [tried[-1]]
    if logged(before.frames):
        replay = await s.post(body, headers=key)
        want = [(f.id, signature(f.event)) for f in logged(before.frames)]
        got = [(f.id, signature(f.event)) for f in logged(replay.frames)][: len(want)]
        if got != want:
            return fail(check, "after the restart, the run's log does not begin with the "
                        "events a client saw before it (§3: stored before shown)", before,
                        replay)
        s.keep(replay, "restart: the run replayed after the restart")
        evidence.append(replay)
    if approval is not None:
        thread2, pending = approval
        still = pending_interrupts(await s.hydrate(thread2))
        if {i.get("id") for i in still} != {i.get("id") for i in pending}:
            return fail(check, f"after the restart the pending interrupts are "
                        f"{[i.get('id') for i in still]}, not {[i.get('id') for i in pending]}",
                        tried[-1])
        problem, ans = await answer_interrupts(s, check, thread2, pending)
        if problem is not None:
            return problem
        evidence.append(ans)
    return Result(check, "pass", "killed and restarted mid-run: the run completed"
                  + (" and its events before the kill were kept" if logged(before.frames)
                     else "") + ("; the pending approval survived and was answered"
                                 if approval else ""),
                  [e.evidence(frames=6) for e in evidence])
