"""A ``MESSAGES_SNAPSHOT`` merged into a thread's messages, as @ag-ui/client merges it.

Messages the snapshot names replace those with their id (unchanged ones keep their
object); messages it does not name are removed, except the client-only activity and
reasoning messages a snapshot does not speak for; new ones are appended in its order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from outlast.protocol.jsonutil import clone_json, clone_message

Event = dict[str, Any]
Message = dict[str, Any]

_ACTIVITY_HISTORY_METADATA = "@ag-ui/client"


def merged_snapshot(messages: list[Message], pos: dict[int, int], event: Event
                    ) -> tuple[list[Message], set[str], bool, list[Message]]:
    """``messages`` (each at ``pos[id(message)]``) after the snapshot ``event``: the new
    list, the ids removed, whether a kept message moved, and the new message objects in
    it (the changes to save)."""
    incoming = [clone_message(m) for m in event.get("messages") or ()]
    by_id = {m.get("id"): m for m in incoming}  # the last of duplicate ids wins
    preserved = _preserved(event, incoming)
    result: list[Message] = []
    fresh: list[Message] = []
    removed: set[str] = set()
    reordered = False
    present: set[Any] = set()
    used: set[int] = set()
    for old in messages:
        mid: Any = old.get("id")
        new = by_id.get(mid)
        if new is None and not preserved(old):
            removed.add(mid)
            continue
        if len(result) != pos[id(old)]:
            reordered = True  # something before it was removed
        if new is None or new == old:
            result.append(old)  # unchanged: keep the object, nothing to save
        else:
            if id(new) in used:  # two old messages with one id, one replacement
                new = clone_json(new)
            used.add(id(new))
            fresh.append(new)
            result.append(new)
        present.add(mid)
    for new in incoming:
        if new.get("id") not in present:
            fresh.append(new)
            result.append(new)
    return result, removed, reordered, fresh


def _preserved(event: Event, incoming: list[Message]) -> Callable[[Message], bool]:
    """Whether an existing message the snapshot does not name survives it: client-only
    activity and reasoning messages do, when the snapshot does not speak for their kind
    (the backend may simply not track them)."""
    declared, owned = _authoritative_activity_types(event)
    has_activity = any(m.get("role") == "activity" for m in incoming)
    has_reasoning = any(m.get("role") == "reasoning" for m in incoming)

    def preserved(message: Message) -> bool:
        role = message.get("role")
        if role == "activity":
            if not declared:
                return not has_activity
            return owned is not None and message.get("activityType") not in owned
        return role == "reasoning" and not has_reasoning

    return preserved


def _authoritative_activity_types(event: Event) -> tuple[bool, list[str] | None]:
    """(declared, types): the activity types a snapshot's metadata claims; None claims all."""
    metadata = event.get("metadata")
    if not isinstance(metadata, dict) or _ACTIVITY_HISTORY_METADATA not in metadata:
        return False, None
    value = metadata[_ACTIVITY_HISTORY_METADATA]
    if not isinstance(value, dict):
        return True, []  # an invalid declaration owns no types
    if "authoritativeActivityTypes" not in value:
        return False, None
    types = value["authoritativeActivityTypes"]
    if types is None:
        return True, None
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        return True, types
    return True, []
