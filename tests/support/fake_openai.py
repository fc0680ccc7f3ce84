"""A scripted OpenAI-compatible chat-completions server on loopback, for adapter tests.

It stands in for an external model server (llama.cpp, vLLM, OpenAI). Queue
``Reply`` objects in ``fake.replies`` (one per request, in order); with none queued
it echoes: it calls a front-end tool when asked about the weather and answers a
tool result with text that quotes it. Every request body is kept in
``fake.requests``; ``fake.disconnects`` counts replies the client abandoned.

Tool-call chunks come in two styles: ``"openai"`` (id and name only in a call's
first chunk) and ``"llamacpp"`` (id and name repeated in every chunk).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Call:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None  # a fresh unique id when None


@dataclass
class Reply:
    """One scripted answer to one request."""

    text: str = ""
    calls: list[Call] = field(default_factory=list)
    finish: str | None = None  # default: "tool_calls" with calls, else "stop"
    style: str = "openai"  # or "llamacpp"
    usage: dict[str, int] | None = None
    interleave: bool = False  # parallel calls' argument pieces interleaved by index
    status: int = 200  # an error status answers `error_body` instead of a stream
    error_body: str = ""
    freeze_after: int | None = None  # stop sending (but keep the connection) after n chunks
    cut_after: int | None = None  # drop the connection mid-stream after n chunks
    token_delay: float | None = None  # seconds between chunks (default: the server's)
    reasoning: str = ""  # streamed first as `reasoning_content` deltas (DeepSeek, vLLM)


def _chunk(delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk",
                            "model": "fake", "created": 0, "choices": []}
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """The default answer when nothing is queued."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply(text=f"The tool said: {last.get('content')}")
    text = str(last.get("content") or "")
    if "weather" in text and tools:
        return Reply(text="Let me check.", calls=[
            Call(tools[0]["function"]["name"], {"city": "Paris"}, id="call_w1")])
    return Reply(text=f"You said: {text}")


class FakeOpenAI:
    """Start with ``await fake.start()``; ``fake.url`` is the base URL (ends in /v1)."""

    def __init__(self, token_delay: float = 0.0) -> None:
        self.token_delay = token_delay
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.disconnects = 0
        self.url = ""
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def chunks(self, reply: Reply) -> list[str]:
        """The SSE chunks that stream ``reply``."""
        out = [_chunk({"role": "assistant", "content": ""})]
        out += [_chunk({"reasoning_content": w}) for w in _words(reply.reasoning)] \
            if reply.reasoning else []
        out += [_chunk({"content": w}) for w in _words(reply.text)] if reply.text else []
        pieces: list[list[dict[str, Any]]] = []
        for index, call in enumerate(reply.calls):
            call_id = call.id or f"call_{next(self._ids)}"
            args = json.dumps(call.arguments)
            cut = max(1, len(args) // 2)
            parts = [args[:cut], args[cut:]]
            mine = []
            for n, part in enumerate(parts):
                piece: dict[str, Any] = {"index": index, "function": {"arguments": part}}
                if n == 0 or reply.style == "llamacpp":
                    piece.update(id=call_id, type="function")
                    piece["function"]["name"] = call.name
                mine.append(piece)
            pieces.append(mine)
        if reply.interleave:
            ordered = [p for group in itertools.zip_longest(*pieces) for p in group if p]
        else:
            ordered = [p for group in pieces for p in group]
        out += [_chunk({"tool_calls": [p]}) for p in ordered]
        finish = reply.finish or ("tool_calls" if reply.calls else "stop")
        out.append(_chunk({}, finish))
        if reply.usage is not None:
            out.append(_chunk(None, usage=reply.usage))
        return out

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self.replies.pop(0) if self.replies else \
            echo(body.get("messages") or [], body.get("tools") or [])
        if reply.status != 200:
            return Response(reply.error_body, status_code=reply.status,
                            media_type="application/json")
        chunks = self.chunks(reply)
        if not body.get("stream"):
            return JSONResponse({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                                 "model": "fake",
                                 "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                     "role": "assistant", "content": reply.text}}]})
        delay = self.token_delay if reply.token_delay is None else reply.token_delay

        async def stream() -> AsyncIterator[str]:
            finished = False
            try:
                for n, c in enumerate(chunks):
                    if reply.freeze_after is not None and n >= reply.freeze_after:
                        await asyncio.sleep(3600)
                    if reply.cut_after is not None and n >= reply.cut_after:
                        # The body ends unfinished: the client sees a broken stream.
                        raise ConnectionAbortedError("the model server dropped the stream")
                    if delay:
                        await asyncio.sleep(delay)
                    yield c
                yield "data: [DONE]\n\n"
                finished = True
            finally:
                if not finished:
                    self.disconnects += 1

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
            self._server.force_exit = True
            await self._task
