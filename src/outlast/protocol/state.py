"""The shared state's events: each change makes a new state, never edits the old one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from outlast.protocol.jsonutil import PATCH_ERRORS, apply_json_patch, clone_json

Event = dict[str, Any]

STATE_EVENTS = frozenset({"STATE_SNAPSHOT", "STATE_DELTA"})


def next_state(state: Any, event: Event) -> Any:
    """The shared state after a state event, as a new value: ``state`` is never changed
    in place (so a reference to it stays the state as of its time). Raises one of
    ``PATCH_ERRORS`` for a delta that does not apply, which the fold then skips."""
    if event["type"] == "STATE_SNAPSHOT":
        return clone_json(event.get("snapshot"))
    return apply_json_patch(state, event.get("delta"))


def state_after(state: Any, events: Iterable[Event]) -> Any:
    """``state`` with the state events of ``events`` applied as the fold applies them
    (a delta that does not apply is skipped)."""
    for event in events:
        if event.get("type") in STATE_EVENTS:
            try:
                state = next_state(state, event)
            except PATCH_ERRORS:
                continue
    return state
