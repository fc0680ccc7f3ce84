"""The one-pass path of a content delta accepts exactly what G11's two checks accept.

``verify.delta_key`` with ``ThreadFold.continues`` may only ever say yes where
``check_schema`` and ``check_order`` both do, and must say yes for the usual shapes
(or the fast path would be no faster); everything else falls to the two checks.
"""

from __future__ import annotations

from typing import Any

import pytest

from outlast.protocol.fold import ThreadFold
from outlast.protocol.verify import ProtocolViolation, check_order, check_schema, delta_key


def _fold() -> ThreadFold:
    fold = ThreadFold()
    fold.apply({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    fold.apply({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "t"})
    fold.apply({"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"})
    return fold


def _checks_accept(event: dict[str, Any], fold: ThreadFold) -> bool:
    try:
        check_schema(dict(event))
        check_order(dict(event), fold)
    except ProtocolViolation:
        return False
    return True


EVENTS: list[dict[str, Any]] = [
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "so"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "timestamp": 5},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "metadata": {"a": 1}},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "rawEvent": [1]},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "timestamp": 2**60},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "extra": 1},
    {"type": "TEXT_MESSAGE_CONTENT", "message_id": "m", "delta": "hi"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 3},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": 7, "delta": "hi"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "other", "delta": "hi"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "m", "delta": "{"},
    {"type": "TEXT_MESSAGE_CONTENT", "delta": "hi", "x": "m"},
    {"type": ["TEXT_MESSAGE_CONTENT"], "messageId": "m", "delta": "hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
]


@pytest.mark.parametrize("event", EVENTS)
def test_the_fast_path_says_yes_only_where_both_checks_do(event: dict[str, Any]) -> None:
    fold = _fold()
    key = delta_key(event)
    if key is not None and fold.continues(key):
        assert _checks_accept(event, fold)


def test_the_usual_deltas_take_the_fast_path() -> None:
    fold = _fold()
    for event in EVENTS[:6]:
        key = delta_key(event)
        assert key is not None and fold.continues(key), event


def test_a_chunk_lane_open_sends_every_delta_to_the_checks() -> None:
    fold = _fold()
    fold.apply({"type": "TEXT_MESSAGE_CHUNK", "messageId": "k", "delta": "a"})
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}
    key = delta_key(event)
    assert key is not None and not fold.continues(key)


def test_a_delta_folds_the_same_by_either_path() -> None:
    one, two = _fold(), _fold()
    for event in EVENTS[:6]:
        one.apply({**event, "timestamp": 1})
        two.apply(event)
    assert one.messages == two.messages
