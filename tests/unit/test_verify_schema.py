"""G11's schema check: the fast path for flat events accepts only what the AG-UI model
accepts, and the events agents emit most take it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import ValidationError

from outlast.protocol.verify import (
    FLAT,
    MODELS,
    ProtocolViolation,
    check_schema,
    flat_ok,
    patch_ok,
)

# Values of every JSON shape, and the ones a fast path gets wrong most easily.
VALUES: list[Any] = [
    None, "", "x", "déjà vu", 0, 1, -1, 2**53 - 1, 2**53, -(2**53), 1.0, 1.5, True, False,
    [], ["x"], {}, {"a": 1}, {1: "a"}, {"a": None}, "assistant", "user", "tool", "reasoning",
    b"bytes", ("t",),
]


def model_accepts(etype: str, event: dict[str, Any]) -> bool:
    try:
        MODELS[etype].model_validate(event)
    except ValidationError:
        return False
    return True


def test_the_common_events_are_flat() -> None:
    for etype in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                  "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "STEP_STARTED",
                  "REASONING_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK"):
        assert etype in FLAT, etype
    assert flat_ok(FLAT["TEXT_MESSAGE_CONTENT"], {
        "type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi",
        "timestamp": 1_700_000_000_000})
    assert flat_ok(FLAT["TEXT_MESSAGE_START"], {
        "type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"})


@pytest.mark.parametrize("etype", sorted(FLAT))
def test_the_fast_path_accepts_only_what_the_model_accepts(etype: str) -> None:
    rng = random.Random(etype)
    fields = MODELS[etype].model_fields
    wire = [info.alias or name for name, info in fields.items() if name != "type"]
    snake = [name for name, info in fields.items() if info.alias and info.alias != name]
    fast = 0
    for _ in range(3000):
        event: dict[str, Any] = {"type": etype}
        for key in wire:
            if rng.random() < 0.75:  # half the time a plain string, which most fields take
                event[key] = rng.choice(VALUES) if rng.random() < 0.5 else "x"
        if rng.random() < 0.1:
            event["extra"] = rng.choice(VALUES)
        if snake and rng.random() < 0.1:
            event[rng.choice(snake)] = rng.choice(VALUES)
        if flat_ok(FLAT[etype], event):
            fast += 1
            assert model_accepts(etype, event), event
    # And it is taken: events of plain strings and a timestamp go the fast way.
    plain = {"type": etype, **{k: "v" for k in wire if fields_required(etype, k)}}
    if model_accepts(etype, plain):
        assert flat_ok(FLAT[etype], plain), plain
    assert fast > 0 or not model_accepts(etype, plain)


def fields_required(etype: str, key: str) -> bool:
    for name, info in MODELS[etype].model_fields.items():
        if (info.alias or name) == key:
            return info.is_required()
    raise KeyError(key)


@pytest.mark.parametrize("event, rule", [
    ({"type": "TEXT_MESSAGE_CONTENT", "messageId": 1, "delta": "x"},
     "messageId: Input should be a valid string"),
    ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"}, "delta: Field required"),
    ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "robot"}, "role:"),
    ({"type": "TOOL_CALL_START", "toolCallId": "c"}, "toolCallName: Field required"),
    ({"type": "TEXT_MESSAGE_END", "messageId": "m", "timestamp": 2**60}, "timestamp:"),
])
def test_what_the_fast_path_refuses_the_model_words(event: dict[str, Any], rule: str) -> None:
    assert not flat_ok(FLAT[event["type"]], event)
    with pytest.raises(ProtocolViolation) as caught:
        check_schema(event)
    assert caught.value.rule.startswith(rule), caught.value.rule
    assert caught.value.event_type == event["type"]


def test_what_the_model_alone_accepts_still_passes() -> None:
    # Snake-case names and extra keys are the model's to judge (it allows both).
    event = {"type": "TEXT_MESSAGE_CONTENT", "message_id": "m", "delta": "x", "extra": 1}
    assert not flat_ok(FLAT["TEXT_MESSAGE_CONTENT"], event)
    check_schema(event)


POINTERS = ["", "/", "/a", "/a/b", "/a/0", "/a~0b", "/a~1b", "/a~2", "a", "/a/~", "~1",
            "/todos/3/status", "/x\n", "/é"]


def test_the_state_delta_fast_path_accepts_only_what_the_model_accepts() -> None:
    rng = random.Random(7)
    fast = 0
    for _ in range(4000):
        delta: Any = []
        for _ in range(rng.randint(0, 3)):
            operation: dict[Any, Any] = {}
            if rng.random() < 0.95:
                operation["op"] = rng.choice(["add", "replace", "remove", "test", "move",
                                              "copy", "bogus", 1, ["add"], None])
            if rng.random() < 0.9:
                operation["path"] = rng.choice(POINTERS) if rng.random() < 0.8 \
                    else rng.choice(VALUES)
            if rng.random() < 0.7:
                operation["value"] = rng.choice(VALUES)
            if rng.random() < 0.1:
                operation[rng.choice(["from", "extra", 1])] = rng.choice(POINTERS)
            delta.append(operation if rng.random() < 0.95 else rng.choice(VALUES))
        event: dict[str, Any] = {"type": "STATE_DELTA"}
        if rng.random() < 0.95:
            event["delta"] = delta if rng.random() < 0.9 else rng.choice(VALUES)
        if rng.random() < 0.3:
            event["timestamp"] = rng.choice(VALUES)
        if rng.random() < 0.05:
            event[rng.choice(["extra", "rawEvent", "raw_event"])] = rng.choice(VALUES)
        if patch_ok(event):
            fast += 1
            assert model_accepts("STATE_DELTA", event), event
    assert fast > 500
    # The shape agents send takes it.
    assert patch_ok({"type": "STATE_DELTA", "timestamp": 1_700_000_000_000, "delta": [
        {"op": "replace", "path": "/todos/0/status", "value": "done"},
        {"op": "add", "path": "/log/-", "value": {"at": 1}}, {"op": "remove", "path": "/x"}]})


def test_a_state_delta_the_fast_path_refuses_is_worded_by_the_model() -> None:
    event = {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "todos", "value": 1}]}
    assert not patch_ok(event)
    with pytest.raises(ProtocolViolation) as caught:
        check_schema(event)
    assert "delta" in caught.value.rule and caught.value.event_type == "STATE_DELTA"
