"""The tools of an ADK agent as outlast runs them: each execution a journaled effect
keyed by the model's call id (G9), and the person's reason added to ADK's answer for a
call they rejected."""

from __future__ import annotations

import contextvars
import copy
import functools
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import RunContext

try:
    from google.adk.agents import LlmAgent
    from google.adk.plugins import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.function_tool import FunctionTool
except ImportError:  # pragma: no cover - exercised only without the extra
    BasePlugin = object  # type: ignore[assignment, misc]

KEY_PREFIX = "adk-tool:"  # + the call id: a tool execution's journal key
CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "outlast_adk_run", default=None)
"""The run whose agent is executing: its tools journal through it (tasks inherit it)."""


def journal_tools(agent: Any) -> None:
    """Make every tool of ``agent`` (and of its sub-agents) run as an outlast effect keyed
    by the model's call id while a run of this host executes it (G9); outside such a
    run the tools behave as before. Plain functions become ``FunctionTool``s."""
    if isinstance(agent, LlmAgent):
        agent.tools = [_journaled(FunctionTool(t) if callable(t) and not isinstance(
            t, BaseTool) and not hasattr(t, "get_tools") else t) for t in agent.tools]
    for sub in getattr(agent, "sub_agents", None) or ():
        journal_tools(sub)


def _journaled(tool: Any) -> Any:
    if not isinstance(tool, BaseTool) or getattr(tool, "_outlast_journaled", False):
        return tool
    copied = copy.copy(tool)
    run = tool.run_async

    async def run_async(*, args: dict[str, Any], tool_context: Any) -> Any:
        # ADK's confirmation gate stands before this: a call that runs here is confirmed.
        ctx = CURRENT.get()
        call_id = getattr(tool_context, "function_call_id", None)
        if ctx is None or not call_id:
            return await run(args=args, tool_context=tool_context)

        async def invoke() -> Any:
            return to_jsonable_python(await run(args=args, tool_context=tool_context),
                                      fallback=str)

        return await ctx.effect(KEY_PREFIX + call_id, invoke, tool=tool.name,
                                args=dict(args), tool_call_id=call_id)

    object.__setattr__(copied, "run_async", run_async)
    object.__setattr__(copied, "_outlast_journaled", True)
    return copied


@functools.cache
def reasons() -> Any:
    """An ADK plugin adding the person's reason to ADK's answer for a rejected call."""

    class Reasons(BasePlugin):
        async def after_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                      tool_context: Any, result: Any) -> Any:
            confirmation = getattr(tool_context, "tool_confirmation", None)
            payload = getattr(confirmation, "payload", None)
            reason = payload.get("reason") if isinstance(payload, dict) else None
            if confirmation is None or confirmation.confirmed or not isinstance(
                    reason, str) or not isinstance(result, dict) or "error" not in result:
                return None
            return {**result, "reason": reason}  # ADK's words, then the person's

    return Reasons(name="outlast_rejection_reasons")


def all_tools(agent: Any) -> list[Any]:
    """The tools of ``agent`` and of its sub-agents."""
    found = list(getattr(agent, "tools", None) or ())
    for sub in getattr(agent, "sub_agents", None) or ():
        found += all_tools(sub)
    return found
