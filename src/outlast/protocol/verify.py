"""G11: what an agent emits is checked before it is stored.

Two checks, in order: the AG-UI schema (the ``ag_ui.core`` model of the event's type)
and the ordering rules ``@ag-ui/client``'s ``verifyEvents`` enforces (a continuation or
an end only while its construct is open, no second start of an open construct, a tool
result only for a tool call the thread knows), and what stricter clients and the
independent validator add: no start of a message or tool call that has already ended.
The first broken rule is reported as a ``ProtocolViolation`` naming the rule and the
event type; the caller stores nothing.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
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
    args = typing.get_args(ann)
    if typing.get_origin(ann) is typing.Union and str in args:
        # A string or something richer (a tool result's content): a string is checked
        # here, anything else by the model.
        return (OPT_STR if type(None) in args else STR), None
    # Optional[Literal[...]] of strings (a message's role, say).
    if typing.get_origin(ann) is typing.Union and len(args) == 2 and args[1] is type(None) \
            and typing.get_origin(args[0]) is Literal \
            and all(type(a) is str for a in typing.get_args(args[0])):
        return OPT_LITERAL, frozenset(typing.get_args(args[0]))
    return None


@dataclass(frozen=True, slots=True)
class Flat:
    """What the fast path checks of one flat model, by wire key."""

    keys: frozenset[str]  # every wire key the model has
    strings: tuple[str, ...]  # required strings: the common case, checked first
    others: dict[str, Kind]  # every other field's kind
    required: tuple[str, ...]  # required fields that are not strings


def _flat(model: type[BaseModel]) -> Flat | None:
    """A flat model's checks; None if some field is more than the fast path checks."""
    strings: list[str] = []
    others: dict[str, Kind] = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        if name == "type":  # the caller found the model by this very value
            continue
        kind = _field_kind(info)
        if kind is None:
            return None
        if kind[0] == STR:
            strings.append(key)
            continue
        others[key] = kind
        if info.is_required():
            required.append(key)
    return Flat(frozenset(["type", *strings, *others]), tuple(strings), others,
                tuple(required))


FLAT = {etype: flat for etype, model in MODELS.items() if (flat := _flat(model)) is not None}
"""The event types whose schema the fast path checks, by wire ``type``."""


def _kind_ok(kind: int, extra: Any, value: Any) -> bool:
    if kind == STR:
        return type(value) is str
    if kind == ANY:
        return True
    if kind == DICT:
        return type(value) is dict and all(type(k) is str for k in value)
    if value is None:  # every other kind is optional
        return True
    if kind == OPT_STR:
        return type(value) is str
    if kind == OPT_INT:
        return type(value) is int and extra[0] <= value <= extra[1]
    if kind == OPT_BOOL:
        return type(value) is bool
    if kind == OPT_LITERAL:
        return type(value) is str and value in extra
    return type(value) is dict and all(type(k) is str for k in value)  # OPT_DICT


def flat_ok(flat: Flat, event: Event) -> bool:
    """True if ``event`` fits the flat model's fields; False means "ask the model"."""
    if not flat.keys.issuperset(event):
        return False  # a key the model has no wire name for (or a snake_case one)
    for key in flat.strings:
        if type(event.get(key)) is not str:
            return False
    if len(event) > len(flat.strings) + 1:  # more than the type and the strings
        others = flat.others
        for key, value in event.items():
            found = others.get(key)
            if found is not None and not _kind_ok(found[0], found[1], value):
                return False
    for key in flat.required:
        if key not in event:
            return False
    return True


_POINTER = re.compile(r"(/([^/~]|~[01])*)*")  # the model's JsonPointer pattern
_TIMESTAMP = FLAT["TEXT_MESSAGE_CONTENT"].others["timestamp"]  # every event's, alike
_STATE_DELTA_KEYS = frozenset({"type", "delta", "timestamp"})
_VALUED = frozenset({"op", "path", "value"})
_PATCH_KEYS = {"add": _VALUED, "replace": _VALUED, "test": _VALUED,
               "remove": frozenset({"op", "path"})}


def patch_ok(event: Event) -> bool:
    """True if a ``STATE_DELTA`` fits its model as the common patch does (operations of
    exactly their own keys, pointers the model's pattern accepts, the type, the delta and
    a timestamp at most); False means "ask the model", as ``flat_ok``."""
    if not _STATE_DELTA_KEYS.issuperset(event) or "delta" not in event:
        return False
    if "timestamp" in event and not _kind_ok(*_TIMESTAMP, event["timestamp"]):
        return False
    delta = event["delta"]
    if type(delta) is not list:
        return False
    for operation in delta:
        if type(operation) is not dict:
            return False
        op = operation.get("op")
        keys = _PATCH_KEYS.get(op) if type(op) is str else None
        path = operation.get("path")
        if keys is None or len(operation) != len(keys) or not keys.issuperset(operation) \
                or type(path) is not str or _POINTER.fullmatch(path) is None:
            return False
    return True


# The deltas (most of what an agent emits): the kind of construct each needs open and
# the field naming it.
_DELTAS = {"TEXT_MESSAGE_CONTENT": ("text", "messageId"), "TOOL_CALL_ARGS": ("tool", "toolCallId"),
           "REASONING_MESSAGE_CONTENT": ("reasoning_message", "messageId")}
_NAMES = {"text": "text message", "tool": "tool call", "reasoning_message": "reasoning message",
          "reasoning": "reasoning phase", "step": "step", "subagent": "subagent"}


_LANES = {etype: (kind, field, FLAT[etype]) for etype, (kind, field) in _DELTAS.items()}


def delta_key(event: Event) -> constructs.Key | None:
    """For a content delta whose schema the fast path accepts (as ``check_schema`` would),
    the key of the construct it continues; None for any other event, which the two
    checks then decide. A delta is accepted by ``check_order`` exactly when this key is
    open and no chunk lane is (``ThreadFold.continues``)."""
    etype = event.get("type")
    lane = _LANES.get(etype) if type(etype) is str else None
    if lane is None:
        return None
    kind, field, flat = lane
    name = event.get(field)
    if len(event) == 3:  # the type, the name and the delta, both strings: the usual shape
        if type(name) is not str or type(event.get("delta")) is not str:
            return None
    elif not flat_ok(flat, event):
        return None
    return (kind, name)


def check_schema(event: Event) -> None:
    """The event fits its type's AG-UI model (required fields present, types right)."""
    etype = event.get("type")
    validator = _VALIDATORS.get(etype) if isinstance(etype, str) else None
    if validator is None:
        raise ProtocolViolation("not an AG-UI event type", repr(etype))
    flat = FLAT.get(str(etype))
    if flat is not None and flat_ok(flat, event):
        return
    if etype == "STATE_DELTA" and patch_ok(event):
        return
    try:
        validator.validate_python(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "event"
        raise ProtocolViolation(f"{where}: {first['msg']}", str(etype)) from None


def _continued_key(event: Event) -> constructs.Key | None:
    """The key of the open construct a delta or an end continues; else None."""
    etype = event["type"]
    delta = _DELTAS.get(etype)
    if delta is not None:
        return (delta[0], event[delta[1]])
    if etype in constructs.CLOSERS:
        return constructs.closer_key(event)
    return None


def _check_not_ended(key: constructs.Key, fold: ThreadFold, etype: str) -> None:
    """A message or tool call is started once: an id the thread already holds names a
    completed construct, and strict AG-UI clients refuse a second start of it (the
    validator's AGUI104 and AGUI205)."""
    kind = key[0]
    if kind in ("text", "reasoning_message") and fold.holds_message(key[-1]):
        raise ProtocolViolation(
            f"message {key[-1]!r} has already ended: a new message needs a new messageId "
            "(metadata belongs on the message's events while it is open)", etype)
    if kind == "tool" and fold.knows_tool_call(str(key[-1])):
        raise ProtocolViolation(
            f"tool call {key[-1]!r} has already ended: a new call needs a new toolCallId",
            etype)


def _check_one(event: Event, open_keys: AbstractSet[constructs.Key],
               fold: ThreadFold) -> tuple[constructs.Key | None, constructs.Key | None]:
    """One explicit (non-chunk) event against the open constructs. Returns the key it
    opens and the key it closes (either may be None); changes nothing."""
    etype = event["type"]
    key = constructs.opener_key(event)
    if key is not None:
        if key in open_keys:
            raise ProtocolViolation(
                f"{_NAMES[str(key[0])]} {key[-1]!r} is already open: a second start needs "
                "its end first", etype)
        _check_not_ended(key, fold, etype)
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
    delta = _DELTAS.get(etype)
    if delta is not None and (delta[0], event[delta[1]]) in fold.open_keys \
            and not fold.chunk_lanes_open:
        return  # the common case, decided as _check_one would
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
