"""ADK's events as AG-UI events on the run: text, tool calls and results (ADK's
``{"result": ...}`` wrapper taken off, its stand-in for a call awaiting a person never
shown), usage, each boundary noted, and the interrupt for each confirmation request."""

from __future__ import annotations

import json
from typing import Any

from outlast.agent import RunContext
from outlast.agents import calls
from outlast.agents.adk.session import CONFIRM
from outlast.agents.resume import answer_placeholder

APPROVAL_KIND = "adk_confirmation"


def result_text(response: Any) -> str:
    """A function response as the thread shows it: ADK's ``{"result": value}`` wrapper of
    a plain value taken off, anything else as JSON."""
    if isinstance(response, dict) and set(response) == {"result"}:
        response = response["result"]
    return calls.result_text(response)


def approval(call: Any) -> dict[str, Any]:
    """The interrupt that asks a person about one ``adk_request_confirmation`` call."""
    original = (call.args or {}).get("originalFunctionCall") or {}
    name, args = str(original.get("name") or "tool"), original.get("args") or {}
    hint = ((call.args or {}).get("toolConfirmation") or {}).get("hint")
    return calls.approval(str(original.get("id")), name, args, APPROVAL_KIND,
                          confirmationId=call.id, hint=hint)


# ADK's usage metadata fields, and AG-UI 1.0 TokenUsage's.
_USAGE = {"prompt_token_count": "inputTokens", "candidates_token_count": "outputTokens",
          "total_token_count": "totalTokens", "thoughts_token_count": "reasoningTokens",
          "cached_content_token_count": "cachedInputTokens"}


class Relay:
    """Turns ADK's events into AG-UI events on the run, noting each boundary."""

    def __init__(self, ctx: RunContext, store: dict[str, Any]) -> None:
        self.ctx = ctx
        self.store = store
        self.reply: str | None = None  # the model response under way (ADK's event id)
        self.text: str | None = None  # the open text message
        self.parent: str | None = None  # this response's text message
        self.calls: list[str] = []  # tool calls open (started, not ended)
        self.unanswered: set[str] = set()
        self.confirmations: list[Any] = []  # ADK's confirmation requests

    def settle(self) -> None:
        """The session holds everything the thread does (a new reply starts, or the run
        ends): what a crash resume restarts from, and what a later run does not add."""
        self.store["run"] = self.ctx.run_id
        self.store["ids"] = [m["id"] for m in self.ctx.messages if m.get("id")]

    async def send(self, event: Any) -> None:
        content = event.content
        parts = list(content.parts or ()) if content is not None else []
        if content is not None and content.role == "model":
            if event.id != self.reply:
                await self._close_text()
                self.reply, self.parent = event.id, None
                if not self.unanswered:
                    self.settle()  # set before the opener: its snapshot is saved first
            if event.partial:
                await self._partial(parts)
            else:
                await self._whole(event, parts)
        for part in parts:
            response = part.function_response
            if response is not None and response.id and response.name != CONFIRM:
                await self._result(event, response)

    async def _partial(self, parts: list[Any]) -> None:
        for part in parts:
            if part.text and not part.thought:
                await self._open_text()
                await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                     "delta": part.text})
            elif part.function_call is not None and part.function_call.id:
                await self._start_call(part.function_call)

    async def _whole(self, event: Any, parts: list[Any]) -> None:
        """The final event of a model response: what the stream did not show, shown."""
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if text and self.parent is None:  # a response that was not streamed
            await self._open_text()
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": text})
        await self._close_text()
        for part in parts:
            call = part.function_call
            if call is None or not call.id:
                continue
            if call.name == CONFIRM:
                self.confirmations.append(call)
                continue
            await self._start_call(call)
            if call.id in self.calls:
                self.calls.remove(call.id)
                await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call.id,
                                     "delta": json.dumps(call.args or {}, ensure_ascii=False)})
                await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call.id})
        usage = event.usage_metadata
        counts = {wire: value for key, wire in _USAGE.items()
                  if isinstance(value := getattr(usage, key, None), int) and value > 0}
        if counts:
            self.ctx.record_usage(counts)

    async def _start_call(self, call: Any) -> None:
        if call.id in self.calls or call.id in self.unanswered:
            return
        await self._close_text()
        start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": call.id,
                                 "toolCallName": call.name or "tool"}
        if self.parent is not None:
            start["parentMessageId"] = self.parent
        await self.ctx.emit(start)
        self.calls.append(call.id)
        self.unanswered.add(call.id)

    async def _result(self, event: Any, response: Any) -> None:
        call = str(response.id)
        if call in (event.actions.requested_tool_confirmations or {}):
            return  # ADK's stand-in while a person decides: the real result comes later
        if call in self.calls:
            self.calls.remove(call)
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.unanswered.discard(call)
        content = result_text(response.response)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("result"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def _open_text(self) -> None:
        if self.text is None:
            self.text = self.parent = str(self.reply or self.ctx.new_id("msg"))
            await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                 "role": "assistant"})

    async def _close_text(self) -> None:
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})

    async def close(self) -> None:
        await self._close_text()
        for call in self.calls:
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.calls = []
