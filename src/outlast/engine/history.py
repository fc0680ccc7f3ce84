"""History divergence: does an input carry a stored message with other content?

AG-UI front ends resend the whole history with every run; the server keeps its own
copy and appends only what is new (by id). An edited earlier message would then be
silently dropped, so a chat UI's "edit and regenerate" would answer the old question.
Instead such an input is refused with ``history_diverged`` (spec §3); omitting stored
messages stays fine, and the way to edit is to fork.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import orjson

from outlast.errors import HistoryDiverged
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps

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


def _canonical(value: Any) -> Any:
    """A JSON value in a form equal for equal values: a string as itself (the common
    content), anything else as JSON with sorted keys (bytes: never equal to a string)."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson refuses (integers past 64 bits)
        return json.dumps(value, sort_keys=True).encode()


def essence(message: dict[str, Any]) -> tuple[Any, ...]:
    """What a message says, without the spellings clients may differ in (an absent
    versus empty content, re-serialized tool arguments, extra bookkeeping fields)."""
    calls = tuple(
        (call.get("id"), (call.get("function") or {}).get("name"),
         _canonical(_arguments((call.get("function") or {}).get("arguments"))))
        for call in message.get("toolCalls") or ()
        if isinstance(call, dict))
    content = message.get("content")
    return (message.get("role"), _canonical("" if content is None else content),
            message.get("toolCallId"), calls)


def _checked(message: dict[str, Any]) -> bool:
    return message.get("role") not in _UNCHECKED_ROLES


class ResentHistory:
    """The messages an input resends, made ready before admission's transaction, which
    holds the store's writer: there each stored copy is first compared as text with the
    resent message's JSON (equal for a client that resends what it was given), and
    parsed and compared by ``essence`` only when that differs."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self._incoming: dict[str, list[dict[str, Any]]] = {}
        for message in messages:
            if isinstance(mid := message.get("id"), str):
                self._incoming.setdefault(mid, []).append(message)
        self._order = {mid: i for i, mid in enumerate(self._incoming)}
        self._texts = {mid: dumps(same[0]) for mid, same in self._incoming.items()
                       if len(same) == 1}

    @property
    def ids(self) -> list[str]:
        """The ids of the resent messages: the stored copies ``check`` needs."""
        return list(self._incoming)

    def diverged(self, stored: Iterable[tuple[str, str]]) -> list[str]:
        """Ids of resent messages the thread holds (``stored``: ``(id, JSON)`` of its
        messages with those ids) with other content, in the input's order."""
        out = []
        for mid, body in stored:
            if body == self._texts.get(mid):
                continue
            mine = json.loads(body)
            if not _checked(mine):
                continue
            if any(_checked(m) and essence(m) != essence(mine)
                   for m in self._incoming.get(mid, ())):
                out.append(mid)
        return sorted(out, key=self._order.__getitem__)

    def check(self, stored: Iterable[tuple[str, str]]) -> None:
        """Refuse an input whose resent messages say other than the thread holds (spec
        §3 ``history_diverged``); admission calls it, in its transaction, for a new run
        only (a retry of an admitted run attaches, G3). ``stored`` is read by key, never
        the rest of a long thread."""
        ids = self.diverged(stored)
        if ids:
            raise HistoryDiverged(
                f"message {ids[0]!r} differs from the thread's message with that id; the "
                "thread keeps one version of each message: to edit it, fork the thread "
                "before it (POST /threads/{id}/fork with beforeMessageId)",
                messageId=ids[0], messageIds=ids)


def new_messages(fold: ThreadFold, incoming: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages the thread does not have yet, by id: AG-UI front ends
    resend the whole history, other clients only the new message; nothing duplicates."""
    known = {m.get("id") for m in fold.messages}
    out = []
    for message in incoming:
        if message.get("id") not in known:
            out.append(message)
            known.add(message.get("id"))
    return out


def sharing_history(fold: ThreadFold, run_input: dict[str, Any]) -> dict[str, Any]:
    """The input with each message the thread holds unchanged replaced by the thread's
    own copy: front ends resend the whole history, and the agent's model of the input
    then shares the fold's strings instead of keeping a second copy for the run's life."""
    incoming = run_input.get("messages")
    if not isinstance(incoming, list) or not incoming:
        return run_input
    shared = []
    for message in incoming:
        held = fold.message(message.get("id")) if isinstance(message, dict) else None
        shared.append(held if held is not None and held == message else message)
    return {**run_input, "messages": shared}
