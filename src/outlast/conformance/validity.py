"""``valid``: every stream the checker read to its end passes the independent AG-UI
validator ``ag-ui-validate`` (the ``check`` extra), with no error and no warning but
the two findings a stream that continues what a client holds raises by design
(docs/resumable-ag-ui.md §4.3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from outlast.conformance.report import Result
from outlast.conformance.session import Stream

MISSING = ("the AG-UI validator is not installed: pip install 'outlast[check]' "
           "(the ag-ui-validate package)")


def continued(held: list[dict[str, Any]], events: list[dict[str, Any]],
              owed: Iterable[str] = ()) -> set[tuple[str, int]]:
    """The findings allowed in a stream that continues ``held``: AGUI204 at the end of a
    tool call whose arguments began before the cursor, AGUI207 at the result of a call
    the client holds or of a call an earlier run made (``owed``)."""
    open_args = {e.get("toolCallId") for e in held if e.get("type") == "TOOL_CALL_ARGS"} - {
        e.get("toolCallId") for e in held if e.get("type") == "TOOL_CALL_END"}
    started = {e.get("toolCallId") for e in held
               if e.get("type") == "TOOL_CALL_START"} | set(owed)
    allowed: set[tuple[str, int]] = set()
    for i, e in enumerate(events):
        if e.get("type") == "TOOL_CALL_END" and e.get("toolCallId") in open_args:
            allowed.add(("AGUI204", i))
        if e.get("type") == "TOOL_CALL_RESULT" and e.get("toolCallId") in started:
            allowed.add(("AGUI207", i))
    return allowed


def findings(stream: Stream) -> list[str]:
    """The validator's errors and warnings on one stream, but for those allowed."""
    from ag_ui_validate.pytest_plugin import validate_agui

    report = validate_agui(list(stream.events))
    allowed = continued(stream.held, stream.events, stream.owed)
    out = [f"validator error: {e}" for e in report.internal_errors]
    out += [f"{d.rule} {d.severity} at event {d.event_index} ({d.event_type}): {d.message}"
            for d in report.diagnostics
            if d.severity in ("error", "warning") and (d.rule, d.event_index) not in allowed]
    return out


def valid(streams: list[Stream]) -> Result:
    check = "valid"
    try:
        import ag_ui_validate  # noqa: F401
    except ImportError:
        return Result(check, "fail", MISSING)
    if not streams:
        return Result(check, "fail", "no stream was read to its end: nothing to validate")
    bad: list[dict[str, Any]] = []
    for stream in streams:
        found = findings(stream)
        if found:
            bad.append({"stream": stream.label, "findings": found[:10],
                        "types": [e.get("type") for e in stream.events][:60]})
    if bad:
        return Result(check, "fail", f"{len(bad)} of {len(streams)} streams fail ag-ui-validate: "
                      + "; ".join(f"{b['stream']}: {b['findings'][0]}" for b in bad[:3]), bad)
    return Result(check, "pass", f"{len(streams)} streams read to their end pass ag-ui-validate",
                  [{"streams": [s.label for s in streams]}])
