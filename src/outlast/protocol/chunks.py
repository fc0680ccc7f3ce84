"""Expansion of AG-UI ``*_CHUNK`` events, as @ag-ui/client 1.0.0's ``transformChunks`` does it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Event = dict[str, Any]
LaneKind = Literal["text", "tool", "reasoning"]

CHUNK_TYPES = frozenset({"TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK", "REASONING_MESSAGE_CHUNK"})

# Explicit events close only the lane of their own `subagentRunId`.
_LANE_EVENTS = frozenset(
    {
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "CUSTOM",
        "STEP_STARTED",
        "STEP_FINISHED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    }
)
# Run-level events (and a snapshot of the whole conversation) close every lane.
_RUN_EVENTS = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"})
_SUBAGENT_TERMINALS = frozenset({"SUBAGENT_FINISHED", "SUBAGENT_ERROR"})

_END_TYPE = {
    "text": "TEXT_MESSAGE_END",
    "tool": "TOOL_CALL_END",
    "reasoning": "REASONING_MESSAGE_END",
}
_ID_FIELD = {"text": "messageId", "tool": "toolCallId", "reasoning": "messageId"}


class ChunkError(ValueError):
    """A chunk the client's transform rejects (it fails the run on the client)."""


@dataclass(slots=True)
class Lane:
    """The stream one lane (a subagent, or ``None`` for the parent) is assembling from chunks."""

    kind: LaneKind
    entity_id: str
    fields: Event  # the opener's fields, shaped like the synthesized *_START minus `type`


class ChunkExpander:
    """Stateful chunk expansion: turns each incoming event into the events the client applies."""

    __slots__ = ("lanes",)

    def __init__(self) -> None:
        # Insertion order matters: closing every lane emits ENDs in opening order.
        self.lanes: dict[str | None, Lane] = {}

    def copy(self) -> ChunkExpander:
        """Independent copy of the lane state."""
        other = ChunkExpander()
        other.lanes = {k: Lane(v.kind, v.entity_id, dict(v.fields)) for k, v in self.lanes.items()}
        return other

    def expand(self, event: Event) -> list[Event]:
        """The events the client's reducer sees for `event`; ChunkError where the client throws."""
        etype = event.get("type")
        if etype in _LANE_EVENTS:
            if not self.lanes:
                return [event]
            return [*self.close_lane(event.get("subagentRunId")), event]
        if etype in _RUN_EVENTS:
            return [*self.close_all(), event]
        if etype in _SUBAGENT_TERMINALS:
            owner = event.get("subagentRunId")
            return [event] if owner is None else [*self.close_lane(owner), event]
        if etype == "TEXT_MESSAGE_CHUNK":
            return self._text(event)
        if etype == "TOOL_CALL_CHUNK":
            return self._tool(event)
        if etype == "REASONING_MESSAGE_CHUNK":
            return self._reasoning(event)
        return [event]

    def close_lane(self, owner: str | None) -> list[Event]:
        """Synthesized END for whatever `owner`'s lane has open, clearing the lane."""
        lane = self.lanes.pop(owner, None)
        if lane is None:
            return []
        end: Event = {"type": _END_TYPE[lane.kind], _ID_FIELD[lane.kind]: lane.entity_id}
        if lane.fields.get("subagentRunId") is not None:
            end["subagentRunId"] = lane.fields["subagentRunId"]
        return [end]

    def close_all(self) -> list[Event]:
        """Close every lane, in the order the lanes opened."""
        if not self.lanes:
            return []
        return [end for owner in list(self.lanes) for end in self.close_lane(owner)]

    def _resolve_lane(self, kind: LaneKind, entity_id: str | None, tag: str | None) -> str | None:
        # Mirrors `resolveLane`: a named id continues wherever it is open; otherwise the tag,
        # the parent's lane, or the sole open lane of this kind names the continuation.
        if entity_id is not None:
            for owner, lane in self.lanes.items():
                if lane.kind == kind and lane.entity_id == entity_id:
                    if tag is not None and tag != owner:
                        raise ChunkError(f"chunk for {kind} {entity_id!r} names subagent {tag!r}")
                    return owner
            return tag
        if tag is not None:
            return tag
        parent = self.lanes.get(None)
        if parent is not None and parent.kind == kind:
            return None
        candidates = [owner for owner, lane in self.lanes.items() if lane.kind == kind]
        if len(candidates) > 1:
            raise ChunkError(f"ambiguous {kind} chunk: {len(candidates)} lanes are open")
        return candidates[0] if candidates else None

    def _continuation(self, kind: LaneKind, entity_id: str | None, lane: str | None) -> Lane | None:
        open_lane = self.lanes.get(lane)
        if open_lane is not None and open_lane.kind == kind:
            if entity_id is None or entity_id == open_lane.entity_id:
                return open_lane
        return None

    def _open(self, kind: LaneKind, lane: str | None, entity_id: str, fields: Event) -> list[Event]:
        out = self.close_lane(lane)
        self.lanes[lane] = Lane(kind, entity_id, fields)
        return out

    def _text(self, chunk: Event) -> list[Event]:
        mid, tag = chunk.get("messageId"), chunk.get("subagentRunId")
        lane = self._resolve_lane("text", mid, tag)
        cont = self._continuation("text", mid, lane)
        out: list[Event] = []
        if cont is not None:
            for field in ("role", "name"):
                _require_agreement(cont, field, chunk.get(field))
            fields = cont.fields
        else:
            if mid is None:
                raise ChunkError("first TEXT_MESSAGE_CHUNK must have a messageId")
            role = chunk.get("role")
            fields = {"messageId": mid, "role": "assistant" if role is None else role}
            _copy_present(chunk, fields, ("name", "subagentRunId"))
            out = self._open("text", lane, mid, fields)
            out.append(_with_metadata({"type": "TEXT_MESSAGE_START", **fields}, chunk))
        out.extend(_body(chunk, "TEXT_MESSAGE_CONTENT", "messageId", fields, bool(out)))
        return out

    def _tool(self, chunk: Event) -> list[Event]:
        tcid, tag = chunk.get("toolCallId"), chunk.get("subagentRunId")
        lane = self._resolve_lane("tool", tcid, tag)
        cont = self._continuation("tool", tcid, lane)
        out: list[Event] = []
        if cont is not None:
            for field in ("toolCallName", "parentMessageId"):
                _require_agreement(cont, field, chunk.get(field))
            fields = cont.fields
        else:
            name = chunk.get("toolCallName")
            if tcid is None:
                raise ChunkError("first TOOL_CALL_CHUNK must have a toolCallId")
            if name is None:
                raise ChunkError("first TOOL_CALL_CHUNK must have a toolCallName")
            fields = {"toolCallId": tcid, "toolCallName": name}
            _copy_present(chunk, fields, ("parentMessageId", "subagentRunId"))
            out = self._open("tool", lane, tcid, fields)
            out.append(_with_metadata({"type": "TOOL_CALL_START", **fields}, chunk))
        out.extend(_body(chunk, "TOOL_CALL_ARGS", "toolCallId", fields, bool(out)))
        return out

    def _reasoning(self, chunk: Event) -> list[Event]:
        mid, tag = chunk.get("messageId"), chunk.get("subagentRunId")
        lane = self._resolve_lane("reasoning", mid, tag)
        cont = self._continuation("reasoning", mid, lane)
        out: list[Event] = []
        if cont is not None:
            fields = cont.fields
        else:
            if mid is None:
                raise ChunkError("first REASONING_MESSAGE_CHUNK must have a messageId")
            fields = {"messageId": mid}
            _copy_present(chunk, fields, ("subagentRunId",))
            out = self._open("reasoning", lane, mid, fields)
            start = {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}
            _copy_present(fields, start, ("subagentRunId",))
            out.append(_with_metadata(start, chunk))
        out.extend(_body(chunk, "REASONING_MESSAGE_CONTENT", "messageId", fields, bool(out)))
        return out


def expand_chunks(events: Iterable[Event]) -> list[Event]:
    """Expand a whole stream of events; lanes still open at the end stay open, as on the client."""
    expander = ChunkExpander()
    return [out for event in events for out in expander.expand(event)]


def _require_agreement(lane: Lane, field: str, incoming: Any) -> None:
    # A continuation may repeat an opener's field, but only with the same value.
    if incoming is not None and incoming != lane.fields.get(field):
        raise ChunkError(f"chunk {field} {incoming!r} disagrees with open {lane.entity_id!r}")


def _copy_present(src: Event, dst: Event, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = src.get(key)
        if value is not None:
            dst[key] = value


def _with_metadata(event: Event, chunk: Event) -> Event:
    if chunk.get("metadata") is not None:
        event["metadata"] = chunk["metadata"]
    return event


def _body(chunk: Event, etype: str, id_field: str, fields: Event, opened: bool) -> list[Event]:
    """The content/args event a chunk carries, if any (a delta, a raw payload or bare metadata)."""
    delta, raw, metadata = chunk.get("delta"), chunk.get("rawEvent"), chunk.get("metadata")
    carries_body = delta is not None or raw is not None
    # A metadata-only continuation still yields a zero-delta event so the metadata lands.
    if not carries_body and (opened or metadata is None):
        return []
    event: Event = {"type": etype, id_field: fields[id_field], "delta": delta or ""}
    tag = chunk.get("subagentRunId")
    owner = tag if tag is not None else fields.get("subagentRunId")
    if owner is not None:
        event["subagentRunId"] = owner
    if metadata is not None:
        event["metadata"] = metadata
    if raw is not None:
        event["rawEvent"] = raw
    return [event]
