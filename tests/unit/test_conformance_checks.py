"""The judgements inside ``outlast check`` that do not need a server: what a reattached
stream must be (docs/resumable-ag-ui.md §4), which validator findings a continuation
may raise, and the report's shape and exit status."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from outlast.conformance.checks.verdicts import continuation_problem, ran_agent
from outlast.conformance.report import CHECKS, Report, Result
from outlast.conformance.session import Stream
from outlast.conformance.validity import MISSING, continued, valid
from outlast.conformance.wire import Exchange, Frame, parse_block

LOG = [Frame(str(i), e) for i, e in enumerate([
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
], start=1)]


def reattached(*frames: Frame) -> Exchange:
    return Exchange("GET", "u", frames=list(frames), ended=True, status=200)


def synthesized(event: dict[str, Any]) -> Frame:
    return Frame(None, event)


def test_a_reattach_after_n_is_exactly_the_logged_events_after_n() -> None:
    start = synthesized({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    reopen = synthesized({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    assert continuation_problem(reattached(start, reopen, *LOG[3:]), LOG, 3) is None
    # One missing, one cut short, one repeated, one out of place: each is named.
    assert "is id 5 TEXT_MESSAGE_END, the log's is id 4" in str(continuation_problem(
        reattached(start, reopen, *LOG[4:]), LOG, 3))
    assert "the log has 3" in str(continuation_problem(
        reattached(start, reopen, *LOG[3:5]), LOG, 3))
    assert "id 3" in str(continuation_problem(reattached(start, *LOG[2:]), LOG, 3))
    late = continuation_problem(reattached(start, LOG[3], reopen, *LOG[4:]), LOG, 3)
    assert late is not None and "without an id came after" in late
    assert "not RUN_STARTED" in str(continuation_problem(reattached(*LOG[3:]), LOG, 3))


def test_a_continuation_may_raise_only_the_two_findings_of_what_it_continues() -> None:
    held = [{"type": "TOOL_CALL_START", "toolCallId": "c"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{"}]
    events = [{"type": "RUN_STARTED"}, {"type": "TOOL_CALL_ARGS", "toolCallId": "c"},
              {"type": "TOOL_CALL_END", "toolCallId": "c"},
              {"type": "TOOL_CALL_RESULT", "toolCallId": "c"},
              {"type": "TOOL_CALL_RESULT", "toolCallId": "other"}]
    assert continued(held, events) == {("AGUI204", 2), ("AGUI207", 3)}
    assert continued([], events, owed={"other"}) == {("AGUI207", 4)}


def test_valid_without_the_validator_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui_validate", None)  # as if not installed
    result = valid([Stream("s", [e.event for e in LOG])])
    assert result.status == "fail" and result.detail == MISSING
    assert "outlast[check]" in MISSING


def test_a_hydration_that_runs_the_agent_is_told_apart_from_one_that_follows_a_run() -> None:
    own = Exchange("POST", "u", body={"runId": "h"}, frames=[
        Frame(None, {"type": "RUN_STARTED", "runId": "h"}),
        Frame(None, {"type": "TEXT_MESSAGE_START", "messageId": "x"})])
    follows = Exchange("POST", "u", body={"runId": "h"}, frames=[
        Frame(None, {"type": "RUN_STARTED", "runId": "active"}),
        Frame("9", {"type": "TEXT_MESSAGE_START", "messageId": "x"})])
    assert ran_agent(own) and not ran_agent(follows)


def test_frames_keep_their_own_id_or_none() -> None:
    assert parse_block("id: 7\ndata: {}") == ("7", "{}")
    assert parse_block("data: {\ndata: }") == (None, "{\n}")
    assert parse_block(": keepalive") == (None, None)
    assert parse_block("retry: 1000") == (None, None)


def test_the_report_fails_only_on_a_failed_check() -> None:
    results = [Result("valid", "pass", "ok"), Result("restart", "skip", "not asked")]
    report = Report("http://x/agents/a", "0.1", results)
    assert not report.failed
    shape = report.to_json()
    assert [c["id"] for c in shape["checks"]] == ["valid", "restart"]
    assert {"id", "status", "detail", "section", "evidence"} <= set(shape["checks"][0])
    assert shape["checks"][1]["section"] == CHECKS["restart"]
    report.results.append(Result("cancel", "fail", "404"))
    assert report.failed and "FAIL  cancel" in report.text()
