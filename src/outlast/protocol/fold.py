"""Fold AG-UI events into a conversation exactly as @ag-ui/client 1.0.0's ``defaultApplyEvents``.

Events are wire dicts (camelCase, as ``event.model_dump(by_alias=True, mode="json")``).
Semantics follow the client's inbound pipeline: ``transformChunks`` (see ``chunks``), the
open/close bookkeeping of ``verifyEvents`` (see ``constructs``) and the reducer itself.

Pending interrupts follow ``AbstractAgent.pendingInterrupts``: every ``RUN_FINISHED`` sets
them, to ``outcome.interrupts`` for an interrupt outcome and to ``[]`` for any other outcome
(success, cancelled, absent). ``RUN_STARTED`` and ``RUN_ERROR`` leave them alone — the client
instead refuses to start a run whose ``resume`` does not address every pending interrupt.

Where the client only logs a warning (unknown ids, a failing JSON Patch) the event is
ignored here too. Chunks the client's transform rejects (which fails the run there) are
dropped with a logged warning. Messages are plain JSON and are not validated, so unknown
fields survive here where the client's schema enforcement would strip them.

Message dicts are updated in place (serialize what ``take_changes`` hands out before
applying more events); ``state`` is never mutated, each change makes a new root that shares
untouched subtrees with the previous one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from outlast.protocol import constructs
from outlast.protocol.chunks import CHUNK_TYPES, ChunkError, ChunkExpander
from outlast.protocol.jsonutil import (
    PATCH_ERRORS,
    apply_json_patch,
    clone_json,
    clone_message,
    own_message,
)
from outlast.protocol.message_index import Message, MessageIndex, tool_calls
from outlast.protocol.messages_snapshot import merged_snapshot
from outlast.protocol.state import next_state

Event = dict[str, Any]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FoldChanges:
    """What changed in a ThreadFold since the previous ``take_changes()``."""

    upserts: list[tuple[int, dict[str, Any]]]  # (index in messages, live message dict)
    removed_ids: list[str]  # ids no longer present (removed by MESSAGES_SNAPSHOT)
    reordered: bool  # a message moved or was inserted before an existing one
    state_changed: bool
    interrupts_changed: bool


class ThreadFold(MessageIndex):
    """Folds AG-UI events into messages, state and pending interrupts, as @ag-ui/client does."""

    __slots__ = ("_chunks", "_interrupts_changed", "_open", "_state_changed",
                 "construct_changes", "interrupts", "state")

    def __init__(
        self,
        messages: list[dict[str, Any]] | None = None,
        state: Any = None,
        interrupts: list[dict[str, Any]] | None = None,
        *,
        copy: bool = True,
    ) -> None:
        # `messages`, `state` and `interrupts` are copied (indexes point into the fold's
        # own). With copy=False the fold takes `messages` and `state` over as they are:
        # for values nobody else holds, such as a snapshot just read from the store,
        # where copying a long thread cost more than reading it.
        super().__init__([clone_message(m) for m in messages or ()] if copy
                         else [own_message(m) for m in messages or ()])
        self.state: Any = {} if state is None else clone_json(state) if copy else state
        self.interrupts: list[dict[str, Any]] = clone_json(list(interrupts or ()))
        self._chunks = ChunkExpander()
        self._open: dict[constructs.Key, constructs.OpenConstruct] = {}
        self._state_changed = False
        self._interrupts_changed = False
        # When a list, every construct opened (key, construct) or closed (key, None) is
        # recorded here for whoever indexes them (the event log's construct index).
        self.construct_changes: list[tuple[constructs.Key, constructs.OpenConstruct | None]] \
            | None = None

    # ----------------------------------------------------------------- public API

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one event (chunks are expanded first, as the client does)."""
        etype: Any = event.get("type")
        if etype not in CHUNK_TYPES and not self._chunks.lanes:
            handler = _HANDLERS.get(etype)
            if handler is not None:
                handler(self, event, False)
            return
        try:
            expanded = self._chunks.expand(event)
        except ChunkError as exc:
            log.warning("dropping %s: %s", etype, exc)
            return
        chunked = etype in CHUNK_TYPES
        for ev in expanded:
            handler = _HANDLERS.get(ev["type"])
            if handler is not None:
                handler(self, ev, chunked)

    def apply_delta(self, event: dict[str, Any]) -> None:
        """``apply`` for a content delta of a construct that ``continues``: its handler
        alone, as ``apply`` would call it."""
        _HANDLERS[event["type"]](self, event, False)

    @property
    def at_boundary(self) -> bool:
        """True when nothing is open and every tool call is answered or awaits an interrupt.

        Open means a text or reasoning message, reasoning phase, tool call, step or subagent
        started and not yet ended in the current run.
        """
        if self._open:
            return False
        if not self._unanswered:
            return True
        awaited = {i.get("toolCallId") for i in self.interrupts}
        return self._unanswered <= awaited

    @property
    def open_keys(self) -> AbstractSet[constructs.Key]:
        """The keys of the constructs open now (as ``verifyEvents`` tracks them): a live,
        read-only view."""
        return self._open.keys()

    def continues(self, key: constructs.Key) -> bool:
        """True when the construct ``key`` is open outside any chunk lane: a content delta
        for it passes the ordering checks and ``apply`` folds it with its handler alone."""
        return key in self._open and not self._chunks.lanes

    @property
    def chunk_lanes_open(self) -> bool:
        """True while a construct assembled from ``*_CHUNK`` events is open."""
        return bool(self._chunks.lanes)

    def preview_chunks(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """The explicit events ``event`` would expand to, without applying anything."""
        return self._chunks.copy().expand(event)

    def knows_tool_call(self, tool_call_id: str) -> bool:
        """True when a message of the thread holds this tool call."""
        return tool_call_id in self._calls

    def reopen_events(self) -> list[dict[str, Any]]:
        """Events that re-open every open construct, in opening order, for a fresh stream.

        Send them right after a (synthesized) RUN_STARTED to a client that already holds
        ``messages`` as of now; they add no content (see ``constructs`` for why).
        """
        return constructs.reopen_events(self._open)

    def closing_events(self) -> list[dict[str, Any]]:
        """Events that close every open construct, newest first (for a cancelled run)."""
        return constructs.closing_events(self._open)

    def take_changes(self) -> FoldChanges:
        """Changes since the previous call (or construction); O(changed messages).

        Upserts hold the live message dicts: serialize them before applying more events.
        """
        upserts, removed, reordered = self._take_message_changes()
        changes = FoldChanges(
            upserts, removed, reordered, self._state_changed, self._interrupts_changed
        )
        self._state_changed = self._interrupts_changed = False
        return changes

    def copy(self) -> ThreadFold:
        """Deep copy, including open constructs, chunk lanes and untaken changes."""
        other = ThreadFold(self.messages, self.state, self.interrupts)
        other._chunks = self._chunks.copy()
        other._open = dict(self._open)  # entries are immutable
        self._copy_tracking_to(other)
        other._state_changed = self._state_changed
        other._interrupts_changed = self._interrupts_changed
        return other

    # -------------------------------------------------------------- bookkeeping

    def _opened(self, event: Event, chunked: bool) -> None:
        found = constructs.opener(event, chunked)
        if found is not None:
            self._open[found[0]] = found[1]
            if self.construct_changes is not None:
                self.construct_changes.append(found)

    def _closed(self, event: Event) -> None:
        key = constructs.closer_key(event)
        if self._open.pop(key, None) is not None and self.construct_changes is not None:
            self.construct_changes.append((key, None))

    def _close_all(self) -> None:
        if self.construct_changes is not None:
            self.construct_changes.extend((key, None) for key in self._open)
        self._open.clear()

    def _merge_metadata(self, target: dict[str, Any], event: Event) -> bool:
        # mergeMetadata: shallow, key by key, last write wins; values cloned off the event.
        incoming = event.get("metadata")
        if incoming is None:
            return False
        existing = target.get("metadata")
        merged = dict(existing) if isinstance(existing, dict) else {}
        merged.update(clone_json(incoming))
        target["metadata"] = merged
        return True

    # --------------------------------------------------------------- handlers

    def _on_message_start(self, event: Event, chunked: bool) -> None:
        self._opened(event, chunked)
        mid = event["messageId"]
        existing = self._by_id.get(mid)
        if existing is not None and existing.get("role") == "activity":
            return  # never stream text into an activity message
        target = existing
        if target is None:
            if event["type"] == "TEXT_MESSAGE_START":
                role = event.get("role")
                target = {"id": mid, "role": "assistant" if role is None else role, "content": ""}
                if event.get("name") is not None:
                    target["name"] = event["name"]
            else:
                target = {"id": mid, "role": "reasoning", "content": ""}
            if event.get("subagentRunId") is not None:
                target["subagentRunId"] = event["subagentRunId"]
            self._append(target)
        if self._merge_metadata(target, event):
            self._touch(target)

    def _on_message_content(self, event: Event, chunked: bool) -> None:
        message = self._by_id.get(event["messageId"])
        if message is None or message.get("role") == "activity":
            return
        self._add_text(message, "content", event["delta"])
        if "metadata" in event:
            self._merge_metadata(message, event)
        self._dirty[id(message)] = message

    def _on_message_end(self, event: Event, chunked: bool) -> None:
        self._closed(event)
        message = self._by_id.get(event["messageId"])
        if message is None or message.get("role") == "activity":
            return
        if self._merge_metadata(message, event):
            self._touch(message)

    def _on_tool_start(self, event: Event, chunked: bool) -> None:
        self._opened(event, chunked)
        tcid, name = event["toolCallId"], event["toolCallName"]
        hit = self._calls.get(tcid)
        if hit is not None:  # idempotent: a replayed start neither duplicates nor resets
            owner, call = hit
            renamed = call["function"]["name"] != name
            if renamed:
                call["function"]["name"] = name
            if self._merge_metadata(call, event) or renamed:
                self._touch(owner)
            return
        parent_id = event.get("parentMessageId")
        target = self._by_id.get(parent_id) if parent_id else None
        if target is None or target.get("role") != "assistant":
            new_id = tcid if target is not None or not parent_id else parent_id
            was_created = new_id not in self._by_id
            target = {"id": new_id, "role": "assistant", "toolCalls": []}
            if was_created and event.get("subagentRunId") is not None:
                target["subagentRunId"] = event["subagentRunId"]
            self._append(target)
        calls = target.get("toolCalls")
        if calls is None:
            calls = target["toolCalls"] = []
        new_call: dict[str, Any] = {"id": tcid, "type": "function"}
        new_call["function"] = {"name": name, "arguments": ""}
        calls.append(new_call)
        self._merge_metadata(new_call, event)
        self._calls[tcid] = (target, new_call)
        if tcid not in self._answered:
            self._unanswered.add(tcid)
        self._touch(target)

    def _on_tool_args(self, event: Event, chunked: bool) -> None:
        hit = self._calls.get(event["toolCallId"])
        if hit is None:
            return
        owner, call = hit
        self._add_text(call["function"], "arguments", event["delta"])
        if "metadata" in event:
            self._merge_metadata(call, event)
        self._dirty[id(owner)] = owner

    def _on_tool_end(self, event: Event, chunked: bool) -> None:
        self._closed(event)
        hit = self._calls.get(event["toolCallId"])
        if hit is not None and self._merge_metadata(hit[1], event):
            self._touch(hit[0])

    def _on_tool_result(self, event: Event, chunked: bool) -> None:
        tcid = event["toolCallId"]
        message: Message = {
            "id": event["messageId"],
            "toolCallId": tcid,
            "role": event.get("role") or "tool",
            "content": clone_json(event.get("content")),
        }
        if event.get("subagentRunId") is not None:
            message["subagentRunId"] = event["subagentRunId"]
        self._merge_metadata(message, event)
        owner = self._assistant_holding(tcid)
        if owner is None:
            self._append(message)
            return
        # Right after the assistant message that issued the call, after any results
        # already recorded for it, so parallel results keep their order.
        messages = self.messages
        index = self._pos[id(owner)] + 1
        while index < len(messages) and messages[index].get("role") == "tool":
            index += 1
        self._insert(index, message)

    def _on_state_snapshot(self, event: Event, chunked: bool) -> None:
        self.state = next_state(self.state, event)
        self._state_changed = True

    def _on_state_delta(self, event: Event, chunked: bool) -> None:
        if event.get("delta") == []:
            return  # an empty patch changes nothing (closing_events() emits these)
        try:
            self.state = next_state(self.state, event)
        except PATCH_ERRORS as exc:
            # The error's text quotes the state: only its kind at the default level.
            log.warning("STATE_DELTA not applied (%s)", type(exc).__name__)
            log.debug("STATE_DELTA not applied: %s", exc)
            return
        self._state_changed = True

    def _on_messages_snapshot(self, event: Event, chunked: bool) -> None:
        result, removed, reordered, fresh = merged_snapshot(self.messages, self._pos, event)
        for message in fresh:
            self._dirty[id(message)] = message
        self._replace_all(result, removed, reordered)

    def _on_activity_snapshot(self, event: Event, chunked: bool) -> None:
        mid = event["messageId"]
        existing = self._by_id.get(mid)
        replace = event.get("replace")
        replace = True if replace is None else replace
        activity: Message = {
            "id": mid,
            "role": "activity",
            "activityType": event["activityType"],
            "content": clone_json(event.get("content")),
        }
        if event.get("subagentRunId") is not None:
            activity["subagentRunId"] = event["subagentRunId"]
        if existing is None:
            self._merge_metadata(activity, event)
            self._append(activity)
        elif existing.get("role") == "activity":
            if replace:
                # Content and attribution are re-minted; accumulated metadata is kept.
                updated = {**existing, "activityType": activity["activityType"]}
                updated["content"] = activity["content"]
                updated.pop("subagentRunId", None)
                if "subagentRunId" in activity:
                    updated["subagentRunId"] = activity["subagentRunId"]
                self._replace(existing, updated)
            if self._merge_metadata(existing, event):
                self._touch(existing)
        elif replace:  # a non-activity message under this id is replaced outright
            self._replace(existing, activity)
            self._merge_metadata(existing, event)

    def _on_activity_delta(self, event: Event, chunked: bool) -> None:
        message = self._by_id.get(event["messageId"])
        if message is None or message.get("role") != "activity":
            return
        # Metadata lands even when the patch fails.
        if self._merge_metadata(message, event):
            self._touch(message)
        content = message.get("content")
        try:
            patched = apply_json_patch({} if content is None else content, event.get("patch") or [])
        except PATCH_ERRORS as exc:
            # The error's text quotes the message's content: only its kind by default.
            log.warning("ACTIVITY_DELTA for %r not applied (%s)", event["messageId"],
                        type(exc).__name__)
            log.debug("ACTIVITY_DELTA for %r not applied: %s", event["messageId"], exc)
            return
        message["content"] = patched
        message["activityType"] = event["activityType"]
        self._touch(message)

    def _on_run_started(self, event: Event, chunked: bool) -> None:
        # A new run: nothing from an earlier run can be continued (verify resets per run).
        self._close_all()
        run_input = event.get("input")
        if not isinstance(run_input, dict):
            return
        for message in run_input.get("messages") or ():
            if message.get("id") not in self._by_id:
                self._append(clone_message(message))

    def _on_run_finished(self, event: Event, chunked: bool) -> None:
        self._close_all()
        outcome = event.get("outcome")
        interrupts: list[dict[str, Any]] = []
        if isinstance(outcome, dict) and outcome.get("type") == "interrupt":
            interrupts = [clone_message(i) for i in outcome.get("interrupts") or ()]
        if interrupts != self.interrupts:
            self._interrupts_changed = True
        self.interrupts = interrupts

    def _on_run_error(self, event: Event, chunked: bool) -> None:
        self._close_all()  # the run is over; nothing it left open can be continued

    def _on_encrypted_value(self, event: Event, chunked: bool) -> None:
        entity, value = event["entityId"], event["encryptedValue"]
        if event.get("subtype") == "tool-call":
            owner = self._assistant_holding(entity)
            if owner is None:
                return
            for call in tool_calls(owner):
                if call.get("id") == entity:
                    call["encryptedValue"] = value
                    break
        else:
            owner = self._by_id.get(entity)
            if owner is None or owner.get("role") == "activity":
                return
            owner["encryptedValue"] = value
        self._touch(owner)

    def _on_open(self, event: Event, chunked: bool) -> None:
        self._opened(event, chunked)

    def _on_close(self, event: Event, chunked: bool) -> None:
        self._closed(event)


_Handler = Callable[[ThreadFold, Event, bool], None]
_HANDLERS: dict[str, _Handler] = {
    "TEXT_MESSAGE_START": ThreadFold._on_message_start,
    "TEXT_MESSAGE_CONTENT": ThreadFold._on_message_content,
    "TEXT_MESSAGE_END": ThreadFold._on_message_end,
    "REASONING_MESSAGE_START": ThreadFold._on_message_start,
    "REASONING_MESSAGE_CONTENT": ThreadFold._on_message_content,
    "REASONING_MESSAGE_END": ThreadFold._on_message_end,
    "REASONING_START": ThreadFold._on_open,
    "REASONING_END": ThreadFold._on_close,
    "REASONING_ENCRYPTED_VALUE": ThreadFold._on_encrypted_value,
    "TOOL_CALL_START": ThreadFold._on_tool_start,
    "TOOL_CALL_ARGS": ThreadFold._on_tool_args,
    "TOOL_CALL_END": ThreadFold._on_tool_end,
    "TOOL_CALL_RESULT": ThreadFold._on_tool_result,
    "STATE_SNAPSHOT": ThreadFold._on_state_snapshot,
    "STATE_DELTA": ThreadFold._on_state_delta,
    "MESSAGES_SNAPSHOT": ThreadFold._on_messages_snapshot,
    "ACTIVITY_SNAPSHOT": ThreadFold._on_activity_snapshot,
    "ACTIVITY_DELTA": ThreadFold._on_activity_delta,
    "RUN_STARTED": ThreadFold._on_run_started,
    "RUN_FINISHED": ThreadFold._on_run_finished,
    "RUN_ERROR": ThreadFold._on_run_error,
    "STEP_STARTED": ThreadFold._on_open,
    "STEP_FINISHED": ThreadFold._on_close,
    "SUBAGENT_STARTED": ThreadFold._on_open,
    "SUBAGENT_FINISHED": ThreadFold._on_close,
    "SUBAGENT_ERROR": ThreadFold._on_close,
}


def fold_events(
    events: Iterable[dict[str, Any]],
    messages: list[dict[str, Any]] | None = None,
    state: Any = None,
) -> ThreadFold:
    """Fold `events` onto `messages` and `state` and return the resulting ThreadFold."""
    fold = ThreadFold(messages, state)
    for event in events:
        fold.apply(event)
    return fold
