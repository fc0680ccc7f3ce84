"""The independent AG-UI conformance validator (the ``ag-ui-validate`` package), as the
tests use it: a stream of wire events must raise no error and no warning."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx
from ag_ui_validate.pytest_plugin import validate_agui

from tests.support.runs import stored_log
from tests.support.server import collect


def findings(events: list[dict[str, Any]],
             features: Iterable[str] = ()) -> list[tuple[str, int]]:
    """Every error or warning the validator finds, as (rule, event index)."""
    report = validate_agui(list(events), features=list(features))
    assert not report.internal_errors, report.internal_errors
    return [(d.rule, d.event_index) for d in report.diagnostics
            if d.severity in ("error", "warning")]


def assert_valid(events: list[dict[str, Any]], features: Iterable[str] = (), *,
                 allowed: set[tuple[str, int]] | frozenset[tuple[str, int]] = frozenset()
                 ) -> None:
    """0 errors and 0 warnings, but for the ``allowed`` (rule, event index) findings."""
    report = validate_agui(list(events), features=list(features))
    assert not report.internal_errors, report.internal_errors
    bad = [d for d in report.diagnostics if d.severity in ("error", "warning")
           and (d.rule, d.event_index) not in allowed]
    assert not bad, "the AG-UI validator refuses the stream:\n" + "\n".join(
        f"{d.rule} {d.severity} at event {d.event_index} ({d.event_type}): {d.message}"
        for d in bad) + "\nstream: " + repr([e.get("type") for e in events])


def continued(held: list[dict[str, Any]], events: list[dict[str, Any]],
              owed: Iterable[str] = ()) -> set[tuple[str, int]]:
    """The findings a stream that continues ``held`` must raise, and only those
    (docs/spec.md, "Streams a client continues"): the rest of a tool call's arguments
    whose start the client holds (AGUI204 at the call's end) and the result of a call
    the client holds (AGUI207), or of a call a previous run made (``owed``)."""
    open_args = {e["toolCallId"] for e in held if e["type"] == "TOOL_CALL_ARGS"} - {
        e["toolCallId"] for e in held if e["type"] == "TOOL_CALL_END"}
    started = {e["toolCallId"] for e in held if e["type"] == "TOOL_CALL_START"} | set(owed)
    allowed: set[tuple[str, int]] = set()
    for i, e in enumerate(events):
        if e["type"] == "TOOL_CALL_END" and e["toolCallId"] in open_args:
            allowed.add(("AGUI204", i))
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in started:
            allowed.add(("AGUI207", i))
    return allowed


async def assert_every_reattach_valid(client: httpx.AsyncClient, run_id: str,
                                      features: Iterable[str] = (), *,
                                      owed: Iterable[str] = ()) -> int:
    """Reattach to a final run after each of its seqs (``Last-Event-ID``); every stream
    must be valid but for what the client already holds (``owed``: the calls of an
    earlier run this one answers). Returns how many streams were read."""
    owed = set(owed)
    log = await stored_log(client, run_id)
    seqs = [f.id for f in log if f.id is not None]
    for cursor in seqs[:-1]:
        _, frames = await collect(client, "GET", f"/runs/{run_id}/events",
                                  headers={"Last-Event-ID": str(cursor)})
        events = [f.event for f in frames]
        held = [f.event for f in log if f.id is not None and f.id <= cursor]
        assert_valid(events, features, allowed=continued(held, events, owed))
    return len(seqs) - 1
