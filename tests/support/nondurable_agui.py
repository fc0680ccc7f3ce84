"""A plain, non-durable AG-UI server, as many are: the agent runs inside the request
that asked for it and ends with it; nothing is stored, events carry no id, every
request is a new execution. ``outlast check`` must fail its durability checks, with
evidence (tests/e2e/test_conformance_checker.py).

Run: ``python -m tests.support.nondurable_agui --port P``; prints ``serving on URL``.
It reads the demo agent's knobs (``forwardedProps.demo``: steps, step_delay_ms,
tokens_per_message, token_delay_ms, approve_at), so the checker's defaults drive both;
``forwardedProps.broken: true`` makes its stream invalid AG-UI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

WORDS = "the agent does its work here while the client is connected and not otherwise".split()


def sse(event: dict[str, Any]) -> str:
    return f"data: {json.dumps({**event, 'timestamp': int(time.time() * 1000)})}\n\n"


async def say(text: str, tokens: int, delay: float) -> AsyncIterator[str]:
    mid = f"msg-{uuid.uuid4().hex[:12]}"
    yield sse({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
    words = text.split()
    words += [WORDS[i % len(WORDS)] for i in range(max(0, tokens - len(words)))]
    for i, w in enumerate(words):
        yield sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                   "delta": w if i == 0 else " " + w})
        await asyncio.sleep(delay)
    yield sse({"type": "TEXT_MESSAGE_END", "messageId": mid})


async def call(name: str, args: dict[str, Any]) -> AsyncIterator[str]:
    cid = f"call-{uuid.uuid4().hex[:12]}"
    yield sse({"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name})
    yield sse({"type": "TOOL_CALL_ARGS", "toolCallId": cid, "delta": json.dumps(args)})
    yield sse({"type": "TOOL_CALL_END", "toolCallId": cid})
    yield cid


async def agent(body: dict[str, Any]) -> AsyncIterator[str]:
    """The whole run, inside the response: a dropped client ends it."""
    thread, run = body.get("threadId", "t"), body.get("runId", "r")
    props = body.get("forwardedProps") or {}
    knobs = props.get("demo") if isinstance(props, dict) else None
    knobs = knobs if isinstance(knobs, dict) else {}
    steps = int(knobs.get("steps", 3))
    step_delay = int(knobs.get("step_delay_ms", 300)) / 1000
    tokens = int(knobs.get("tokens_per_message", 6))
    delay = int(knobs.get("token_delay_ms", 30)) / 1000
    approve_at = knobs.get("approve_at") or []
    yield sse({"type": "RUN_STARTED", "threadId": thread, "runId": run})
    if isinstance(props, dict) and props.get("broken"):
        # Not AG-UI: content for a message that was never started.
        yield sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "never-started",
                   "delta": "orphan"})
    if body.get("resume"):
        for entry in body["resume"]:
            yield sse({"type": "TOOL_CALL_RESULT", "messageId": f"res-{uuid.uuid4().hex[:8]}",
                       "toolCallId": str(entry.get("interruptId", "")).removeprefix("approve-"),
                       "role": "tool", "content": "done after approval"})
        async for f in say("Approved and done.", tokens, delay):
            yield f
    elif not body.get("messages"):
        async for f in say("Hello, what shall I do?", tokens, delay):
            yield f
    else:
        async for f in say(f"Plan: I will work through {steps} steps.", tokens, delay):
            yield f
        for step in range(1, steps + 1):
            async for f in say(f"Step {step}.", tokens, delay):
                yield f
            cid = ""
            async for f in call("work", {"step": step}):
                if f.startswith("call-"):
                    cid = f
                else:
                    yield f
            if step in approve_at:
                yield sse({"type": "RUN_FINISHED", "threadId": thread, "runId": run,
                           "outcome": {"type": "interrupt", "interrupts": [
                               {"id": f"approve-{cid}", "reason": "tool_call",
                                "toolCallId": cid, "message": "Approve?"}]}})
                return
            await asyncio.sleep(step_delay)
            yield sse({"type": "TOOL_CALL_RESULT", "messageId": f"res-{uuid.uuid4().hex[:8]}",
                       "toolCallId": cid, "role": "tool", "content": f"step {step} done"})
        async for f in say(f"All {steps} steps are done.", tokens, delay):
            yield f
    yield sse({"type": "RUN_FINISHED", "threadId": thread, "runId": run})


async def run_agent(request: Request) -> Response:
    body = await request.json()
    return StreamingResponse(agent(body), media_type="text/event-stream")


app = Starlette(routes=[Route("/agents/demo", run_agent, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    print(f"serving on http://127.0.0.1:{port}/agents/demo", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
