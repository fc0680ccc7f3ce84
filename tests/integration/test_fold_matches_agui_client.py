"""ThreadFold against the stock @ag-ui/client 1.0.0, driven through tests/js/fold.mjs.

Setup: ``npm ci --prefix tests/js`` (needs Node 20+). Without node or tests/js/node_modules
these tests skip, except under ``CI=true``, where they fail instead.

Every stream is built from ag_ui.core events dumped as wire dicts, run through the client's
real inbound pipeline (``runAgent``: enforce, chunk transform, verify, ``defaultApplyEvents``)
and through ThreadFold; messages, state and pending interrupts must be identical and the
client must accept every stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ag_ui import core

from outlast.protocol.fold import ThreadFold, fold_events
from tests.support.agui_client import stock_client_node, stock_client_scenarios

Event = dict[str, Any]
Client = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def client() -> Client:
    """Runs scenarios through the stock client; skips (or fails under CI) without it."""
    stock_client_node()
    return stock_client_scenarios


def ev(cls: type[core.BaseEvent], **fields: Any) -> Event:
    """A wire dict exactly as the Python SDK serializes it."""
    return cls(**fields).model_dump(by_alias=True, mode="json")


def started(run_id: str = "r1", **fields: Any) -> Event:
    return ev(core.RunStartedEvent, thread_id="thread", run_id=run_id, **fields)


def finished(run_id: str = "r1", **fields: Any) -> Event:
    return ev(core.RunFinishedEvent, thread_id="thread", run_id=run_id, **fields)


def text(mid: str, *deltas: str, role: str = "assistant", **tag: Any) -> list[Event]:
    out = [ev(core.TextMessageStartEvent, message_id=mid, role=role, **tag)]
    out += [ev(core.TextMessageContentEvent, message_id=mid, delta=d, **tag) for d in deltas]
    return [*out, ev(core.TextMessageEndEvent, message_id=mid, **tag)]


def tool(tcid: str, name: str, *args: str, parent: str | None = None, **tag: Any) -> list[Event]:
    out = [
        ev(
            core.ToolCallStartEvent,
            tool_call_id=tcid,
            tool_call_name=name,
            parent_message_id=parent,
            **tag,
        )
    ]
    out += [ev(core.ToolCallArgsEvent, tool_call_id=tcid, delta=a, **tag) for a in args]
    return [*out, ev(core.ToolCallEndEvent, tool_call_id=tcid, **tag)]


def result(tcid: str, mid: str, content: str) -> Event:
    return ev(core.ToolCallResultEvent, message_id=mid, tool_call_id=tcid, content=content)


USER = {"id": "u1", "role": "user", "content": "hello"}


def text_stream() -> list[Event]:
    return [
        started(),
        ev(core.TextMessageStartEvent, message_id="m1", role="assistant", metadata={"a": 1}),
        ev(core.TextMessageContentEvent, message_id="m1", delta="Hel"),
        ev(core.TextMessageContentEvent, message_id="m1", delta="lo", metadata={"b": 2}),
        ev(core.TextMessageEndEvent, message_id="m1", metadata={"a": 3, "usage": {"out": 2}}),
        *text("m2", "again", role="assistant", name="helper"),
        *text("u1", " again"),  # a start on an existing id keeps it; content appends
        ev(core.ReasoningMessageStartEvent, message_id="m2", metadata={"r": 1}),
        ev(core.ReasoningMessageEndEvent, message_id="m2"),
        finished(),
        started("r2"),
        *text("m3", "second run", role="developer"),
        ev(core.RunErrorEvent, message="boom"),
        started("r3"),
        *text("m4", "third run"),
        finished("r3"),
    ]


def tool_stream() -> list[Event]:
    return [
        started(),
        *text("a1", "Let me look."),
        *tool("t1", "search", '{"q":', '"x"}', parent="a1"),
        *tool("t2", "fetch", "{}", parent="a1"),
        *tool("t3", "orphan", "{}"),  # no parent: an assistant message keyed by the call id
        *tool("t4", "late", "{}", parent="missing"),  # unknown parent: created under that id
        *text("a2", "Meanwhile..."),
        result("t2", "r2", "two"),  # lands right after a1, not at the end
        result("t1", "r1", "one"),  # after r2: results for one message keep their order
        result("t3", "r3", "three"),
        result("nope", "r9", "unmatched"),  # no owner: appended
        *tool("t1", "search"),  # a replayed start neither duplicates nor resets the call
        *tool("t1", "renamed"),  # ... but a different name is applied
        *tool("t5", "collide", "{}", parent="u1"),  # parent is a user message: keyed by call id
        ev(
            core.ToolCallStartEvent,
            tool_call_id="t6",
            tool_call_name="meta",
            parent_message_id="a2",
        ),
        ev(core.ToolCallArgsEvent, tool_call_id="t6", delta="{}", metadata={"k": 1}),
        ev(core.ToolCallEndEvent, tool_call_id="t6", metadata={"k": 2, "j": 3}),
        ev(
            core.ToolCallResultEvent,
            message_id="r6",
            tool_call_id="t6",
            content="six",
            role="tool",
            metadata={"took": 5},
            subagent_run_id="s7",
        ),
        finished(),
    ]


def chunk_stream() -> list[Event]:
    return [
        started(),
        ev(core.TextMessageChunkEvent, message_id="c1", delta="Hi"),
        ev(core.TextMessageChunkEvent, delta=" there"),
        ev(core.TextMessageChunkEvent, metadata={"finish": "stop"}),  # metadata-only
        ev(
            core.ToolCallChunkEvent,
            tool_call_id="ct1",
            tool_call_name="calc",
            parent_message_id="c1",
        ),
        ev(core.ToolCallChunkEvent, delta='{"x":'),
        ev(core.ToolCallChunkEvent, tool_call_id="ct1", delta="1}"),
        ev(core.TextMessageChunkEvent, message_id="s-text", delta="sub", subagent_run_id="s1"),
        ev(core.ReasoningMessageChunkEvent, message_id="cr1", delta="think"),  # parent lane
        ev(core.TextMessageChunkEvent, delta="agent", subagent_run_id="s1"),
        ev(core.ReasoningMessageChunkEvent, delta="ing"),
        ev(core.TextMessageChunkEvent, message_id="c2", role="assistant", delta="next"),
        ev(core.CustomEvent, name="tick", value=1),  # closes the parent lane
        ev(core.TextMessageChunkEvent, message_id="c3", name="bot", delta="x"),
        finished(),  # closes every lane, the subagent's included
    ]


def state_stream() -> list[Event]:
    return [
        started(),
        ev(core.StateSnapshotEvent, snapshot={"todo": [], "count": 0, "meta": {"a": 1}}),
        ev(core.StateDeltaEvent, delta=[{"op": "add", "path": "/todo/-", "value": {"t": "x"}}]),
        ev(
            core.StateDeltaEvent,
            delta=[
                {"op": "replace", "path": "/count", "value": 2},
                {"op": "copy", "from": "/meta", "path": "/meta2"},
                {"op": "move", "from": "/meta/a", "path": "/moved"},
                {"op": "test", "path": "/count", "value": 2},
            ],
        ),
        ev(core.StateDeltaEvent, delta=[{"op": "replace", "path": "/missing", "value": 1}]),
        ev(
            core.StateDeltaEvent,
            delta=[
                {"op": "add", "path": "/partial", "value": 1},
                {"op": "test", "path": "/count", "value": 99},
            ],
        ),
        ev(core.StateDeltaEvent, delta=[{"op": "remove", "path": "/todo/0"}]),
        ev(core.StateDeltaEvent, delta=[{"op": "add", "path": "/todo/0/deep", "value": 1}]),
        finished(),
    ]


def snapshot_stream() -> list[Event]:
    return [
        started(),
        ev(
            core.ActivitySnapshotEvent,
            message_id="act1",
            activity_type="plan",
            content={"steps": [1]},
        ),
        ev(core.ReasoningMessageStartEvent, message_id="rs1"),
        ev(core.ReasoningMessageContentEvent, message_id="rs1", delta="hmm"),
        ev(core.ReasoningMessageEndEvent, message_id="rs1"),
        *text("old", "stale"),
        *text("keep", "kept"),
        ev(
            core.MessagesSnapshotEvent,
            messages=[
                core.UserMessage(id="u1", content="hello (edited)"),
                core.AssistantMessage(id="keep", content="kept"),
                core.AssistantMessage(
                    id="new",
                    tool_calls=[
                        core.ToolCall(id="ts", function=core.FunctionCall(name="f", arguments="{}"))
                    ],
                ),
            ],
        ),
        result("ts", "tr", "done"),
        # Carrying activity and reasoning, this one speaks for both kinds.
        ev(
            core.MessagesSnapshotEvent,
            messages=[
                core.UserMessage(id="u1", content="hello (edited)"),
                core.ActivityMessage(id="act2", activity_type="plan", content={"steps": []}),
                core.ReasoningMessage(id="rs2", content="thought"),
                core.AssistantMessage(id="keep", content="kept again"),
            ],
        ),
        ev(core.ActivitySnapshotEvent, message_id="act3", activity_type="other", content={}),
        # Declared authority over "other" only: act2 ("plan") survives, act3 does not.
        ev(
            core.MessagesSnapshotEvent,
            messages=[core.UserMessage(id="u1", content="hello (edited)")],
            metadata={"@ag-ui/client": {"authoritativeActivityTypes": ["other"]}},
        ),
        # Null authority: every activity the snapshot leaves out is removed.
        ev(
            core.MessagesSnapshotEvent,
            messages=[core.UserMessage(id="u1", content="hello (edited)")],
            metadata={"@ag-ui/client": {"authoritativeActivityTypes": None}},
        ),
        finished(),
    ]


def activity_stream() -> list[Event]:
    def snap(mid: str, content: Any, **kw: Any) -> Event:
        return ev(
            core.ActivitySnapshotEvent, message_id=mid, activity_type="plan", content=content, **kw
        )

    return [
        started(),
        snap("p1", {"steps": ["a"]}, metadata={"v": 1}),
        ev(
            core.ActivityDeltaEvent,
            message_id="p1",
            activity_type="plan2",
            patch=[{"op": "add", "path": "/steps/-", "value": "b"}],
        ),
        ev(
            core.ActivityDeltaEvent,
            message_id="p1",
            activity_type="plan3",
            patch=[{"op": "remove", "path": "/nope"}],
            metadata={"w": 2},
        ),
        snap("p1", {"steps": []}, replace=False, metadata={"v": 3}),
        snap("p1", {"steps": ["z"]}, subagent_run_id="s9"),
        snap("p1", {"steps": ["y"]}),
        *text("t1", "plain"),
        snap("t1", {"took": "over"}),  # replace=True replaces even a text message
        ev(core.ActivityDeltaEvent, message_id="ghost", activity_type="plan", patch=[]),
        ev(core.TextMessageStartEvent, message_id="p1"),  # text into an activity: dropped
        ev(core.TextMessageContentEvent, message_id="p1", delta="no"),
        ev(core.TextMessageEndEvent, message_id="p1"),
        finished(),
    ]


def reasoning_stream() -> list[Event]:
    return [
        started(),
        ev(core.ReasoningStartEvent, message_id="rz"),
        ev(core.ReasoningMessageStartEvent, message_id="rz", metadata={"m": 1}),
        ev(core.ReasoningMessageContentEvent, message_id="rz", delta="step one"),
        ev(core.ReasoningMessageEndEvent, message_id="rz"),
        ev(core.ReasoningEndEvent, message_id="rz"),
        ev(
            core.ReasoningEncryptedValueEvent,
            subtype="message",
            entity_id="rz",
            encrypted_value="enc-msg",
        ),
        *tool("tz", "act", "{}"),
        ev(
            core.ReasoningEncryptedValueEvent,
            subtype="tool-call",
            entity_id="tz",
            encrypted_value="enc-call",
        ),
        finished(),
    ]


def lifecycle_stream() -> list[Event]:
    """Steps, a subagent with attributed content, and a RUN_STARTED input echo."""
    echo = core.RunAgentInput(
        thread_id="thread",
        run_id="r1",
        messages=[core.UserMessage(id="u1", content="dup"), core.UserMessage(id="u2", content="x")],
    )
    return [
        started(input=echo),
        ev(core.StepStartedEvent, step_name="plan"),
        *text("p1", "planning"),
        ev(core.SubagentStartedEvent, subagent_run_id="s1", name="researcher"),
        ev(core.StepStartedEvent, step_name="plan", subagent_run_id="s1"),
        *text("sm", "sub ", "work", subagent_run_id="s1"),
        *tool("st", "look", "{}", parent="sm", subagent_run_id="s1"),
        ev(core.StepFinishedEvent, step_name="plan", subagent_run_id="s1"),
        ev(core.SubagentFinishedEvent, subagent_run_id="s1"),
        result("st", "sr", "found"),
        ev(core.StepFinishedEvent, step_name="plan"),
        finished(),
    ]


def interleaved_stream() -> list[Event]:
    """A run with everything open at once at some point: the stream cut at every event."""
    return [
        started(),
        ev(core.StepStartedEvent, step_name="outer"),
        ev(core.ReasoningStartEvent, message_id="rr"),
        ev(core.ReasoningMessageStartEvent, message_id="rr"),
        ev(core.ReasoningMessageContentEvent, message_id="rr", delta="consider"),
        ev(core.ReasoningMessageContentEvent, message_id="rr", delta=" options"),
        ev(core.ReasoningMessageEndEvent, message_id="rr"),
        ev(core.ReasoningEndEvent, message_id="rr"),
        ev(core.TextMessageStartEvent, message_id="x1", role="assistant"),
        ev(core.TextMessageContentEvent, message_id="x1", delta="I will "),
        ev(
            core.ToolCallStartEvent, tool_call_id="xt", tool_call_name="run", parent_message_id="x1"
        ),
        ev(core.TextMessageContentEvent, message_id="x1", delta="call a tool"),
        ev(core.ToolCallArgsEvent, tool_call_id="xt", delta='{"a"'),
        ev(core.ToolCallArgsEvent, tool_call_id="xt", delta=":1}"),
        ev(
            core.SubagentStartedEvent, subagent_run_id="s1", name="helper", parent_tool_call_id="xt"
        ),
        ev(core.TextMessageChunkEvent, message_id="sx", delta="sub", subagent_run_id="s1"),
        ev(core.TextMessageChunkEvent, delta="-chunk", subagent_run_id="s1"),
        ev(core.StateDeltaEvent, delta=[{"op": "add", "path": "/n", "value": 1}]),
        ev(core.TextMessageChunkEvent, delta="-more", subagent_run_id="s1"),
        ev(core.SubagentFinishedEvent, subagent_run_id="s1"),
        ev(core.ToolCallEndEvent, tool_call_id="xt"),
        ev(core.TextMessageEndEvent, message_id="x1"),
        ev(core.TextMessageChunkEvent, message_id="x2", delta="chunked"),
        ev(core.TextMessageChunkEvent, delta=" text"),
        ev(core.ToolCallChunkEvent, tool_call_id="xt2", tool_call_name="go", delta="{"),
        ev(core.ToolCallChunkEvent, delta="}"),
        result("xt", "xr", "ok"),
        ev(core.StepFinishedEvent, step_name="outer"),
        result("xt2", "xr2", "ok2"),
        *text("x3", "done"),
        finished(),
    ]


STREAMS: dict[str, Callable[[], list[Event]]] = {
    "text": text_stream,
    "tools": tool_stream,
    "chunks": chunk_stream,
    "state": state_stream,
    "snapshot": snapshot_stream,
    "activity": activity_stream,
    "reasoning": reasoning_stream,
    "lifecycle": lifecycle_stream,
    "interleaved": interleaved_stream,
}


def expected(fold: ThreadFold) -> dict[str, Any]:
    return {"messages": fold.messages, "state": fold.state, "pendingInterrupts": fold.interrupts}


def observed(out: dict[str, Any]) -> dict[str, Any]:
    return {k: out[k] for k in ("messages", "state", "pendingInterrupts")}


def test_whole_streams_match(client: Client) -> None:
    streams = {name: make() for name, make in STREAMS.items()}
    scenarios = [
        {"messages": [USER], "state": {"seed": True}, "runs": [{"events": events}]}
        for events in streams.values()
    ]
    for (name, events), out in zip(streams.items(), client(scenarios), strict=True):
        assert out["errors"] == [None], name
        fold = fold_events(events, [USER], {"seed": True})
        assert observed(out) == expected(fold), name
        assert fold.reopen_events() == [], name  # nothing left open


def test_interrupt_outcome_and_resume(client: Client) -> None:
    interrupt = core.Interrupt(id="i1", reason="approval", tool_call_id="ti", message="ok?")
    run1 = [
        started(),
        *text("q", "Shall I?"),
        *tool("ti", "deploy", "{}", parent="q"),
        finished(outcome=core.RunFinishedInterruptOutcome(interrupts=[interrupt])),
    ]
    run2 = [started("r2"), result("ti", "tr", "approved"), *text("q2", "Done."), finished("r2")]
    resume = {"resume": [{"interruptId": "i1", "status": "resolved", "payload": True}]}
    interrupted, resumed = client(
        [
            {"messages": [USER], "runs": [{"events": run1}]},
            {"messages": [USER], "runs": [{"events": run1}, {"events": run2, "params": resume}]},
        ]
    )
    fold = fold_events(run1, [USER])
    assert interrupted["errors"] == [None]
    assert observed(interrupted) == expected(fold)
    assert fold.interrupts == [interrupt.model_dump(by_alias=True, mode="json")]
    assert fold.at_boundary  # the unanswered call awaits the interrupt
    for event in run2:
        fold.apply(event)
    assert resumed["errors"] == [None, None]
    assert observed(resumed) == expected(fold)
    assert fold.interrupts == [] and fold.at_boundary


def _cuts(events: list[Event]) -> range:
    """Every cut inside the first run: after its RUN_STARTED, up to its terminal event."""
    end = next(i for i, e in enumerate(events) if e["type"] in ("RUN_FINISHED", "RUN_ERROR"))
    return range(1, end + 1)


@pytest.mark.parametrize("name", list(STREAMS))
def test_reopen_mid_run_matches(client: Client, name: str) -> None:
    """A client that saw a prefix reconnects and gets RUN_STARTED + reopen_events() + the rest."""
    events = STREAMS[name]()
    full = fold_events(events, [USER])
    scenarios, snapshot_scenarios = [], []
    for cut in _cuts(events):
        at_cut = fold_events(events[:cut], [USER])
        resumed = [started(), *at_cut.reopen_events(), *events[cut:]]
        scenarios.append(
            {"messages": [USER], "runs": [{"events": events[:cut]}, {"events": resumed}]}
        )
        # A client with nothing gets the fold's snapshot first, then the same re-opening.
        fresh = [
            started(),
            ev(core.MessagesSnapshotEvent, messages=at_cut.messages),
            ev(core.StateSnapshotEvent, snapshot=at_cut.state),
            *at_cut.reopen_events(),
            *events[cut:],
        ]
        snapshot_scenarios.append({"runs": [{"events": fresh}]})
    outs = client(scenarios + snapshot_scenarios)
    for cut, out in zip([*_cuts(events), *_cuts(events)], outs, strict=True):
        assert all(e is None for e in out["errors"]), (cut, out["errors"])
        assert observed(out) == expected(full), cut


@pytest.mark.parametrize("name", list(STREAMS))
def test_closing_mid_run_is_accepted(client: Client, name: str) -> None:
    """Cancelling at any point: closing_events() then RUN_FINISHED(cancelled) passes verify."""
    events = STREAMS[name]()
    scenarios, folds = [], []
    for cut in _cuts(events):
        fold = fold_events(events[:cut], [USER])
        closing = fold.closing_events()
        for event in closing:
            fold.apply(event)
        assert fold.reopen_events() == [], cut  # everything closed, chunk lanes included
        ended = finished(outcome=core.RunFinishedCancelledOutcome())
        fold.apply(ended)
        folds.append(fold)
        scenarios.append(
            {"messages": [USER], "runs": [{"events": [*events[:cut], *closing, ended]}]}
        )
    for fold, out in zip(folds, client(scenarios), strict=True):
        assert out["errors"] == [None]
        assert observed(out) == expected(fold)
