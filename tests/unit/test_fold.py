"""Unit tests for outlast.protocol.fold (no I/O)."""

from __future__ import annotations

import copy
import logging
import random
from typing import Any

import jsonpatch
import pytest
from ag_ui import core
from pydantic import TypeAdapter

from outlast.protocol.chunks import ChunkError, ChunkExpander, expand_chunks
from outlast.protocol.fold import ThreadFold, fold_events
from outlast.protocol.jsonutil import (
    _NOT_PLAIN,
    PATCH_ERRORS,
    _plain_patch,
    apply_json_patch,
    clone_json,
)

Event = dict[str, Any]


def start(mid: str, role: str | None = "assistant", **kw: Any) -> Event:
    event = {"type": "TEXT_MESSAGE_START", "messageId": mid, **kw}
    if role is not None:
        event["role"] = role
    return event


def content(mid: str, delta: str, **kw: Any) -> Event:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": delta, **kw}


def end(mid: str, **kw: Any) -> Event:
    return {"type": "TEXT_MESSAGE_END", "messageId": mid, **kw}


def text(mid: str, *deltas: str, **kw: Any) -> list[Event]:
    return [start(mid, **kw), *(content(mid, d) for d in deltas), end(mid)]


def tool_start(tcid: str, name: str = "f", parent: str | None = None, **kw: Any) -> Event:
    event = {"type": "TOOL_CALL_START", "toolCallId": tcid, "toolCallName": name, **kw}
    if parent is not None:
        event["parentMessageId"] = parent
    return event


def tool(tcid: str, *args: str, parent: str | None = None, name: str = "f") -> list[Event]:
    return [
        tool_start(tcid, name, parent),
        *({"type": "TOOL_CALL_ARGS", "toolCallId": tcid, "delta": a} for a in args),
        {"type": "TOOL_CALL_END", "toolCallId": tcid},
    ]


def result(tcid: str, mid: str, body: Any = "ok", **kw: Any) -> Event:
    return {"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": tcid, "content": body, **kw}


RUN_STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
RUN_FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
USER: Event = {"id": "u1", "role": "user", "content": "hi"}


def ids(fold: ThreadFold) -> list[str]:
    return [m["id"] for m in fold.messages]


# ---------------------------------------------------------------- text messages


def test_text_message_streaming_and_metadata() -> None:
    fold = fold_events(
        [
            start("m1", metadata={"a": 1}, name="bot", subagentRunId="s1"),
            content("m1", "Hel"),
            content("m1", "lo", metadata={"b": 2}),
            end("m1", metadata={"a": 3}),
        ]
    )
    assert fold.messages == [
        {
            "id": "m1",
            "role": "assistant",
            "content": "Hello",
            "name": "bot",
            "subagentRunId": "s1",
            "metadata": {"a": 3, "b": 2},
        }
    ]


def test_text_start_defaults_role_and_reuses_an_existing_message() -> None:
    fold = fold_events([start("m1", role=None), content("m1", "ab")], messages=[USER])
    fold.apply(start("u1", role="assistant"))  # existing id: kept as is, nothing created
    fold.apply(content("u1", "!"))
    assert fold.messages == [
        {"id": "u1", "role": "user", "content": "hi!"},
        {"id": "m1", "role": "assistant", "content": "ab"},
    ]


def test_content_for_unknown_or_activity_message_is_ignored() -> None:
    activity = {"id": "a1", "role": "activity", "activityType": "x", "content": {"k": 1}}
    fold = ThreadFold([activity])
    for event in [content("nope", "x"), start("a1"), content("a1", "x"), end("a1")]:
        fold.apply(event)
    assert fold.messages == [activity]


def test_content_replaces_non_string_content() -> None:
    user = {"id": "u1", "role": "user", "content": [{"type": "text", "text": "hi"}]}
    fold = fold_events([content("u1", "x")], messages=[user])
    assert fold.messages[0]["content"] == "x"


def test_inputs_are_not_aliased() -> None:
    messages, state = [dict(USER)], {"a": [1]}
    snapshot = {"b": {"c": 1}}
    fold = fold_events(
        [content("u1", "!"), {"type": "STATE_SNAPSHOT", "snapshot": snapshot}],
        messages=messages,
        state=state,
    )
    fold.apply({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b/d", "value": 2}]})
    assert messages == [USER] and state == {"a": [1]} and snapshot == {"b": {"c": 1}}


def test_a_fold_told_not_to_copy_takes_its_inputs_over_as_a_copy_would_read() -> None:
    """``copy=False`` (a snapshot just read from the store): the fold's messages and
    state are the ones given, a null ``subagentRunId`` dropped as a copy drops it, and
    the fold goes on exactly as one built from copies."""
    given = [dict(USER), {"id": "a1", "role": "assistant", "content": "hi",
                          "subagentRunId": None}]
    state = {"a": [1]}
    copied = ThreadFold([dict(m) for m in given], {"a": [1]})
    taken = ThreadFold(given, state, copy=False)
    assert taken.messages[0] is given[0] and taken.state is state
    assert taken.messages == copied.messages and "subagentRunId" not in given[1]
    for fold in (copied, taken):
        fold.apply(content("u1", "!"))
        fold.apply({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 2}]})
    assert taken.messages == copied.messages and taken.state == copied.state
    assert taken.message("a1") is given[1]


# -------------------------------------------------------------------- tool calls


def test_tool_calls_attach_to_parent_or_create_assistant_messages() -> None:
    fold = fold_events(
        [
            *text("a1", "thinking"),
            *tool("t1", '{"q":', "1}", parent="a1"),
            *tool("t2"),  # no parent: assistant message keyed by call id
            *tool("t3", parent="missing"),  # unknown parent: created under that id
            *tool("t4", parent="u1"),  # parent is not an assistant: keyed by call id
        ],
        messages=[USER],
    )
    assert ids(fold) == ["u1", "a1", "t2", "missing", "t4"]
    assert fold.messages[1]["toolCalls"] == [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"q":1}'}}
    ]
    assert fold.messages[2] == {
        "id": "t2",
        "role": "assistant",
        "toolCalls": [{"id": "t2", "type": "function", "function": {"name": "f", "arguments": ""}}],
    }


def test_tool_call_start_is_idempotent_but_renames() -> None:
    fold = fold_events([*tool("t1", "{}", parent="a1"), tool_start("t1", "f", "a1")])
    assert len(fold.messages) == 1 and fold.messages[0]["toolCalls"][0]["function"] == {
        "name": "f",
        "arguments": "{}",
    }
    fold.apply(tool_start("t1", "g", "other"))
    assert ids(fold) == ["a1"]
    assert fold.messages[0]["toolCalls"][0]["function"] == {"name": "g", "arguments": "{}"}


def test_tool_call_metadata_lands_on_the_call_and_subagent_on_new_message() -> None:
    fold = fold_events(
        [
            tool_start("t1", subagentRunId="s1", metadata={"a": 1}),
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": "{}", "metadata": {"b": 2}},
            {"type": "TOOL_CALL_END", "toolCallId": "t1", "metadata": {"a": 3}},
        ]
    )
    (message,) = fold.messages
    assert message["subagentRunId"] == "s1" and "metadata" not in message
    assert message["toolCalls"][0]["metadata"] == {"a": 3, "b": 2}


def test_tool_results_go_right_after_their_assistant_message() -> None:
    fold = fold_events(
        [
            *text("a1", "calling"),
            *tool("t1", parent="a1"),
            *tool("t2", parent="a1"),
            *text("a2", "meanwhile"),
        ]
    )
    fold.take_changes()
    fold.apply(result("t2", "r2"))
    fold.apply(result("t1", "r1", subagentRunId="s", metadata={"m": 1}))
    fold.apply(result("zz", "r9"))  # no owner: appended
    assert ids(fold) == ["a1", "r2", "r1", "a2", "r9"]
    assert fold.messages[2] == {
        "id": "r1",
        "toolCallId": "t1",
        "role": "tool",
        "content": "ok",
        "subagentRunId": "s",
        "metadata": {"m": 1},
    }
    changes = fold.take_changes()
    assert changes.reordered
    assert [(i, m["id"]) for i, m in changes.upserts] == [(1, "r2"), (2, "r1"), (4, "r9")]


def test_result_right_after_owner_at_the_end_is_not_a_reorder() -> None:
    fold = fold_events([*tool("t1", parent="a1")])
    fold.take_changes()
    fold.apply(result("t1", "r1", [{"type": "text", "text": "x"}]))
    changes = fold.take_changes()
    assert not changes.reordered and [i for i, _ in changes.upserts] == [1]


# ------------------------------------------------------------------------- state


def test_state_snapshot_replaces_and_delta_patches() -> None:
    fold = ThreadFold(state={"old": 1})
    fold.apply({"type": "STATE_SNAPSHOT", "snapshot": {"items": []}})
    fold.apply({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/items/-", "value": 1}]})
    fold.apply(
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "add", "path": "/n", "value": 1},
                {"op": "move", "from": "/n", "path": "/m"},
            ],
        }
    )
    assert fold.state == {"items": [1], "m": 1}
    assert fold.take_changes().state_changed


@pytest.mark.parametrize(
    "delta",
    [
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/x", "value": 1}, {"op": "test", "path": "/x", "value": 2}],
        [{"op": "bogus", "path": "/x"}],
        "not a patch",
    ],
)
def test_failing_state_delta_leaves_state_untouched(delta: Any) -> None:
    fold = ThreadFold(state={"a": 1})
    fold.apply({"type": "STATE_DELTA", "delta": delta})
    assert fold.state == {"a": 1}
    assert not fold.take_changes().state_changed


def test_json_patch_copies_paths_instead_of_mutating() -> None:
    doc: Event = {"a": {"b": [1, 2]}, "big": {"x": 1}}
    before = clone_json(doc)
    ops = [
        {"op": "move", "from": "/a", "path": "/m"},
        {"op": "add", "path": "/m/b/-", "value": 3},  # into the moved, still shared container
    ]
    out = apply_json_patch(doc, ops)
    assert out == {"m": {"b": [1, 2, 3]}, "big": {"x": 1}}
    assert doc == before and out["big"] is doc["big"]  # untouched subtrees are shared
    with pytest.raises(PATCH_ERRORS):
        apply_json_patch(
            doc, [{"op": "remove", "path": "/a/b/0"}, {"op": "test", "path": "/a/b/0", "value": 9}]
        )
    assert doc == before


def _document(rng: random.Random, depth: int = 0) -> Any:
    if depth > 2 or rng.random() < 0.3:
        return rng.choice([0, 1, "s", None, True, 2.5])
    if rng.random() < 0.5:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("abc"): _document(rng, depth + 1) for _ in range(rng.randint(0, 3))}


PARTS = ["a", "b", "c", "0", "1", "2", "3", "01", "-", "", "~0", "~1", "x"]


def test_the_plain_patch_path_agrees_with_jsonpatch() -> None:
    """Adds, replaces and removes at plain paths are applied without ``jsonpatch`` (the
    common state delta); whatever they are applied to, the result, or the refusal, is
    ``jsonpatch``'s, and the document is never changed."""
    rng = random.Random(3)
    plain = 0
    for _ in range(5000):
        doc = {"a": _document(rng), "b": _document(rng)}
        before = copy.deepcopy(doc)
        ops = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["add", "replace", "remove", "add", "replace", "test"])
            op: dict[str, Any] = {"op": kind, "path": "/" + "/".join(
                rng.choice(PARTS) for _ in range(rng.randint(1, 3)))}
            if kind != "remove":
                op["value"] = _document(rng, 1)
            ops.append(op)
        try:
            expected: Any = jsonpatch.apply_patch(copy.deepcopy(doc), ops)
        except PATCH_ERRORS as exc:
            expected = type(exc)
        try:
            got: Any = apply_json_patch(doc, ops)
        except PATCH_ERRORS as exc:
            got = type(exc)
        assert doc == before, ops
        assert (got is expected) if isinstance(expected, type) else (got == expected), \
            (before, ops, got, expected)
        if _plain_patch(before, ops) is not _NOT_PLAIN:
            plain += 1
    assert plain > 200  # and the plain path is taken (where every step of a path exists)


def test_state_delta_leaves_earlier_state_values_intact() -> None:
    fold = ThreadFold(state={"list": [1], "other": {"k": 1}})
    earlier = fold.state
    fold.apply({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/list/-", "value": 2}]})
    assert earlier == {"list": [1], "other": {"k": 1}}
    assert fold.state == {"list": [1, 2], "other": {"k": 1}}


def test_state_defaults_to_empty_object() -> None:
    assert ThreadFold().state == {}


# ------------------------------------------------------------- messages snapshot


def test_messages_snapshot_replaces_merges_and_preserves_client_only_messages() -> None:
    initial: list[Event] = [
        USER,
        {"id": "a1", "role": "assistant", "content": "old"},
        {"id": "act", "role": "activity", "activityType": "plan", "content": {}},
        {"id": "rs", "role": "reasoning", "content": "hmm"},
        {"id": "gone", "role": "assistant", "content": "bye"},
    ]
    fold = ThreadFold(initial)
    snapshot: list[Event] = [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": "new", "subagentRunId": None},
        {"id": "n1", "role": "assistant", "content": "added"},
    ]
    fold.apply({"type": "MESSAGES_SNAPSHOT", "messages": snapshot})
    assert ids(fold) == ["u1", "a1", "act", "rs", "n1"]
    assert fold.messages[1] == {"id": "a1", "role": "assistant", "content": "new"}
    changes = fold.take_changes()
    assert [(i, m["id"]) for i, m in changes.upserts] == [(1, "a1"), (4, "n1")]
    assert changes.removed_ids == ["gone"] and not changes.reordered
    assert snapshot[1]["subagentRunId"] is None  # the event is not modified


def test_messages_snapshot_with_activity_and_reasoning_owns_those_kinds() -> None:
    fold = ThreadFold(
        [
            {"id": "act", "role": "activity", "activityType": "plan", "content": {}},
            {"id": "rs", "role": "reasoning", "content": "hmm"},
            USER,
        ]
    )
    fold.apply(
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [USER, {"id": "rs2", "role": "reasoning", "content": "x"}],
        }
    )
    assert ids(fold) == ["act", "u1", "rs2"]
    changes = fold.take_changes()
    assert changes.removed_ids == ["rs"] and changes.reordered


@pytest.mark.parametrize(
    ("authority", "kept"),
    [(["other"], ["p", "u1"]), ([], ["p", "o", "u1"]), (None, ["u1"]), ("bad", ["p", "o", "u1"])],
)
def test_messages_snapshot_activity_authority(authority: Any, kept: list[str]) -> None:
    fold = ThreadFold(
        [
            {"id": "p", "role": "activity", "activityType": "plan", "content": {}},
            {"id": "o", "role": "activity", "activityType": "other", "content": {}},
        ]
    )
    fold.apply(
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [USER],
            "metadata": {"@ag-ui/client": {"authoritativeActivityTypes": authority}},
        }
    )
    assert ids(fold) == kept


# ------------------------------------------------------------------------ chunks


def test_text_chunks_expand_like_the_client() -> None:
    events: list[Event] = [
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a", "metadata": {"x": 1}},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "b"},
        {"type": "TEXT_MESSAGE_CHUNK", "metadata": {"y": 2}},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m2", "role": "user"},
        {"type": "CUSTOM", "name": "n", "value": 1},
    ]
    assert [(e["type"], e.get("messageId"), e.get("delta")) for e in expand_chunks(events)] == [
        ("TEXT_MESSAGE_START", "m1", None),
        ("TEXT_MESSAGE_CONTENT", "m1", "a"),
        ("TEXT_MESSAGE_CONTENT", "m1", "b"),
        ("TEXT_MESSAGE_CONTENT", "m1", ""),
        ("TEXT_MESSAGE_END", "m1", None),
        ("TEXT_MESSAGE_START", "m2", None),
        ("TEXT_MESSAGE_END", "m2", None),
        ("CUSTOM", None, None),
    ]
    fold = fold_events(events)
    assert fold.messages == [
        {"id": "m1", "role": "assistant", "content": "ab", "metadata": {"x": 1, "y": 2}},
        {"id": "m2", "role": "user", "content": ""},
    ]


def test_tool_and_reasoning_chunks_and_subagent_lanes() -> None:
    fold = fold_events(
        [
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "t1", "toolCallName": "f", "delta": "{"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "s", "delta": "x", "subagentRunId": "s1"},
            {"type": "TOOL_CALL_CHUNK", "delta": "}"},
            {"type": "TEXT_MESSAGE_CHUNK", "delta": "y", "subagentRunId": "s1"},
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r1", "delta": "why"},
        ]
    )
    assert fold.messages == [
        {
            "id": "t1",
            "role": "assistant",
            "toolCalls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"id": "s", "role": "assistant", "content": "xy", "subagentRunId": "s1"},
        {"id": "r1", "role": "reasoning", "content": "why"},
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "REASONING_MESSAGE_CHUNK", "delta": "no id"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "t9", "delta": "no name"},
        {"type": "TEXT_MESSAGE_CHUNK", "role": "user", "delta": "role conflict"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "subagentRunId": "s2"},
    ],
)
def test_chunks_the_client_rejects_are_dropped(
    bad: Event, caplog: pytest.LogCaptureFixture
) -> None:
    expander = ChunkExpander()
    expander.expand({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"})
    with pytest.raises(ChunkError):
        expander.expand(bad)
    fold = fold_events([{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}])
    with caplog.at_level(logging.WARNING):
        fold.apply(bad)
    assert fold.messages == [{"id": "m1", "role": "assistant", "content": "a"}]
    assert "dropping" in caplog.text


def test_run_events_close_every_lane() -> None:
    out = expand_chunks(
        [
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "delta": "1", "subagentRunId": "s"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "delta": "2"},
            {"type": "STEP_STARTED", "stepName": "x", "subagentRunId": "other"},  # other lane
            RUN_FINISHED,
        ]
    )
    assert [(e["type"], e.get("messageId")) for e in out][-3:] == [
        ("TEXT_MESSAGE_END", "a"),
        ("TEXT_MESSAGE_END", "b"),
        ("RUN_FINISHED", None),
    ]


# ------------------------------------------------------------ reasoning, activity


def test_reasoning_messages_and_encrypted_values() -> None:
    fold = fold_events(
        [
            {"type": "REASONING_START", "messageId": "r"},
            {"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "hm"},
            {"type": "REASONING_MESSAGE_END", "messageId": "r", "metadata": {"t": 1}},
            {"type": "REASONING_END", "messageId": "r"},
            *tool("t1"),
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "message",
                "entityId": "r",
                "encryptedValue": "e1",
            },
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": "tool-call",
                "entityId": "t1",
                "encryptedValue": "e2",
            },
        ]
    )
    assert fold.messages[0] == {
        "id": "r",
        "role": "reasoning",
        "content": "hm",
        "metadata": {"t": 1},
        "encryptedValue": "e1",
    }
    assert fold.messages[1]["toolCalls"][0]["encryptedValue"] == "e2"
    assert fold.reopen_events() == []


def test_activity_snapshot_and_delta() -> None:
    def snap(content: Any, **kw: Any) -> Event:
        return {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "p",
            "activityType": "plan",
            "content": content,
            **kw,
        }

    fold = fold_events([snap({"s": [1]}, metadata={"v": 1}, subagentRunId="s1")])
    fold.apply(
        {
            "type": "ACTIVITY_DELTA",
            "messageId": "p",
            "activityType": "plan2",
            "patch": [{"op": "add", "path": "/s/-", "value": 2}],
        }
    )
    assert fold.messages[0]["content"] == {"s": [1, 2]}
    assert fold.messages[0]["activityType"] == "plan2"
    fold.apply(snap({"s": []}, replace=False, metadata={"w": 2}))  # keeps content
    assert fold.messages[0]["content"] == {"s": [1, 2]}
    fold.apply(snap({"s": [9]}))  # replaces content and attribution, keeps metadata
    assert fold.messages == [
        {
            "id": "p",
            "role": "activity",
            "activityType": "plan",
            "content": {"s": [9]},
            "metadata": {"v": 1, "w": 2},
        }
    ]
    bad = [{"op": "remove", "path": "/nope"}]
    fold.apply({"type": "ACTIVITY_DELTA", "messageId": "p", "activityType": "x", "patch": bad})
    assert fold.messages[0]["content"] == {"s": [9]}


def test_activity_snapshot_replaces_a_non_activity_message_only_when_replacing() -> None:
    fold = fold_events(
        [
            *tool("t1", parent="a1"),
            {"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "activityType": "x", "content": {}},
        ]
    )
    assert fold.messages == [{"id": "a1", "role": "activity", "activityType": "x", "content": {}}]
    assert fold.at_boundary  # the replaced assistant's tool call is gone with it
    fold = fold_events([*text("m", "hi")])
    fold.apply(
        {
            "type": "ACTIVITY_SNAPSHOT",
            "messageId": "m",
            "activityType": "x",
            "content": {},
            "replace": False,
        }
    )
    assert fold.messages[0]["role"] == "assistant"


# ------------------------------------------------------------- runs, interrupts


def test_run_started_echo_adds_missing_messages() -> None:
    echo = [USER, {"id": "u2", "role": "user", "content": "x", "subagentRunId": None}]
    fold = fold_events(
        [{**RUN_STARTED, "input": {"threadId": "t", "runId": "r", "messages": echo}}], [USER]
    )
    assert fold.messages == [USER, {"id": "u2", "role": "user", "content": "x"}]


def test_interrupts_follow_pending_interrupts_of_the_client() -> None:
    interrupt = {"id": "i1", "reason": "approval", "toolCallId": "t1", "subagentRunId": None}
    fold = fold_events([RUN_STARTED, *tool("t1")])
    assert not fold.at_boundary  # t1 has no result
    fold.apply({**RUN_FINISHED, "outcome": {"type": "interrupt", "interrupts": [interrupt]}})
    assert fold.interrupts == [{"id": "i1", "reason": "approval", "toolCallId": "t1"}]
    assert fold.at_boundary  # t1 awaits the interrupt
    assert fold.take_changes().interrupts_changed
    fold.apply(RUN_STARTED)  # a new run does not clear them ...
    fold.apply({"type": "RUN_ERROR", "message": "x"})  # ... nor does an error
    assert fold.interrupts and not fold.take_changes().interrupts_changed
    fold.apply(RUN_STARTED)
    fold.apply({**RUN_FINISHED, "outcome": {"type": "cancelled"}})  # any other outcome does
    assert fold.interrupts == [] and fold.take_changes().interrupts_changed
    assert not fold.at_boundary


# ------------------------------------------------------------------- boundaries


@pytest.mark.parametrize(
    "opener",
    [
        start("m"),
        tool_start("t"),
        {"type": "REASONING_START", "messageId": "r"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"},
        {"type": "STEP_STARTED", "stepName": "s"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "n"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "x"},
    ],
)
def test_at_boundary_false_while_anything_is_open(opener: Event) -> None:
    fold = fold_events([RUN_STARTED, opener])
    assert not fold.at_boundary
    for event in fold.closing_events():
        fold.apply(event)
    if opener["type"] == "TOOL_CALL_START":
        assert not fold.at_boundary  # closed, but the call still has no result
        fold.apply(result("t", "r"))
    assert fold.at_boundary


def test_run_error_and_run_started_drop_open_constructs() -> None:
    fold = fold_events([RUN_STARTED, start("m"), {"type": "RUN_ERROR", "message": "x"}])
    assert fold.at_boundary and fold.closing_events() == []
    fold = fold_events([RUN_STARTED, {"type": "STEP_STARTED", "stepName": "s"}, RUN_STARTED])
    assert fold.at_boundary


def test_reopen_and_closing_events_in_order() -> None:
    fold = fold_events(
        [
            RUN_STARTED,
            {"type": "STEP_STARTED", "stepName": "plan", "metadata": {"x": 1}},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a", "description": "d"},
            {
                "type": "SUBAGENT_STARTED",
                "subagentRunId": "s2",
                "name": "b",
                "parentSubagentRunId": "s1",
            },
            {"type": "REASONING_START", "messageId": "r", "subagentRunId": "s2"},
            start("m", name="bot", subagentRunId="s1", metadata={"m": 1}),
            content("m", "partial"),
            tool_start("t", "go", "m", subagentRunId="s1"),
            {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": "{"},
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"},
        ]
    )
    assert fold.reopen_events() == [
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "SUBAGENT_STARTED", "name": "b", "subagentRunId": "s2"},  # parent s1 has ended
        {"type": "REASONING_START", "messageId": "r", "subagentRunId": "s2"},
        {
            "type": "TEXT_MESSAGE_START",
            "messageId": "m",
            "subagentRunId": "s1",
            "role": "assistant",
            "name": "bot",
        },
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "t",
            "toolCallName": "go",
            "subagentRunId": "s1",
            "parentMessageId": "m",
        },
    ]
    assert fold.closing_events() == [
        {"type": "TOOL_CALL_END", "toolCallId": "t", "subagentRunId": "s1"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "subagentRunId": "s1"},
        {"type": "REASONING_END", "messageId": "r", "subagentRunId": "s2"},
        {
            "type": "SUBAGENT_ERROR",
            "subagentRunId": "s2",
            "message": "The run ended before this subagent finished.",
        },
        {"type": "STEP_FINISHED", "stepName": "plan"},
    ]
    # Re-opening changes nothing the fold holds: no content is duplicated.
    before = [dict(m) for m in fold.messages]
    for event in fold.reopen_events():
        fold.apply(event)
    assert fold.messages == before


def test_chunk_constructs_reopen_as_chunks_and_close_through_their_lane() -> None:
    fold = fold_events(
        [
            RUN_STARTED,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a", "name": "n"},
            {
                "type": "TOOL_CALL_CHUNK",
                "toolCallId": "t",
                "toolCallName": "f",
                "subagentRunId": "s",
            },
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "r", "subagentRunId": "q"},
            {"type": "STEP_STARTED", "stepName": "x", "subagentRunId": "q"},  # closes lane q
        ]
    )
    assert fold.reopen_events() == [
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "assistant", "name": "n"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "t", "toolCallName": "f", "subagentRunId": "s"},
        {"type": "STEP_STARTED", "stepName": "x", "subagentRunId": "q"},
    ]
    closing = fold.closing_events()
    assert closing == [
        {"type": "STEP_FINISHED", "stepName": "x", "subagentRunId": "q"},
        {"type": "STATE_DELTA", "delta": [], "subagentRunId": "s"},
        {"type": "STATE_DELTA", "delta": []},
    ]
    for event in closing:
        fold.apply(event)
    assert fold.reopen_events() == [] and not fold.take_changes().state_changed


def test_chunk_lane_closed_by_a_later_explicit_closer_of_its_owner() -> None:
    fold = fold_events(
        [
            RUN_STARTED,
            {"type": "STEP_STARTED", "stepName": "x"},
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"},
        ]
    )
    assert fold.closing_events() == [{"type": "STEP_FINISHED", "stepName": "x"}]


# ------------------------------------------------------------- changes and copy


def test_take_changes_reports_only_what_changed_since_last_take() -> None:
    fold = ThreadFold([USER])
    assert fold.take_changes().upserts == []
    fold.apply(start("m"))
    fold.apply(content("m", "x"))
    first = fold.take_changes()
    assert [(i, m["id"]) for i, m in first.upserts] == [(1, "m")]
    assert not (first.reordered or first.state_changed or first.interrupts_changed)
    assert fold.take_changes().upserts == []
    fold.apply(content("m", "y"))
    assert fold.take_changes().upserts == [(1, {"id": "m", "role": "assistant", "content": "xy"})]


def test_copy_is_deep_and_carries_pending_changes() -> None:
    fold = fold_events(
        [RUN_STARTED, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"}]
    )
    twin = fold.copy()
    twin.apply({"type": "TEXT_MESSAGE_CHUNK", "delta": "b"})  # the chunk lane was copied too
    assert fold.messages[0]["content"] == "a" and twin.messages[0]["content"] == "ab"
    assert [m["id"] for _, m in twin.take_changes().upserts] == ["m"]
    assert [m["id"] for _, m in fold.take_changes().upserts] == ["m"]
    assert twin.reopen_events() == fold.reopen_events()


def test_reopen_and_closing_events_are_valid_protocol_events() -> None:
    fold = fold_events(
        [
            RUN_STARTED,
            {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "a"},
            {"type": "STEP_STARTED", "stepName": "x"},
            {"type": "REASONING_START", "messageId": "r"},
            {"type": "REASONING_MESSAGE_START", "messageId": "r", "role": "reasoning"},
            start("m"),
            tool_start("t", parent="m"),
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "c", "delta": "x", "subagentRunId": "s2"},
            {
                "type": "TOOL_CALL_CHUNK",
                "toolCallId": "u",
                "toolCallName": "f",
                "subagentRunId": "s3",
            },
            {"type": "REASONING_MESSAGE_CHUNK", "messageId": "q", "subagentRunId": "s4"},
        ]
    )
    adapter: TypeAdapter[Any] = TypeAdapter(core.Event)
    events = fold.reopen_events() + fold.closing_events()
    assert len(events) == 18
    for event in events:
        assert adapter.validate_python(event).model_dump(by_alias=True, mode="json") == event
