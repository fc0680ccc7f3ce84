"""A paced OpenAI-compatible chat-completions server for ``bench.hosts``: every request
is answered with a stream of ``--tokens`` content chunks at ``--rate`` tokens/s on an
absolute schedule, each token its own send time (``@<unix time>+0``, the stamp the
load client reads: ``bench.loadclient``), streamed as OpenAI does (a role chunk, the
content chunks, a finish chunk with usage, ``[DONE]``).

    python -m bench.model_server --rate 50 --tokens 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import time
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from bench.common import READY


def chunk(delta: dict[str, object] | None, finish: str | None = None,
          usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, object] = {"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                               "model": "bench", "created": 0, "choices": []}
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def app(rate: float, tokens: int) -> Starlette:
    async def completions(request: Request) -> StreamingResponse:
        await request.body()

        async def stream() -> AsyncIterator[bytes]:
            start = time.monotonic()
            yield chunk({"role": "assistant", "content": ""})
            for i in range(tokens):
                delay = start + (i + 1) / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                yield chunk({"content": f"@{time.time():.6f}+0"})
            yield chunk({}, "stop")
            yield chunk(None, usage={"prompt_tokens": 10, "completion_tokens": tokens,
                                     "total_tokens": 10 + tokens})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                             Route("/chat/completions", completions, methods=["POST"])])


def serve(asgi: object, announce: str = "") -> None:
    """Serve ``asgi`` on a free loopback port (``$OUTLAST_BENCH_PORT`` when set) and print
    bench.common's READY line."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # $OUTLAST_BENCH_PORT: a given port (a restarted server comes back where it was).
    sock.bind(("127.0.0.1", int(os.environ.get("OUTLAST_BENCH_PORT", "0"))))
    port = sock.getsockname()[1]

    class Ready(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            print(f"{READY}http://127.0.0.1:{port}{announce}", flush=True)

    server = Ready(uvicorn.Config(asgi, log_level="warning", access_log=False,  # type: ignore[arg-type]
                                  backlog=2048))
    server.run(sockets=[sock])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--tokens", type=int, default=100)
    ns = p.parse_args()
    serve(app(ns.rate, ns.tokens), "/v1")


if __name__ == "__main__":
    main()
