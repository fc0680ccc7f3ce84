"""G11: what an agent emits is checked before it is stored.

Two checks, in order: the AG-UI schema (the ``ag_ui.core`` model of the event's type)
and the ordering rules ``@ag-ui/client``'s ``verifyEvents`` enforces (a continuation or
an end only while its construct is open, no second start of an open construct, a tool
result only for a tool call the thread knows). The first broken rule is reported as a
``ProtocolViolation`` naming the rule and the event type; the caller stores nothing.
"""

from __future__ import annotations

import typing
from collections.abc import Set as AbstractSet
from typing import Any, Dict, Literal, Optional  # noqa: UP035 (the models' spelling)

from ag_ui.core import Event as AnyEvent
from annotated_types import Ge, Le
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

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

# Each model's validator, called directly: ``model_validate``'s keyword handling costs
# as much again as validating a small event (the same check, same errors).
_VALIDATORS = {etype: model.__pydantic_validator__ for etype, model in MODELS.items()}

# -- the schema check's fast path -------------------------------------------------
# Most events are flat: a few strings, an optional integer timestamp, optional
# free-form fields. For those, a plain check of the wire keys, derived from the
# model's own fields, decides acceptance without building a model instance (and the
# garbage it leaves per event). It accepts only what the model accepts (exact types,
# wire names only, no extra keys); anything else goes to the model, which also words
# the error.
ANY, STR, OPT_STR, OPT_INT, OPT_BOOL, DICT, OPT_DICT, OPT_LITERAL = range(8)
_PLAIN: dict[Any, int] = {
    str: STR, Any: ANY, Optional[Any]: ANY,  # noqa: UP045 (the models' spelling)
    Optional[str]: OPT_STR, Optional[bool]: OPT_BOOL,  # noqa: UP045
    Dict[str, Any]: DICT, Optional[Dict[str, Any]]: OPT_DICT,  # noqa: UP006, UP045
}
Kind = tuple[int, Any]


def _field_kind(info: FieldInfo) -> Kind | None:
    """What the fast path checks of a field, or None if only the model can check it."""
    ann: Any = info.annotation
    if ann == Optional[int]:  # noqa: UP045
        # AG-UI's timestamps: inclusive bounds.
        bounds = {type(m): m for m in info.metadata}
        if set(bounds) == {Ge, Le} and len(info.metadata) == 2:
            return OPT_INT, (bounds[Ge].ge, bounds[Le].le)
        return None
    if info.metadata:
        return None
    if ann in _PLAIN:
        return _PLAIN[ann], None
    # Optional[Literal[...]] of strings (a message's role, say).
    args = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Union and len(args) == 2 and args[1] is type(None) \
            and typing.get_origin(args[0]) is Literal \
            and all(type(a) is str for a in typing.get_args(args[0])):
        return OPT_LITERAL, frozenset(typing.get_args(args[0]))
    return None


Flat = tuple[dict[str, Kind], frozenset[str]]


def _flat(model: type[BaseModel]) -> Flat | None:
    """A flat model's kinds by wire key and its required keys; None if not flat."""
    kinds: dict[str, Kind] = {}
    required = set()
    for name, info in model.model_fields.items():
        key = info.alias or name
        kind = (ANY, None) if name == "type" else _field_kind(info)  # found by its value
        if kind is None:
            return None
        kinds[key] = kind
        if info.is_required():
            required.add(key)
    return kinds, frozenset(required)


FLAT = {etype: flat for etype, model in MODELS.items() if (flat := _flat(model)) is not None}
"""The event types whose schema the fast path checks, by wire ``type``."""


def flat_ok(flat: Flat, event: Event) -> bool:
    """True if ``event`` fits the flat model's fields; False means "ask the model"."""
    kinds, required = flat
    for key, value in event.items():
        found = kinds.get(key)
        if found is None:
            return False
        kind, extra = found
        if kind == STR:
            ok = type(value) is str
        elif kind == ANY:
            ok = True
        elif kind == DICT:
            ok = type(value) is dict and all(type(k) is str for k in value)
        elif value is None:  # every other kind is optional
            ok = True
        elif kind == OPT_STR:
            ok = type(value) is str
        elif kind == OPT_INT:
            ok = type(value) is int and extra[0] <= value <= extra[1]
        elif kind == OPT_BOOL:
            ok = type(value) is bool
        elif kind == OPT_LITERAL:
            ok = type(value) is str and value in extra
        else:  # OPT_DICT
            ok = type(value) is dict and all(type(k) is str for k in value)
        if not ok:
            return False
    return all(k in event for k in required)

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
    validator = _VALIDATORS.get(etype) if isinstance(etype, str) else None
    if validator is None:
        raise ProtocolViolation("not an AG-UI event type", repr(etype))
    flat = FLAT.get(str(etype))
    if flat is not None and flat_ok(flat, event):
        return
    try:
        validator.validate_python(event)
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


def _check_one(event: Event, open_keys: AbstractSet[constructs.Key],
               fold: ThreadFold) -> tuple[constructs.Key | None, constructs.Key | None]:
    """One explicit (non-chunk) event against the open constructs. Returns the key it
    opens and the key it closes (either may be None); changes nothing."""
    etype = event["type"]
    found = constructs.opener(event, False)
    if found is not None:
        key = found[0]
        if key in open_keys:
            raise ProtocolViolation(
                f"{_NAMES[str(key[0])]} {key[-1]!r} is already open: a second start needs "
                "its end first", etype)
        return key, None
    continued = _continued_key(event)
    if continued is not None:
        if continued not in open_keys:
            raise ProtocolViolation(
                f"no open {_NAMES[str(continued[0])]} {continued[-1]!r}: this event needs "
                "the construct's start first", etype)
        return None, (continued if etype in constructs.CLOSERS else None)
    if etype == "TOOL_CALL_RESULT":
        call = event["toolCallId"]
        if ("tool", call) in open_keys:
            raise ProtocolViolation(f"tool call {call!r} is still open: end it before its "
                                    "result", etype)
        if not fold.knows_tool_call(call):
            raise ProtocolViolation(f"no tool call {call!r} in the thread to answer", etype)
    return None, None


def check_order(event: Event, fold: ThreadFold) -> None:
    """The event may follow what ``fold`` holds (its open constructs, its tool calls)."""
    etype = event["type"]
    if etype in RESERVED:
        raise ProtocolViolation("agents do not emit run lifecycle events; the engine starts "
                                "and ends every run", etype)
    if etype not in CHUNK_TYPES and not fold.chunk_lanes_open:
        _check_one(event, fold.open_keys, fold)
        return
    # Chunks become explicit events in the client's pipeline (and may close lanes first):
    # check what they expand to, on a copy, so nothing changes before the event is accepted.
    try:
        expanded = fold.preview_chunks(event)
    except ChunkError as exc:
        raise ProtocolViolation(str(exc), etype) from None
    open_keys = set(fold.open_keys)
    for ev in expanded:
        opened, closed = _check_one(ev, open_keys, fold)
        if opened is not None:
            open_keys.add(opened)
        if closed is not None:
            open_keys.discard(closed)


def check(event: Event, fold: ThreadFold) -> None:
    """Both checks; raises ``ProtocolViolation`` for the first broken rule."""
    check_schema(event)
    check_order(event, fold)
