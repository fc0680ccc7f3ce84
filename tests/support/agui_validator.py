"""The independent AG-UI conformance validator (the ``ag-ui-validate`` package), as the
tests use it: a stream of wire events must raise no error and no warning."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ag_ui_validate.pytest_plugin import validate_agui


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
