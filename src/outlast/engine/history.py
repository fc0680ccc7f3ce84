"""History divergence: does an input carry a stored message with other content?

AG-UI front ends resend the whole history with every run; the server keeps its own
copy and appends only what is new (by id). An edited earlier message would then be
silently dropped, so a chat UI's "edit and regenerate" would answer the old question.
Instead such an input is refused with ``history_diverged`` (spec §3); omitting stored
messages stays fine, and the way to edit is to fork.
"""

from __future__ import annotations

import json
from typing import Any

from outlast.errors import HistoryDiverged

# Annotations the server or the client may keep on its own (reasoning, activity): a
# client that never saw them, or rendered them differently, has not edited anything.
_UNCHECKED_ROLES = frozenset({"reasoning", "activity"})


def _arguments(value: Any) -> Any:
    """Tool call arguments compared as JSON when they parse, else as sent."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _content(value: Any) -> Any:
    return "" if value is None else value


def essence(message: dict[str, Any]) -> tuple[Any, ...]:
    """What a message says, without the spellings clients may differ in (an absent
    versus empty content, re-serialized tool arguments, extra bookkeeping fields)."""
    calls = tuple(
        (call.get("id"), (call.get("function") or {}).get("name"),
         json.dumps(_arguments((call.get("function") or {}).get("arguments")), sort_keys=True))
        for call in message.get("toolCalls") or ()
        if isinstance(call, dict))
    return (message.get("role"), json.dumps(_content(message.get("content")), sort_keys=True),
            message.get("toolCallId"), calls)


def diverged(stored: list[dict[str, Any]], incoming: list[dict[str, Any]]) -> list[str]:
    """Ids of ``incoming`` messages the thread holds (``stored``) with other content."""
    by_id = {m.get("id"): m for m in stored}
    out: list[str] = []
    for message in incoming:
        mine = by_id.get(message.get("id"))
        if mine is None or mine.get("role") in _UNCHECKED_ROLES \
                or message.get("role") in _UNCHECKED_ROLES:
            continue
        if essence(mine) != essence(message):
            out.append(str(message.get("id")))
    return out


def check_history(stored: list[dict[str, Any]], incoming: list[dict[str, Any]]) -> None:
    """Refuse an input whose resent messages say other than the thread holds (spec §3
    ``history_diverged``); admission calls it, in its transaction, for a new run only
    (a retry of an admitted run attaches, G3). ``stored``: the thread's messages with
    the ids the input carries, read by key, never the rest of a long thread."""
    ids = diverged(stored, incoming)
    if ids:
        raise HistoryDiverged(
            f"message {ids[0]!r} differs from the thread's message with that id; the "
            "thread keeps one version of each message: to edit it, fork the thread "
            "before it (POST /threads/{id}/fork with beforeMessageId)",
            messageId=ids[0], messageIds=ids)
