"""The agent the OpenAPI fuzzer talks to (``--agent fuzz=tests.support.fuzz_agents:fuzz``,
with ``AGENT_ENV``): quick enough for hundreds of requests, and with a life a client can
follow from its links — a run that asks a question, a continuation that takes long
enough to be cancelled."""

from __future__ import annotations

import asyncio

from outlast.agent import Agent, Capabilities, RunContext
from outlast.config import Settings
from tests.support.agents import say

FUZZ_AGENT = "fuzz=tests.support.fuzz_agents:fuzz"
CONTINUATION_SECONDS = 30.0


class FuzzAgent(Agent):
    """A run with new input asks for an approval at once; the continuation that
    answers it works for ``CONTINUATION_SECONDS`` (cancellable), then finishes."""

    capabilities = Capabilities(description="Asks, then works a while when answered.",
                                interrupts=True, supports_resume=True)

    async def run(self, ctx: RunContext) -> None:
        if ctx.resume:
            await say(ctx, "working on it")
            await asyncio.sleep(CONTINUATION_SECONDS)
            await say(ctx, "done")
            return
        await say(ctx, "May I go on?")
        await ctx.interrupt({"id": ctx.new_id("ask"), "reason": "confirmation",
                             "message": "Go on?"})


def fuzz(settings: Settings) -> Agent:
    """``--agent fuzz=tests.support.fuzz_agents:fuzz``."""
    return FuzzAgent()
