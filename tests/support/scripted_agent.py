"""An agent that emits exactly the events its input lists (``forwardedProps.events``),
to try the engine with every shape an agent can produce, broken ones included."""

from __future__ import annotations

from typing import Any

from outlast.agent import Agent, Capabilities, RunContext


class ScriptedAgent(Agent):
    """Emits ``forwardedProps.events`` in order. With ``forwardedProps.keepGoing`` it
    swallows a refused event and emits the rest, as a careless agent would."""

    capabilities = Capabilities(description="Emits the events it is given.")

    async def run(self, ctx: RunContext) -> Any:
        props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
        for event in props.get("events", []):
            try:
                await ctx.emit(event)
            except Exception:
                if not props.get("keepGoing"):
                    raise
        return props.get("result")
