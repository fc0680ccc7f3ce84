"""Effects in doubt: a question to a person instead of a failed run.

An effect an earlier attempt journaled as started, but whose result it never recorded
(the process died, or lost its lease, while the tool ran), may or may not have happened.
Without a ``reconcile`` check the engine cannot know, so it asks: the run ends with one
durable interrupt per such effect (``reason: "confirmation"``), answered through
``resume`` like any other, after restarts too:

- ``{"answer": "happened", "result": <JSON>}``: it did; the result stands in for the
  one the tool would have returned, and nothing runs;
- ``{"answer": "run_again"}``: it did not (or it is safe to repeat); it runs now;
- ``{"answer": "fail"}`` (or cancelling the interrupt): the continuation fails with
  ``effect_uncertain`` and nothing runs.

The continuation run learns the answer when its agent reaches the same effect key
(``ctx.effect``) or calls ``ctx.confirm_in_doubt`` with it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from outlast.agent.base import AgentError, Resolution, ToolEffect

KIND = "effect_in_doubt"
"""``metadata.kind`` of the question about an effect in doubt."""

Answer = Literal["happened", "run_again", "fail"]
ANSWERS: tuple[Answer, ...] = ("happened", "run_again", "fail")

RESPONSE_SCHEMA: dict[str, Any] = {"oneOf": [
    {"type": "object", "properties": {"answer": {"const": "happened"}, "result": {}},
     "required": ["answer", "result"], "additionalProperties": False},
    {"type": "object", "properties": {"answer": {"const": "run_again"}},
     "required": ["answer"], "additionalProperties": False},
    {"type": "object", "properties": {"answer": {"const": "fail"}},
     "required": ["answer"], "additionalProperties": False},
]}

__all__ = ["KIND", "RESPONSE_SCHEMA", "ToolEffect", "answer_for", "answer_problem",
           "is_question", "question", "refused", "verdict"]

SHOWN_ARGS = 300  # characters of the arguments quoted in the question's message


def shown_args(args: Any) -> str:
    """A call's arguments as a question quotes them: JSON (a value JSON has no form for
    as its text), cut to ``SHOWN_ARGS`` characters."""
    shown = json.dumps(args, ensure_ascii=False, default=str)
    return shown if len(shown) <= SHOWN_ARGS else shown[:SHOWN_ARGS - 3] + "..."


def question(run_id: str, effect: ToolEffect, attempt: int) -> dict[str, Any]:
    """The interrupt asking whether ``effect``, started by ``attempt``, happened."""
    digest = hashlib.sha256(f"{run_id}\0{effect.key}".encode()).hexdigest()[:24]
    what = effect.tool or effect.key
    if effect.args is not None:
        what = f"{what}({shown_args(effect.args)})"
    item: dict[str, Any] = {
        "id": f"in-doubt-{digest}", "reason": "confirmation",
        "message": f"{what} was running when the server running it stopped or lost its "
                   f"lease (attempt {attempt}); it may or may not have happened. Did it "
                   "happen, should it run again, or should the run fail?",
        "responseSchema": RESPONSE_SCHEMA,
        "metadata": {"kind": KIND, "effect": effect.key, "tool": effect.tool,
                     "args": effect.args, "attempt": attempt, "runId": run_id},
    }
    if effect.tool_call_id:
        item["toolCallId"] = effect.tool_call_id
    return item


def is_question(interrupt: dict[str, Any]) -> bool:
    """True for an interrupt that asks about an effect in doubt."""
    meta = interrupt.get("metadata")
    return isinstance(meta, dict) and meta.get("kind") == KIND


def answer_problem(interrupt: dict[str, Any], status: str, payload: Any) -> str | None:
    """Why an answer to ``interrupt`` cannot be taken, or None (any answer to another
    kind of interrupt is the agent's to judge)."""
    if not is_question(interrupt) or status != "resolved":
        return None
    if not isinstance(payload, dict):
        return 'the payload must be an object: {"answer": "happened", "result": ...}, ' \
               '{"answer": "run_again"} or {"answer": "fail"}'
    said = payload.get("answer")
    if said not in ANSWERS:
        return f"payload.answer must be one of {', '.join(ANSWERS)}"
    allowed = {"answer", "result"} if said == "happened" else {"answer"}
    extra = sorted(set(payload) - allowed)
    if extra:
        return f"payload.{extra[0]} is not part of a {said!r} answer"
    if said == "happened" and "result" not in payload:
        return 'a "happened" answer carries the effect\'s result in payload.result'
    return None


def answer_for(resume: list[Resolution], key: str) -> Resolution | None:
    """The answer, among a continuation's, to the question about effect ``key``."""
    for r in resume:
        if is_question(r.interrupt) and r.interrupt["metadata"].get("effect") == key:
            return r
    return None


def verdict(answer: Resolution) -> tuple[Answer, Any]:
    """What a person said (a cancelled question fails the run) and, for "happened",
    the result they gave."""
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    said = payload.get("answer")
    if answer.status != "resolved" or said not in ANSWERS:
        return "fail", None
    return said, payload.get("result")


def refused(answer: Resolution) -> AgentError:
    """The failure of a continuation whose person said an effect in doubt must not run."""
    meta = answer.interrupt.get("metadata") or {}
    what = meta.get("tool") or meta.get("effect")
    how = "cancelled the question" if answer.status != "resolved" else "said to fail the run"
    return AgentError(f"{what} may or may not have run before the server stopped, and the "
                      f"person {how}; nothing was run again.", code="effect_uncertain")
