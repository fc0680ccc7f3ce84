"""Strands' stream as AG-UI events on the run, and AG-UI messages as Strands messages;
the Strands state noted in ``session_state`` at each boundary."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python
from strands.types.session import encode_bytes_values

from outlast.agent import RunContext
from outlast.agents.resume import answer_placeholder, call_args, finished, note_settled
from outlast.protocol.content import text_of

SESSION_KEY = "strands"  # the host's key in the thread's session_state


def result_text(result: Any) -> str:
    """A Strands ``ToolResult``'s content as the text a tool message carries."""
    parts = []
    for block in result.get("content") or ():
        if "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(json.dumps(block["json"]))
    return "".join(parts)


def to_strands(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI messages as Strands messages (text, tool uses, tool results), messages of
    the same role merged (Strands alternates user and assistant); unfinished replies are
    not sent back to the model."""
    out: list[dict[str, Any]] = []
    for m in finished(messages):
        role = m.get("role")
        if role in ("user", "system", "developer"):
            text = text_of(m.get("content"))
            blocks: list[dict[str, Any]] = [{"text": text}] if text else []
            role = "user"
        elif role == "assistant":
            text = text_of(m.get("content"))
            blocks = [{"text": text}] if text else []
            blocks += [{"toolUse": {"toolUseId": c["id"], "name": c["function"]["name"],
                                    "input": call_args(c)}} for c in m.get("toolCalls") or ()]
        elif role == "tool" and m.get("toolCallId"):
            role, blocks = "user", [{"toolResult": {
                "toolUseId": m["toolCallId"], "status": "success",
                "content": [{"text": text_of(m.get("content"))}]}}]
        else:
            continue
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return out


def append(agent: Any, messages: list[dict[str, Any]]) -> None:
    """Add ``messages`` to the agent's conversation, merging a first one of the same role
    as its last."""
    for message in messages:
        last = agent.messages[-1] if agent.messages else None
        if last is not None and last["role"] == message["role"]:
            agent.messages[-1] = {**last, "content": [*last["content"], *message["content"]]}
        else:
            agent.messages.append(message)


class Relay:
    """Turns the Strands stream into AG-UI events on the run, and notes the Strands
    state at each boundary."""

    def __init__(self, ctx: RunContext, agent: Any) -> None:
        self.ctx = ctx
        self.agent = agent
        self.text: str | None = None  # the open text message
        self.reply: str | None = None  # the reply's text message, parent of its calls
        self.reasoning: str | None = None
        self.call: str | None = None  # the open tool call
        self.waiting: set[Any] = set()  # thread messages the Strands state does not hold
        self.done: set[Any] = set()  # calls the thread holds a result of

    def boundary(self) -> None:
        """Note the Strands state as it is now: a crash resume restarts from it (G5, G8).
        Called before a reply's first opener, as the snapshot is saved just before it."""
        snapshot = self.agent.take_snapshot(preset="session").to_dict()
        note_settled(
            self.ctx, SESSION_KEY,
            held=[m.get("id") for m in self.ctx.messages if m.get("id") not in self.waiting],
            snapshot=encode_bytes_values(to_jsonable_python(snapshot, fallback=str)))

    async def send(self, event: dict[str, Any]) -> None:
        if "event" in event:
            await self._raw(event["event"])
        elif isinstance(event.get("message"), dict):
            for block in event["message"].get("content") or ():
                if "toolResult" in block:
                    await self._result(block["toolResult"])

    async def _raw(self, raw: dict[str, Any]) -> None:
        if "messageStart" in raw:
            await self.close()
            self.reply = None
            self.boundary()
        elif "contentBlockStart" in raw:
            use = (raw["contentBlockStart"].get("start") or {}).get("toolUse")
            if use:
                await self.close()
                self.call = str(use["toolUseId"])
                start = {"type": "TOOL_CALL_START", "toolCallId": self.call,
                         "toolCallName": use["name"]}
                if self.reply is not None:
                    start["parentMessageId"] = self.reply
                await self.ctx.emit(start)
        elif "contentBlockDelta" in raw:
            await self._delta(raw["contentBlockDelta"].get("delta") or {})
        elif "contentBlockStop" in raw:
            await self.close()
        elif "messageStop" in raw:
            await self.close()
        elif "metadata" in raw:
            self._usage(raw["metadata"].get("usage") or {})

    async def _delta(self, delta: dict[str, Any]) -> None:
        if delta.get("text"):
            if self.text is None:
                self.text = self.reply = self.ctx.new_id("msg")
                await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                     "role": "assistant"})
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": delta["text"]})
        elif (delta.get("toolUse") or {}).get("input") and self.call is not None:
            await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": self.call,
                                 "delta": delta["toolUse"]["input"]})
        elif (delta.get("reasoningContent") or {}).get("text"):
            if self.reasoning is None:
                self.reasoning = self.ctx.new_id("reasoning")
                await self.ctx.emit({"type": "REASONING_START", "messageId": self.reasoning})
                await self.ctx.emit({"type": "REASONING_MESSAGE_START",
                                     "messageId": self.reasoning, "role": "reasoning"})
            await self.ctx.emit({"type": "REASONING_MESSAGE_CONTENT",
                                 "messageId": self.reasoning,
                                 "delta": delta["reasoningContent"]["text"]})

    def _usage(self, usage: dict[str, Any]) -> None:
        counts = {wire: usage.get(key) for key, wire in (
            ("inputTokens", "inputTokens"), ("outputTokens", "outputTokens"),
            ("totalTokens", "totalTokens"), ("cacheReadInputTokens", "cachedInputTokens"),
            ("cacheWriteInputTokens", "cacheWriteInputTokens"))}
        counts = {k: v for k, v in counts.items() if isinstance(v, int) and v > 0}
        if counts:
            model = (getattr(self.agent.model, "config", None) or {}).get("model_id")
            self.ctx.record_usage({**counts, **({"model": model} if isinstance(
                model, str) and model else {})})

    async def _result(self, result: dict[str, Any]) -> None:
        call, content = str(result.get("toolUseId")), result_text(result)
        if call in self.done:
            return  # run again after a crash, its result recorded and shown before
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("result"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def close(self) -> None:
        """Close every construct the reply under way opened."""
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})
        if self.reasoning is not None:
            rid, self.reasoning = self.reasoning, None
            await self.ctx.emit({"type": "REASONING_MESSAGE_END", "messageId": rid})
            await self.ctx.emit({"type": "REASONING_END", "messageId": rid})
        if self.call is not None:
            call, self.call = self.call, None
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
