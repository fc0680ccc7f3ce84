"""G11: what an agent emits is checked before it is stored.

Two checks, in order: the AG-UI schema (the ``ag_ui.core`` model of the event's type)
and the ordering rules ``@ag-ui/client``'s ``verifyEvents`` enforces (a continuation or
an end only while its construct is open, no second start of an open construct, a tool
result only for a tool call the thread knows). The first broken rule is reported as a
``ProtocolViolation`` naming the rule and the event type; the caller stores nothing.
"""

from __future__ import annotations

import typing
from typing import Any

from ag_ui.core import Event as AnyEvent
from pydantic import BaseModel, ValidationError

from outlast.protocol import constructs
from outlast.protocol.chunks import CHUNK_TYPES, ChunkError
from outlast.protocol.events import RESERVED
from outlast.protocol.fold import ThreadFold

Event = dict[str, Any]


class ProtocolViolation(Exception):
    """An event breaks the AG-UI schema or its ordering rules."""

    def __init__(self, rule: str, event_type: str) -> None:
        super().__init__(f"{event_type}: {rule}")
        self.rule = rule
        self.event_type = event_type


def _models() -> dict[str, type[BaseModel]]:
    union = typing.get_args(AnyEvent)[0]
    out: dict[str, type[BaseModel]] = {}
    for model in typing.get_args(union):
        default = model.model_fields["type"].default
        out[getattr(default, "value", default)] = model
    return out


MODELS = _models()
"""Each AG-UI event type's model, by its wire ``type``."""

# Events that continue an open construct, and the construct kind they need open.
_CONTINUES = {
    "TEXT_MESSAGE_CONTENT": "text",
    "TOOL_CALL_ARGS": "tool",
    "REASONING_MESSAGE_CONTENT": "reasoning_message",
    **constructs.CLOSERS,
}
_NAMES = {"text": "text message", "tool": "tool call", "reasoning_message": "reasoning message",
          "reasoning": "reasoning phase", "step": "step", "subagent": "subagent"}


def check_schema(event: Event) -> None:
    """The event fits its type's AG-UI model (required fields present, types right)."""
    etype = event.get("type")
    model = MODELS.get(etype) if isinstance(etype, str) else None
    if model is None:
        raise ProtocolViolation("not an AG-UI event type", repr(etype))
    try:
        model.model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "event"
        raise ProtocolViolation(f"{where}: {first['msg']}", str(etype)) from None


def _continued_key(event: Event) -> constructs.Key | None:
    kind = _CONTINUES.get(event["type"])
    if kind is None:
        return None
    if kind == "text" or kind == "reasoning_message":
        return (kind, event["messageId"])
    if kind == "tool":
        return ("tool", event["toolCallId"])
    return constructs.closer_key(event)


def _check_one(event: Event, open_keys: set[constructs.Key], fold: ThreadFold) -> None:
    """One explicit (non-chunk) event against the open constructs; updates ``open_keys``."""
    etype = event["type"]
    found = constructs.opener(event, False)
    if found is not None:
        key = found[0]
        if key in open_keys:
            raise ProtocolViolation(
                f"{_NAMES[str(key[0])]} {key[-1]!r} is already open: a second start needs "
                "its end first", etype)
        open_keys.add(key)
        return
    continued = _continued_key(event)
    if continued is not None:
        if continued not in open_keys:
            raise ProtocolViolation(
                f"no open {_NAMES[str(continued[0])]} {continued[-1]!r}: this event needs "
                "the construct's start first", etype)
        if etype in constructs.CLOSERS:
            open_keys.discard(continued)
        return
    if etype == "TOOL_CALL_RESULT":
        call = event["toolCallId"]
        if ("tool", call) in open_keys:
            raise ProtocolViolation(f"tool call {call!r} is still open: end it before its "
                                    "result", etype)
        if not fold.knows_tool_call(call):
            raise ProtocolViolation(f"no tool call {call!r} in the thread to answer", etype)


def check_order(event: Event, fold: ThreadFold) -> None:
    """The event may follow what ``fold`` holds (its open constructs, its tool calls)."""
    etype = event["type"]
    if etype in RESERVED:
        raise ProtocolViolation("agents do not emit run lifecycle events; the engine starts "
                                "and ends every run", etype)
    open_keys = fold.open_keys()
    if etype not in CHUNK_TYPES and not fold.chunk_lanes_open:
        _check_one(event, open_keys, fold)
        return
    # Chunks become explicit events in the client's pipeline (and may close lanes first):
    # check what they expand to, on a copy, so nothing changes before the event is accepted.
    try:
        expanded = fold.preview_chunks(event)
    except ChunkError as exc:
        raise ProtocolViolation(str(exc), etype) from None
    for ev in expanded:
        _check_one(ev, open_keys, fold)


def check(event: Event, fold: ThreadFold) -> None:
    """Both checks; raises ``ProtocolViolation`` for the first broken rule."""
    check_schema(event)
    check_order(event, fold)
