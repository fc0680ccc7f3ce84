"""An OpenAI-compatible chat-completions agent with tool calling.

Works with any server speaking ``POST {base_url}/chat/completions`` with
``stream: true``: a local llama.cpp or vLLM server, Ollama, OpenAI. The tools
are the AG-UI input's tools (front-end tools): when the model calls one, the
run ends with the call pending, and the client answers it in the next run's
messages, as AG-UI prescribes.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from outlast.agent import Agent, AgentError, Capabilities, RunContext
from outlast.agents.sse import sse_data
from outlast.protocol.content import text_of


def to_openai(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AG-UI messages as chat-completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if isinstance(content, list):  # multimodal parts: keep the text
            content = text_of(content)
        if role in ("user", "system", "developer"):
            out.append({"role": "system" if role == "developer" else role,
                        "content": content or ""})
        elif role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": content or None}
            if m.get("toolCalls"):
                item["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["function"]["name"],
                                  "arguments": c["function"].get("arguments") or "{}"}}
                    for c in m["toolCalls"]]
            out.append(item)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m.get("toolCallId"),
                        "content": content if isinstance(content, str) else json.dumps(content)})
    return out


class OpenAIChatAgent(Agent):
    """Streams one chat-completions turn as AG-UI text and tool-call events."""

    capabilities = Capabilities(
        description="OpenAI-compatible chat completions with front-end tool calling",
        supports_resume=True,  # a turn restarts from the last boundary's messages
    )

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 system_prompt: str | None = None, timeout: float = 300.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.system_prompt = system_prompt
        self.timeout = timeout

    async def run(self, ctx: RunContext) -> None:
        messages = to_openai(ctx.messages)
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        tools = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in ctx.input.tools or []]
        if tools:
            body["tools"] = tools
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        text_id: str | None = None
        calls: dict[int, str] = {}
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            try:
                async with client.stream("POST", f"{self.base_url}/chat/completions",
                                         json=body, headers=headers) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        raise AgentError(f"The model server answered {resp.status_code}.",
                                         code="model_error")
                    async for data in sse_data(resp):
                        if data.strip() == "[DONE]":
                            break
                        chunk = json.loads(data)
                        for choice in chunk.get("choices") or ():
                            delta = choice.get("delta") or {}
                            if delta.get("content"):
                                if text_id is None:
                                    text_id = ctx.new_id("msg")
                                    await ctx.emit({"type": "TEXT_MESSAGE_START",
                                                    "messageId": text_id, "role": "assistant"})
                                await ctx.emit({"type": "TEXT_MESSAGE_CONTENT",
                                                "messageId": text_id, "delta": delta["content"]})
                            for call in delta.get("tool_calls") or ():
                                await self._tool_delta(ctx, call, calls, text_id)
            except httpx.HTTPError as exc:
                raise AgentError(f"The model server could not be reached ({type(exc).__name__}).",
                                 code="model_unreachable") from exc
        if text_id is not None:
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text_id})
        for call_id in calls.values():
            await ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call_id})

    async def _tool_delta(self, ctx: RunContext, call: dict[str, Any], calls: dict[int, str],
                          text_id: str | None) -> None:
        index = int(call.get("index", 0))
        fn = call.get("function") or {}
        if index not in calls:
            calls[index] = call.get("id") or ctx.new_id("call")
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": calls[index],
                                     "toolCallName": fn.get("name") or "tool"}
            if text_id is not None:
                start["parentMessageId"] = text_id
            await ctx.emit(start)
        if fn.get("arguments"):
            await ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": calls[index],
                            "delta": fn["arguments"]})


def factory(settings: Any = None) -> OpenAIChatAgent:
    """``--agent chat=outlast.agents.openai:factory``, configured from the environment:
    ``OUTLAST_OPENAI_BASE_URL``, ``OUTLAST_OPENAI_MODEL``, ``OUTLAST_OPENAI_API_KEY``,
    ``OUTLAST_OPENAI_SYSTEM_PROMPT``."""
    base = os.environ.get("OUTLAST_OPENAI_BASE_URL")
    model = os.environ.get("OUTLAST_OPENAI_MODEL")
    if not base or not model:
        raise SystemExit("the chat agent needs OUTLAST_OPENAI_BASE_URL and OUTLAST_OPENAI_MODEL")
    return OpenAIChatAgent(base, model, api_key=os.environ.get("OUTLAST_OPENAI_API_KEY"),
                           system_prompt=os.environ.get("OUTLAST_OPENAI_SYSTEM_PROMPT"))
