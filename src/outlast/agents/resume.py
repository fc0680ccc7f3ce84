"""What the framework hosts share of a crash resume (G8).

A host notes, just before each opener at a boundary, how many messages the thread held
(``settled``): that is what the snapshot it restarts from holds. A resumed attempt then
knows what the dead one added after it. A reply it was cutting off stays in the thread
marked ``finishReason: "interrupted"`` and is not sent back to the model; a call it left
without a result got the engine's placeholder result, which the call's real result
(run again through the journal, so at most once) replaces.
"""

from __future__ import annotations

from typing import Any

from outlast.agent import RunContext

ENGINE_PLACEHOLDER = "result_"
"""The id prefix of the result the engine gives a call left open by a crashed attempt
(``engine.execution._close_open``)."""


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
    cut_id = cut[0].get("id")
    await ctx.emit({"type": "MESSAGES_SNAPSHOT", "messages": [
        dict(m, metadata={**(m.get("metadata") or {}), "finishReason": "interrupted"})
        if m.get("id") == cut_id else m for m in ctx.messages]})
    return str(cut_id)


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
