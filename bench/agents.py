"""The benchmark agent: emits a fixed number of AG-UI events as fast as it can.

The event mix looks like a tool-using chat agent: a streamed text message, a tool
call with its result, a state delta, repeated. That gives the durable path real
work at every boundary (a lazy snapshot save) without any sleeping.

Knobs in ``forwardedProps.bench``: ``events`` (how many the agent emits; the engine
adds ``RUN_STARTED`` and the final event), ``tokens`` (content events per text
message), ``yield_every`` (hand the loop back every N events, as an agent reading a
model's stream does at each chunk; 0 never yields).

Register it on a real server with ``outlast serve --agent bench=bench.agents:factory``
(with the repository root on ``PYTHONPATH``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from outlast.agent import Agent, Capabilities, RunContext
from outlast.config import Settings


def knobs(props: Any) -> tuple[int, int, int]:
    """``(events, tokens, yield_every)`` from ``forwardedProps.bench``."""
    raw = props.get("bench") if isinstance(props, dict) else None
    raw = raw if isinstance(raw, dict) else {}
    return int(raw.get("events", 1000)), int(raw.get("tokens", 20)), \
        int(raw.get("yield_every", 1))


def bench_input(thread_id: str, run_id: str, events: int, *, tokens: int = 20,
                yield_every: int = 1) -> dict[str, Any]:
    """A RunAgentInput for the bench agent."""
    return {
        "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
        "messages": [{"id": f"user-{run_id}", "role": "user", "content": "go"}],
        "state": {}, "tools": [], "context": [],
        "forwardedProps": {"bench": {"events": events, "tokens": tokens,
                                     "yield_every": yield_every}},
    }


async def emit_events(ctx: Any, events: int, tokens: int, yield_every: int) -> int:
    """Emit about ``events`` events through ``ctx.emit`` (whole cycles: every message
    and tool call is closed at the end). Returns how many were emitted."""
    n = 0
    cycle = 0

    async def emit(event: dict[str, Any]) -> None:
        nonlocal n
        await ctx.emit(event)
        n += 1
        if yield_every and n % yield_every == 0:
            await asyncio.sleep(0)

    while n < events:
        cycle += 1
        mid = f"msg_{ctx.run_id}_{cycle}"
        await emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        for i in range(tokens):
            await emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                        "delta": f" token{i} of message {cycle}"})
        await emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        call = f"call_{ctx.run_id}_{cycle}"
        await emit({"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "lookup",
                    "parentMessageId": mid})
        await emit({"type": "TOOL_CALL_ARGS", "toolCallId": call,
                    "delta": f'{{"query": "item {cycle}", "limit": 10}}'})
        await emit({"type": "TOOL_CALL_END", "toolCallId": call})
        await emit({"type": "TOOL_CALL_RESULT", "messageId": f"result_{call}",
                    "toolCallId": call, "role": "tool",
                    "content": f"found 10 items for item {cycle}"})
        await emit({"type": "STATE_DELTA", "delta": [
            {"op": "replace", "path": "/progress", "value": cycle}]})
    return n


class BenchAgent(Agent):
    """Emits ``forwardedProps.bench.events`` events without waiting for anything."""

    capabilities = Capabilities(description="Benchmark load: emits events as fast as it can.")

    async def run(self, ctx: RunContext) -> None:
        events, tokens, yield_every = knobs(ctx.forwarded_props)
        await ctx.emit({"type": "STATE_SNAPSHOT", "snapshot": {"progress": 0}})
        await emit_events(ctx, events - 1, tokens, yield_every)


def factory(settings: Settings | None = None) -> BenchAgent:
    """``--agent bench=bench.agents:factory``."""
    return BenchAgent()


# -- paced load: many runs at a model's pace, each event stamped with its emit time ----

STAMP = '"delta":"@'  # how a stamped delta starts in the event's compact JSON


def paced_input(thread_id: str, run_id: str, events: int, *, rate: float = 30.0,
                tokens: int = 20, yield_every: int = 1, history: int = 0) -> dict[str, Any]:
    """A RunAgentInput for the paced agent: ``events`` events at ``rate`` per second
    (0: as fast as it can, handing the loop back every ``yield_every`` events), after a
    resent history of ``history`` messages (``resent_history``)."""
    return {
        "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
        "messages": [*resent_history(run_id, history),
                     {"id": f"user-{run_id}", "role": "user", "content": "go"}],
        "state": {}, "tools": [], "context": [],
        "forwardedProps": {"paced": {"events": events, "rate": rate, "tokens": tokens,
                                     "yield_every": yield_every}},
    }


def resent_history(run_id: str, count: int) -> list[dict[str, Any]]:
    """A conversation as a front end resends it: questions, tool calls, their results."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        if i % 3 == 0:
            out.append({"id": f"u{i}-{run_id}", "role": "user",
                        "content": "How is the repository laid out, and where are its tests? "
                                   * 8})
        elif i % 3 == 1:
            out.append({"id": f"a{i}-{run_id}", "role": "assistant", "toolCalls": [
                {"id": f"c{i}-{run_id}", "type": "function", "function": {
                    "name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})}}]})
        else:
            out.append({"id": f"t{i}-{run_id}", "role": "tool", "toolCallId": f"c{i - 1}-{run_id}",
                        "content": "def handler(request):\n    return respond(request)\n" * 20})
    return out


def stamp(scheduled: float) -> str:
    """The delta of a stamped content event: ``@<emit time, s, µs digits>+<lag µs>``,
    where the lag is how late the agent emits it against its schedule (the model's
    pace); the client parses it from the frame's bytes without decoding the JSON."""
    now = time.time()
    return f"@{now:.6f}+{max(0, int((now - scheduled) * 1e6))}"


class PacedAgent(Agent):
    """Emits ``forwardedProps.paced.events`` events at ``rate`` events/s, each content
    delta stamped with its emit time (``stamp``); the shape of ``BenchAgent``'s cycle
    (a streamed message, a tool call with its result, a state delta).

    The pace follows an absolute schedule, as a model's stream does: an agent woken
    late (a busy event loop) emits what is due at once instead of slowing down."""

    capabilities = Capabilities(description="Benchmark load: emits stamped events at a pace.")

    async def run(self, ctx: RunContext) -> None:
        raw = ctx.forwarded_props.get("paced") if isinstance(ctx.forwarded_props, dict) \
            else None
        k: dict[str, Any] = raw if isinstance(raw, dict) else {}
        events, rate = int(k.get("events", 300)), float(k.get("rate", 30.0))
        tokens, yield_every = int(k.get("tokens", 20)), int(k.get("yield_every", 1))
        interval = 1.0 / rate if rate > 0 else 0.0
        start = time.time()
        n = 0

        async def emit(event: dict[str, Any]) -> None:
            nonlocal n
            await ctx.emit(event)
            n += 1
            if interval:
                due = start + n * interval
                delay = due - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif yield_every and n % yield_every == 0:
                await asyncio.sleep(0)

        def due() -> float:
            return start + n * interval if interval else time.time()

        await emit({"type": "STATE_SNAPSHOT", "snapshot": {"progress": 0}})
        cycle = 0
        while n < events:
            cycle += 1
            mid = f"msg_{ctx.run_id}_{cycle}"
            await emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            for _ in range(tokens):
                await emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                            "delta": stamp(due())})
            await emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
            call = f"call_{ctx.run_id}_{cycle}"
            await emit({"type": "TOOL_CALL_START", "toolCallId": call,
                        "toolCallName": "lookup", "parentMessageId": mid})
            await emit({"type": "TOOL_CALL_ARGS", "toolCallId": call,
                        "delta": f'{{"query": "item {cycle}", "limit": 10}}'})
            await emit({"type": "TOOL_CALL_END", "toolCallId": call})
            await emit({"type": "TOOL_CALL_RESULT", "messageId": f"result_{call}",
                        "toolCallId": call, "role": "tool",
                        "content": f"found 10 items for item {cycle}"})
            await emit({"type": "STATE_DELTA", "delta": [
                {"op": "replace", "path": "/progress", "value": cycle}]})


def paced_factory(settings: Settings | None = None) -> PacedAgent:
    """``--agent paced=bench.agents:paced_factory``."""
    return PacedAgent()


# -- one long text message: reattach inside a construct that is open for a long time --


def long_input(thread_id: str, run_id: str, events: int, *,
               yield_every: int = 100) -> dict[str, Any]:
    """A RunAgentInput for the long-message agent: one text message of ``events`` events
    (its start, ``events - 2`` content events, its end)."""
    return {
        "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
        "messages": [{"id": f"user-{run_id}", "role": "user", "content": "go"}],
        "state": {}, "tools": [], "context": [],
        "forwardedProps": {"long": {"events": events, "yield_every": yield_every}},
    }


class LongMessageAgent(Agent):
    """Emits one text message of ``forwardedProps.long.events`` events and nothing else,
    so every seq between its start and its end is inside the open message."""

    capabilities = Capabilities(description="Benchmark load: one very long text message.")

    async def run(self, ctx: RunContext) -> None:
        raw = ctx.forwarded_props.get("long") if isinstance(ctx.forwarded_props, dict) \
            else None
        k: dict[str, Any] = raw if isinstance(raw, dict) else {}
        events, yield_every = int(k.get("events", 100_000)), int(k.get("yield_every", 100))
        mid = f"msg_{ctx.run_id}"
        await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        for i in range(events - 2):
            await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                            "delta": f" token{i}"})
            if yield_every and i % yield_every == 0:
                await asyncio.sleep(0)
        await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})


def long_factory(settings: Settings | None = None) -> LongMessageAgent:
    """``--agent long=bench.agents:long_factory``."""
    return LongMessageAgent()
