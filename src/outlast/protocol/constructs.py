"""Open streaming constructs (messages, tool calls, reasoning, steps, subagents) and their events.

A server that resumes a stream mid-run must re-open, for a fresh client pipeline, whatever
@ag-ui/client's ``verifyEvents`` would otherwise reject continuations of; one that abandons a
run must close them. What the client does with the re-opening events (1.0.0 sources):

* ``TEXT_MESSAGE_START`` / ``REASONING_MESSAGE_START`` for a message id that already exists
  create nothing: the existing message, with its partial content, is kept and later
  ``*_CONTENT`` deltas append to it. Only the event's ``metadata`` is merged, so re-opening
  events carry none (it would overwrite keys later events have set).
* ``TOOL_CALL_START`` for a tool call id that already exists is idempotent: the call is not
  duplicated, its streamed ``arguments`` are untouched, only a different name is applied.
* ``verifyEvents`` keeps its state per run pipeline: continuations (``*_CONTENT``,
  ``TOOL_CALL_ARGS``, every ``*_END``, ``STEP_FINISHED``, ``SUBAGENT_FINISHED``) must follow an
  opener *in the same stream*, an opener for an id that is still open is an error, a
  continuation's ``subagentRunId`` must match its opener's, and ``RUN_FINISHED`` is refused
  while anything is open. Hence re-opening keeps the opener's ``subagentRunId``.
* A construct assembled from ``*_CHUNK`` events lives in a chunk lane: re-opening it with an
  explicit ``*_START`` would make the next chunk synthesize a second START (a verify error),
  so it is re-opened with an id-carrying, delta-less chunk instead. Closing it with an
  explicit ``*_END`` would likewise double the END the lane synthesizes; a lane closes on
  the next explicit event of its owner, so an empty ``STATE_DELTA`` is used when no other
  closing event of that owner follows.
* An opener for an id the client does not hold creates an empty message or call, so a
  client without the history needs a ``MESSAGES_SNAPSHOT`` first. It must precede the
  re-opening events: like ``RUN_*`` events, a snapshot closes every chunk lane.
* Open subagents count as constructs: ``SUBAGENT_FINISHED`` needs a ``SUBAGENT_STARTED`` in
  the same stream and ``RUN_FINISHED`` is refused while one is active.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from outlast.protocol.jsonutil import dumps

Event = dict[str, Any]
Key = tuple[str | None, ...]


@dataclass(slots=True, frozen=True)
class OpenConstruct:
    """One open construct: how to re-open it, how to close it, and the chunk lane it sits in."""

    reopen: Event
    close: Event
    lane: str | None  # the owner (`subagentRunId`) whose events close its chunk lane
    chunked: bool  # opened by a *_CHUNK event, so it lives in a chunk lane


def _tagged(event: Event, source: Event, *keys: str) -> Event:
    for key in ("subagentRunId", *keys):
        value = source.get(key)
        if value is not None:
            event[key] = value
    return event


def opener_key(event: Event) -> Key | None:
    """The key of the construct an explicit opening event opens (as ``verifyEvents``
    tracks it); else None."""
    etype = event["type"]
    if etype == "TEXT_MESSAGE_START":
        return ("text", event["messageId"])
    if etype == "TOOL_CALL_START":
        return ("tool", event["toolCallId"])
    if etype == "REASONING_MESSAGE_START":
        return ("reasoning_message", event["messageId"])
    if etype == "REASONING_START":
        return ("reasoning", event["messageId"])
    if etype == "STEP_STARTED":
        return ("step", event.get("subagentRunId"), event["stepName"])
    if etype == "SUBAGENT_STARTED":
        return ("subagent", event["subagentRunId"])
    return None


def opener(event: Event, chunked: bool) -> tuple[Key, OpenConstruct] | None:
    """The construct an opening event opens, keyed by ``opener_key``; else None."""
    key = opener_key(event)
    if key is None:
        return None
    etype = event["type"]
    tag = event.get("subagentRunId")
    reopen_type = etype
    if etype == "TEXT_MESSAGE_START":
        mid = event["messageId"]
        reopen = _tagged({"messageId": mid}, event, "role", "name")
        close = _tagged({"type": "TEXT_MESSAGE_END", "messageId": mid}, event)
        reopen_type = "TEXT_MESSAGE_CHUNK" if chunked else etype
    elif etype == "TOOL_CALL_START":
        tcid = event["toolCallId"]
        reopen = _tagged(
            {"toolCallId": tcid, "toolCallName": event["toolCallName"]}, event, "parentMessageId"
        )
        close = _tagged({"type": "TOOL_CALL_END", "toolCallId": tcid}, event)
        reopen_type = "TOOL_CALL_CHUNK" if chunked else etype
    elif etype == "REASONING_MESSAGE_START":
        mid = event["messageId"]
        # The chunk shape has no `role`; the explicit opener's role is always "reasoning".
        reopen = {"messageId": mid} if chunked else {"messageId": mid, "role": "reasoning"}
        reopen = _tagged(reopen, event)
        close = _tagged({"type": "REASONING_MESSAGE_END", "messageId": mid}, event)
        reopen_type = "REASONING_MESSAGE_CHUNK" if chunked else etype
    elif etype == "REASONING_START":
        mid = event["messageId"]
        reopen = _tagged({"messageId": mid}, event)
        close = _tagged({"type": "REASONING_END", "messageId": mid}, event)
    elif etype == "STEP_STARTED":
        name = event["stepName"]
        reopen = _tagged({"stepName": name}, event)
        close = _tagged({"type": "STEP_FINISHED", "stepName": name}, event)
    else:  # SUBAGENT_STARTED
        reopen = _tagged(
            {"name": event["name"]},
            event,
            "description",
            "parentSubagentRunId",
            "parentToolCallId",
            "parentMessageId",
        )
        close = {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": event["subagentRunId"],
            "message": "The run ended before this subagent finished.",
        }
    return key, OpenConstruct({"type": reopen_type, **reopen}, close, tag, chunked)


# Events that open a construct (or may, as a chunk): the one table of them.
OPENERS = frozenset({
    "TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK", "TOOL_CALL_START", "TOOL_CALL_CHUNK",
    "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CHUNK", "STEP_STARTED",
    "SUBAGENT_STARTED",
})

# Which opener key each closing event clears (verify's bookkeeping, not the reducer's).
CLOSERS: dict[str, str] = {
    "TEXT_MESSAGE_END": "text",
    "TOOL_CALL_END": "tool",
    "REASONING_MESSAGE_END": "reasoning_message",
    "REASONING_END": "reasoning",
    "STEP_FINISHED": "step",
    "SUBAGENT_FINISHED": "subagent",
    "SUBAGENT_ERROR": "subagent",
}


def closer_key(event: Event) -> Key:
    """The key of the construct a closing event (one of ``CLOSERS``) closes."""
    kind = CLOSERS[event["type"]]
    if kind == "step":
        return ("step", event.get("subagentRunId"), event["stepName"])
    if kind == "tool":
        return ("tool", event["toolCallId"])
    if kind == "subagent":
        return ("subagent", event["subagentRunId"])
    return (kind, event["messageId"])


def reopen_events(opened: dict[Key, OpenConstruct]) -> list[Event]:
    """Re-opening events for every open construct, in opening order."""
    out: list[Event] = []
    for key, construct in opened.items():
        event = dict(construct.reopen)
        parent = event.get("parentSubagentRunId")
        # verify refuses a parent subagent not started in this stream; one that already
        # finished cannot be re-opened, so the link is dropped rather than the subagent.
        if key[0] == "subagent" and parent is not None and ("subagent", parent) not in opened:
            del event["parentSubagentRunId"]
        out.append(event)
    return out


def closing_events(opened: dict[Key, OpenConstruct]) -> list[Event]:
    """Closing events for every open construct, newest first."""
    # A chunk construct is the newest in its lane (any explicit event of the lane's owner
    # would have closed it), so an explicit closer of that owner, emitted later, makes the
    # client synthesize its END first. Only a lane with no such closer needs one of its own.
    explicit_lanes = {c.lane for c in opened.values() if not c.chunked}
    out: list[Event] = []
    for construct in reversed(opened.values()):
        if not construct.chunked:
            out.append(dict(construct.close))
        elif construct.lane not in explicit_lanes:
            # An empty state delta is the explicit event that changes nothing else.
            delta: Event = {"type": "STATE_DELTA", "delta": []}
            out.append(_tagged(delta, {"subagentRunId": construct.lane}))
    return out


def construct_row(key: Key, construct: OpenConstruct | None) -> tuple[str, str | None]:
    """A construct as the log's index stores it: its key and, for one that opened, its
    body; ``None`` marks the close of the open construct with that key (JSON both)."""
    ckey = dumps(key)
    if construct is None:
        return ckey, None
    return ckey, dumps({"reopen": construct.reopen, "close": construct.close,
                        "lane": construct.lane, "chunked": construct.chunked})


def decode(rows: list[tuple[str, str]]) -> dict[Key, OpenConstruct]:
    """Open constructs read back from the index as ``(key, body)`` pairs, in opening
    order (``reopen_events``'s input)."""
    opened: dict[Key, OpenConstruct] = {}
    for ckey, body in rows:
        data = json.loads(body)
        opened[tuple(json.loads(ckey))] = OpenConstruct(
            data["reopen"], data["close"], data["lane"], data["chunked"])
    return opened
