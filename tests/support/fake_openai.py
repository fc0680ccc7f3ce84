"""A scripted OpenAI-compatible chat-completions server on loopback, for adapter tests.

It stands in for an external model server (llama.cpp, vLLM, OpenAI): it streams
text token by token, calls a front-end tool when asked about the weather, and
answers a tool result with text that quotes it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake", "created": 0,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"


def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[str]:
    """The chunks the fake model answers with."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        words = f"The tool said: {last.get('content')}".split(" ")
        return [_chunk({"role": "assistant", "content": ""})] + [
            _chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)
        ] + [_chunk({}, "stop")]
    text = str(last.get("content") or "")
    if "weather" in text and tools:
        name = tools[0]["function"]["name"]
        return [
            _chunk({"role": "assistant", "content": "Let me check."}),
            _chunk({"tool_calls": [{"index": 0, "id": "call_w1", "type": "function",
                                    "function": {"name": name, "arguments": '{"city":'}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
            _chunk({}, "tool_calls"),
        ]
    words = f"You said: {text}".split(" ")
    return [_chunk({"role": "assistant", "content": ""})] + [
        _chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)
    ] + [_chunk({}, "stop")]


class FakeOpenAI:
    """Start with ``await fake.start()``; ``fake.url`` is the base URL (ends in /v1)."""

    def __init__(self, token_delay: float = 0.0) -> None:
        self.token_delay = token_delay
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def _completions(self, request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        self.requests.append(body)
        chunks = script(body.get("messages") or [], body.get("tools") or [])
        if not body.get("stream"):
            text = "".join(json.loads(c[6:])["choices"][0]["delta"].get("content") or ""
                           for c in chunks)
            return JSONResponse({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                                 "model": "fake",
                                 "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                     "role": "assistant", "content": text}}]})

        async def stream() -> AsyncIterator[str]:
            for c in chunks:
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
                yield c
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def start(self) -> FakeOpenAI:
        app = Starlette(routes=[Route("/v1/chat/completions", self._completions,
                                      methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 - uvicorn has only this flag
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
