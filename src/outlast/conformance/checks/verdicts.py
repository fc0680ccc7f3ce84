"""What the checks judge a server's answers by: a stream that is one, a hydration that
ran the agent instead of showing the thread, a run seen complete, a continuation that
is exactly the log after a cursor; and a check's result with its evidence."""

from __future__ import annotations

from typing import Any

from outlast.conformance.report import Result
from outlast.conformance.session import (
    Session,
    after_user,
    signature,
    snapshot_messages,
    text_of,
    texts,
)
from outlast.conformance.wire import Exchange, Frame


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
