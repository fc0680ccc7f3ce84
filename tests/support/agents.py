"""Small agents that tests register on a real server with ``--agent name=module:factory``.

The server subprocess imports this module, so it needs the repository root on
``PYTHONPATH`` (see ``AGENT_ENV``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from outlast.agent import Agent, Capabilities, RunContext
from outlast.config import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_ENV = {"PYTHONPATH": str(REPO_ROOT)}
ASK_AGENT = "ask=tests.support.agents:ask"


class AskAgent(Agent):
    """Raises the interrupts listed in ``forwardedProps.ask.interrupts`` all at once; a
    continuation says how each was answered (``id=status`` pairs) and succeeds."""

    capabilities = Capabilities(description="Asks the questions it is given.", interrupts=True)

    async def run(self, ctx: RunContext) -> None:
        if ctx.resume:
            answers = ", ".join(f"{r.interrupt['id']}={r.status}" for r in ctx.resume)
            await say(ctx, f"answers: {answers}")
            return
        props: Any = ctx.forwarded_props
        asks = (props or {}).get("ask", {}).get("interrupts") if isinstance(props, dict) else None
        if not asks:
            await say(ctx, "nothing to ask")
            return
        await say(ctx, f"I need {len(asks)} answers.")
        await ctx.interrupt(*[
            {"reason": "input_required", "message": f"question {a['id']}?", **a} for a in asks
        ])


async def say(ctx: RunContext, text: str) -> None:
    """Emit one whole assistant text message."""
    message_id = ctx.new_id("msg")
    await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})
    await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text})
    await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": message_id})


def ask(settings: Settings) -> Agent:
    """``--agent ask=tests.support.agents:ask``."""
    return AskAgent()


SPEND_AGENT = "spend=tests.support.agents:spend"


class SpendAgent(Agent):
    """Reports ``forwardedProps.calls`` (AG-UI ``TokenUsage`` dicts) as its model calls'
    tokens, saying something after each."""

    capabilities = Capabilities(description="Spends tokens.")

    async def run(self, ctx: RunContext) -> None:
        props: Any = ctx.forwarded_props
        for usage in (props or {}).get("calls", []) if isinstance(props, dict) else []:
            ctx.record_usage(usage)
            await say(ctx, "spent")


def spend(settings: Settings) -> Agent:
    """``--agent spend=tests.support.agents:spend``."""
    return SpendAgent()
