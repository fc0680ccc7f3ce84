"""``history_diverged`` (spec §3): which resent messages differ from the thread's copies.

Admission hands ``ResentHistory.check`` the stored copies as ``(id, JSON)``, in whatever
order the database returns them; a copy whose text is the resent message's JSON is the
same message, any other is compared by what it says.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from outlast.engine.history import ResentHistory
from outlast.errors import HistoryDiverged
from outlast.protocol.jsonutil import dumps

USER = {"id": "u1", "role": "user", "content": "What is in the repository?"}
CALL = {"id": "a1", "role": "assistant", "content": None, "toolCalls": [
    {"id": "c1", "type": "function",
     "function": {"name": "read", "arguments": '{"path": "a.py", "lines": [1, 2]}'}}]}
TOOL = {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "print(1)"}
PARTS = {"id": "u2", "role": "user", "content": [{"type": "text", "text": "hi"},
                                                  {"type": "binary", "mimeType": "image/png",
                                                   "data": "AAAA"}]}
HISTORY = [USER, CALL, TOOL, PARTS]


def stored(*messages: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["id"], dumps(m)) for m in reversed(messages)]  # not in the input's order


def test_a_history_resent_unchanged_is_accepted() -> None:
    ResentHistory(HISTORY).check(stored(*HISTORY))
    ResentHistory(HISTORY).check([])  # nothing stored yet: a new thread
    ResentHistory([USER]).check(stored(USER))


def test_spellings_that_say_the_same_are_accepted() -> None:
    """Other key orders, an empty content for none, re-serialized tool arguments and
    fields only one side keeps: the text differs, what the message says does not."""
    respelled = [
        {"content": USER["content"], "role": "user", "id": "u1", "name": "me"},
        {**CALL, "content": "", "toolCalls": [
            {**CALL["toolCalls"][0], "function": {
                "name": "read", "arguments": json.dumps({"lines": [1, 2], "path": "a.py"})}}]},
        {"toolCallId": "c1", "content": "print(1)", "role": "tool", "id": "t1"},
        {**PARTS, "content": [{"text": "hi", "type": "text"},
                              {"data": "AAAA", "mimeType": "image/png", "type": "binary"}]},
    ]
    ResentHistory(respelled).check(stored(*HISTORY))


@pytest.mark.parametrize("edited", [
    {**USER, "content": "What is in the other repository?"},
    {**TOOL, "content": "forged"},
    {**TOOL, "toolCallId": "c2"},
    {**CALL, "toolCalls": [{**CALL["toolCalls"][0], "function": {
        "name": "read", "arguments": '{"path": "b.py", "lines": [1, 2]}'}}]},
    {**PARTS, "content": [{"type": "text", "text": "hi"}]},
    {**USER, "content": [{"type": "text", "text": USER["content"]}]},  # a list, not text
    {**USER, "role": "assistant"},
])
def test_an_edited_message_is_refused_with_its_id(edited: dict[str, Any]) -> None:
    history = [edited if m["id"] == edited["id"] else m for m in HISTORY]
    with pytest.raises(HistoryDiverged) as refused:
        ResentHistory(history).check(stored(*HISTORY))
    assert refused.value.fields["messageId"] == edited["id"]


def test_every_edited_message_is_named_in_the_inputs_order() -> None:
    history = [{**m, "content": "edited"} for m in HISTORY]
    assert ResentHistory(history).diverged(stored(*HISTORY)) == ["u1", "a1", "t1", "u2"]


def test_a_repeated_id_is_checked_in_each_of_its_copies() -> None:
    assert ResentHistory([USER, {**USER, "content": "other"}]).diverged(stored(USER)) == ["u1"]
    assert ResentHistory([USER, dict(USER)]).diverged(stored(USER)) == []


def test_reasoning_and_activity_are_not_checked() -> None:
    reasoning = {"id": "r1", "role": "reasoning", "content": "thinking"}
    assert ResentHistory([{**reasoning, "content": "other"}]).diverged(stored(reasoning)) == []
    assert ResentHistory([{"id": "u1", "role": "activity", "content": "x"}]).diverged(
        stored(USER)) == []


def test_integers_past_64_bits_compare_exactly() -> None:
    big = {"id": "a2", "role": "assistant", "content": None, "toolCalls": [
        {"id": "c9", "type": "function",
         "function": {"name": "f", "arguments": '{"n": 18446744073709551617}'}}]}
    ResentHistory([big]).check(stored(big))
    off_by_one = {**big, "toolCalls": [{**big["toolCalls"][0], "function": {
        "name": "f", "arguments": '{"n": 18446744073709551616}'}}]}
    assert ResentHistory([off_by_one]).diverged(stored(big)) == ["a2"]
