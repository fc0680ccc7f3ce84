"""The same events again: reattaching after a cursor (§4), a request sent again
attaching to its run instead of running the agent twice (§2)."""

from __future__ import annotations

import asyncio

from outlast.conformance.checks.verdicts import answered, continuation_problem, fail, logged, passed
from outlast.conformance.report import Result
from outlast.conformance.session import Session, signature, snapshot_messages, text_of, texts
from outlast.conformance.wire import Exchange, Frame


# -- reattach (§4) ------------------------------------------------------------------
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
