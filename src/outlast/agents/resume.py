"""What the framework hosts share of a crash resume (G8).

A host notes, just before each opener at a boundary, how many messages the thread held
(``settled``): that is what the snapshot it restarts from holds. A resumed attempt then
knows what the dead one added after it. A reply it was cutting off stays in the thread
marked ``finishReason: "interrupted"`` and is not sent back to the model, in that
attempt or on any later turn (every host's history goes through ``finished``); a call
it left without a result got the engine's placeholder result, which the call's real
result (run again through the journal, so at most once) replaces.

A call whose effect the dead attempt started but never finished is in doubt: the
resumed attempt asks a person about all of them at once (``owed_calls``), and the
continuation executes those a person answered, through the journal, which applies
each answer (``outlast.agent.in_doubt``).
"""

from __future__ import annotations

import json
from typing import Any

from outlast.agent import RunContext, ToolEffect, in_doubt
from outlast.protocol.events import FAILED as FAILED  # the hosts' finish reasons, with
from outlast.protocol.events import FINISH as FINISH  # those below

STREAMING = "streaming"
"""Set when a reply starts; replaced by the real finish reason when it ends. A reply
still marked so after a crash was cut off; a resumed attempt re-marks it ``interrupted``."""
INTERRUPTED = "interrupted"
UNFINISHED = frozenset({STREAMING, INTERRUPTED, FAILED})
"""Finish reasons of replies never sent back to the model as a finished turn (a reply
its run's failure cut off is marked ``FAILED`` by the engine)."""

ENGINE_PLACEHOLDER = "result_"
"""The id prefix of the result the engine gives a call left open by a crashed attempt
(``engine.execution._close_open``)."""


def finish_of(message: dict[str, Any]) -> str | None:
    """The finish reason a reply's metadata records, if any."""
    meta = message.get("metadata")
    value = meta.get(FINISH) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def unfinished(message: dict[str, Any]) -> bool:
    """True for a reply that never finished (cut off by a crash, or by its run's failure):
    it stays in the thread and is never sent back to the model as a finished turn."""
    return message.get("role") == "assistant" and finish_of(message) in UNFINISHED


def finished(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as a host hands them to its model, on every turn: without unfinished
    replies, nor the results of their tool calls."""
    dropped = {c.get("id") for m in messages if unfinished(m) for c in m.get("toolCalls") or ()}
    return [m for m in messages if not unfinished(m) and not (
        m.get("role") == "tool" and m.get("toolCallId") in dropped)]


def note_settled(ctx: RunContext, key: str, **more: Any) -> None:
    """Note in the host's ``session_state[key]`` (beside what else it keeps there) that
    the thread holds ``len(ctx.messages)`` messages at a boundary of this run, with
    ``more``: called just before an opener, as the snapshot is saved just before it."""
    state = ctx.session_state.get(key)
    if not isinstance(state, dict):
        state = ctx.session_state[key] = {}
    state.update(run=ctx.run_id, settled=len(ctx.messages), **more)


def settled_at(ctx: RunContext, key: str) -> int | None:
    """In a crash resume, how many messages the thread held at the last boundary the
    dead attempt noted in ``session_state[key]`` (``note_settled``); else None."""
    saved = ctx.session_state.get(key)
    if not (ctx.resumed and isinstance(saved, dict) and saved.get("run") == ctx.run_id):
        return None
    settled = saved.get("settled")
    return settled if isinstance(settled, int) else None


def is_placeholder(message: dict[str, Any]) -> bool:
    """True for the engine's stand-in result of a call a crashed attempt left open."""
    return message.get("role") == "tool" and \
        str(message.get("id", "")).startswith(ENGINE_PLACEHOLDER)


async def mark_cut_off(ctx: RunContext, settled: int) -> str | None:
    """Mark the reply the dead attempt was streaming after message ``settled`` (if its
    last message is one) ``interrupted``; its id, or None. An ended message is never
    started again (G11): the mark comes in a ``MESSAGES_SNAPSHOT``."""
    tail = ctx.messages[settled:]
    cut = [m for m in tail[-1:] if m.get("role") == "assistant" and not m.get("toolCalls")]
    if not cut:
        return None
    cut_id = str(cut[0].get("id"))
    await mark_reply(ctx, cut_id, INTERRUPTED)
    return cut_id


async def mark_reply(ctx: RunContext, message_id: str, finish: str) -> None:
    """Mark the ended reply ``message_id`` with ``finish`` as its finish reason. An ended
    message is never started again (G11): the mark comes in a ``MESSAGES_SNAPSHOT``."""
    await ctx.emit({"type": "MESSAGES_SNAPSHOT", "messages": [
        dict(m, metadata={**(m.get("metadata") or {}), FINISH: finish})
        if m.get("id") == message_id else m for m in ctx.messages]})


async def answer_placeholder(ctx: RunContext, call_id: str, content: Any) -> bool:
    """Replace the engine's placeholder result of ``call_id`` with its real result (one
    result per call); False when the call has no placeholder."""
    placeholder = ENGINE_PLACEHOLDER + call_id
    if not any(m.get("id") == placeholder for m in ctx.messages):
        return False
    await ctx.emit({"type": "MESSAGES_SNAPSHOT", "messages": [
        dict(m, content=content) if m.get("id") == placeholder else m
        for m in ctx.messages]})
    return True


async def owed_calls(ctx: RunContext, key_prefix: str, settled: int | None
                     ) -> list[dict[str, Any]]:
    """The calls with the engine's placeholder result this attempt executes: in a crash
    resume, those after message ``settled`` (when known), else those a person answered
    a question about. First, in a crash resume, asks about every call whose effect
    (journal key ``key_prefix`` + call id) the dead attempt left in doubt, ending the
    run; and fails it for a call a person said must not run."""
    doubted = {r.interrupt.get("toolCallId") for r in ctx.resume
               if in_doubt.is_question(r.interrupt)}
    if not ctx.resumed and not doubted:
        return []
    calls = {c["id"]: c for m in ctx.messages for c in m.get("toolCalls") or ()}
    held = [(i, calls[m["toolCallId"]]) for i, m in enumerate(ctx.messages)
            if is_placeholder(m) and m.get("toolCallId") in calls]
    # Only this run's journal can hold an effect in doubt: the others are not asked about.
    await ctx.confirm_in_doubt([
        ToolEffect(key_prefix + c["id"], c["function"]["name"], call_args(c), c["id"])
        for _, c in held if ctx.resumed or c["id"] in doubted])
    return [c for i, c in held
            if (settled is not None and i >= settled) or c["id"] in doubted]


def call_args(call: dict[str, Any]) -> Any:
    """A call's arguments as the model gave them (parsed when they are JSON)."""
    raw = call["function"].get("arguments") or "{}"
    try:
        return json.loads(raw)
    except ValueError:
        return raw
