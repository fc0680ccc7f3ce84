"""The message list a ThreadFold folds into, with the indexes and change tracking it needs."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]


def tool_calls(message: Message) -> list[dict[str, Any]]:
    """A message's tool calls ([] when it has none)."""
    calls = message.get("toolCalls")
    return calls if isinstance(calls, list) else []


def unanswered_tool_calls(messages: list[Message]) -> list[str]:
    """Ids of the tool calls of assistant messages that no tool message answers."""
    answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
    return [call["id"] for m in messages if m.get("role") == "assistant"
            for call in tool_calls(m) if call.get("id") not in answered]


class MessageIndex:
    """Messages in order, indexed the way the client's reducer looks them up.

    The client scans the list (``messages.find``) per event; these indexes answer the same
    questions in O(1): the *first* message with an id, the *first* message holding a tool
    call, each message's position. Changed messages are tracked by identity for saving.
    """

    __slots__ = (
        "_answered",
        "_by_id",
        "_calls",
        "_dirty",
        "_messages",
        "_pos",
        "_removed",
        "_reordered",
        "_text",
        "_unanswered",
    )

    def __init__(self, messages: list[Message]) -> None:
        self._messages = messages
        # Streamed text of messages being written, joined when someone reads the messages:
        # appending to a str in the message dict copies it every time (quadratic in a
        # long message's length), a list of parts does not.
        self._text: dict[int, tuple[dict[str, Any], str, list[str]]] = {}
        self._dirty: dict[int, Message] = {}  # id(message) -> message, changed since last take
        self._removed: set[str] = set()
        self._reordered = False
        self._by_id: dict[str, Message] = {}
        self._pos: dict[int, int] = {}  # id(message) -> index in messages
        self._calls: dict[str, tuple[Message, dict[str, Any]]] = {}  # first holder, call
        self._answered: set[str] = set()  # toolCallIds that have a tool message
        self._unanswered: set[str] = set()  # tool calls in assistant messages lacking one
        self._reindex()

    @property
    def messages(self) -> list[Message]:
        """The messages in order, with all streamed text joined in."""
        if self._text:
            self._join_text()
        return self._messages

    def holds_message(self, mid: Any) -> bool:
        """True if the thread has a message with id ``mid`` (cheaper than ``message``)."""
        return mid in self._by_id

    def message(self, mid: Any) -> Message | None:
        """The first message with id ``mid``, with all streamed text joined in."""
        if self._text:
            self._join_text()
        return self._by_id.get(mid)

    def _add_text(self, target: dict[str, Any], field: str, delta: str) -> None:
        """Append streamed text to ``target[field]`` (a message's content, a tool call's
        arguments); joined in on the next read of the messages."""
        pending = self._text.get(id(target))
        if pending is None:
            value = target.get(field)
            pending = self._text[id(target)] = (
                target, field, [value if type(value) is str else ""])
        pending[2].append(delta)

    def _join_text(self) -> None:
        for target, field, parts in self._text.values():
            target[field] = "".join(parts)
        self._text = {}

    def _reindex(self) -> None:
        """Rebuild every index from ``messages`` (after wholesale changes only)."""
        self._by_id = {}
        self._pos = {}
        for index, message in enumerate(self.messages):
            self._pos[id(message)] = index
            self._by_id.setdefault(message.get("id"), message)  # type: ignore[arg-type]
        self._reindex_tool_calls()

    def _reindex_tool_calls(self) -> None:
        self._calls = {}
        self._answered = set()
        for message in self.messages:
            self._index_calls(message)
        self._unanswered = set()
        for message in self.messages:
            self._track_answers(message)

    def _index_calls(self, message: Message) -> None:
        if message.get("role") == "tool" and "toolCallId" in message:
            self._answered.add(message["toolCallId"])
        for call in tool_calls(message):
            self._calls.setdefault(call.get("id"), (message, call))  # type: ignore[arg-type]

    def _track_answers(self, message: Message) -> None:
        if message.get("role") == "tool" and "toolCallId" in message:
            self._unanswered.discard(message["toolCallId"])
        elif message.get("role") == "assistant":
            for call in tool_calls(message):
                if call.get("id") not in self._answered:
                    self._unanswered.add(call.get("id"))  # type: ignore[arg-type]

    def _touch(self, message: Message) -> None:
        self._dirty[id(message)] = message

    def _append(self, message: Message) -> None:
        self._pos[id(message)] = len(self.messages)
        self.messages.append(message)
        self._by_id.setdefault(message["id"], message)
        self._index_calls(message)
        self._track_answers(message)
        self._dirty[id(message)] = message

    def _insert(self, index: int, message: Message) -> None:
        messages = self.messages
        if index == len(messages):
            self._append(message)
            return
        messages.insert(index, message)
        pos = self._pos
        for i in range(index, len(messages)):
            pos[id(messages[i])] = i
        first = self._by_id.get(message["id"])
        if first is None or pos[id(first)] > index:
            self._by_id[message["id"]] = message
        if tool_calls(message):  # an inserted message holding calls: rebuild to stay exact
            self._reindex_tool_calls()
        else:
            self._index_calls(message)
            self._track_answers(message)
        self._dirty[id(message)] = message
        self._reordered = True

    def _replace(self, message: Message, replacement: Message) -> None:
        """Replace a message's content in place (the client swaps the object; same result)."""
        if self._text:
            self._join_text()
        structural = bool(tool_calls(message)) or message.get("role") in ("tool", "assistant")
        message.clear()
        message.update(replacement)
        if structural:
            self._reindex_tool_calls()
        self._dirty[id(message)] = message

    def _replace_all(self, messages: list[Message], removed: set[str], reordered: bool) -> None:
        """Install a rebuilt list; new objects in it must already be marked dirty."""
        if self._text:
            self._join_text()
        self._text = {}
        self._messages = messages
        self._removed |= removed
        self._reordered = self._reordered or reordered
        self._reindex()

    def _assistant_holding(self, tcid: str) -> Message | None:
        # TOOL_CALL_RESULT and REASONING_ENCRYPTED_VALUE look for the first *assistant*
        # message holding the call; the index holds the first holder of any role.
        hit = self._calls.get(tcid)
        if hit is None:
            return None
        if hit[0].get("role") == "assistant":
            return hit[0]
        for message in self.messages:
            if message.get("role") == "assistant" and any(
                c.get("id") == tcid for c in tool_calls(message)
            ):
                return message
        return None

    def _take_message_changes(self) -> tuple[list[tuple[int, Message]], list[str], bool]:
        """(upserts, removed ids, reordered) since the last take; O(changed)."""
        pos, messages = self._pos, self.messages
        upserts = []
        for key, message in self._dirty.items():
            index = pos.get(key)
            if index is not None and messages[index] is message:  # still in the list
                upserts.append((index, message))
        if len(upserts) > 1:
            upserts.sort(key=lambda item: item[0])
        removed: list[str] = []
        if self._removed:
            removed = sorted(i for i in self._removed if i not in self._by_id)
            self._removed = set()
        reordered = self._reordered
        self._dirty = {}
        self._reordered = False
        return upserts, removed, reordered

    def _copy_tracking_to(self, other: MessageIndex) -> None:
        """Carry untaken changes over to `other`, a deep copy of this list."""
        for key, message in self._dirty.items():
            index = self._pos.get(key)
            if index is not None and self.messages[index] is message:
                other._touch(other.messages[index])
        other._removed = set(self._removed)
        other._reordered = self._reordered
