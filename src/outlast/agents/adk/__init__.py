"""Google ADK host: an ADK ``LlmAgent`` runs durably as an outlast agent.

The agent runs under ADK's own ``Runner`` (``StreamingMode.SSE``): its model events
become AG-UI text and tool-call events, its function responses tool results (ADK's
``{"result": ...}`` wrapper of a plain value taken off). Outlast adds:

- the ADK session in the thread: a session service (``ThreadSessions``) keeps it in the
  thread's private ``session_state``, saved with every boundary snapshot, so a new
  process continues the conversation; messages the thread gained since join it;
- tools journaled (G9): every tool runs as an effect keyed by the model's call id;
- ``require_confirmation`` as a durable interrupt (G7): ADK ends its invocation with a
  long-running ``adk_request_confirmation`` call, kept in the session; the answer, after
  any restart, goes back as the ``FunctionResponse`` ADK expects, and ADK runs the tool
  or tells the model in its own words (and the person's reason) that it was rejected.
  ADK's stand-in result for the waiting call is never shown (one result per call);
  edited arguments are refused (ADK confirms a call only as the model made it);
- crash resume (G8) from the session at the last boundary: owed calls run through the
  journal (a call in doubt asked about first), a cut reply is marked and left out;
- cancel through ADK's ``abort_signal``; every response's tokens on the final event;
- a synchronous tool called on ADK's tool thread pool (``tool_thread_pool_config``), not
  on the event loop that every run of the process shares: ADK's default calls it there,
  where a tool that blocks stalls every other run's stream and commits until it returns.

ADK's OpenTelemetry spans go to the process's tracer provider (none unless outlast's
tracing is on); nothing else leaves the process. Install ``pip install "outlast[adk]"``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from contextlib import aclosing
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, RunContext
from outlast.agents.resume import (
    answer_placeholder,
    call_args,
    finished,
    mark_cut_off,
    owed_calls,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency

try:
    from google.adk.agents import LlmAgent, RunConfig
    from google.adk.agents.run_config import (  # type: ignore[attr-defined]
        StreamingMode,
        ToolThreadPoolConfig,
    )
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import Session
    from google.adk.tools.function_tool import FunctionTool
    from google.genai import types

    from outlast.agents.adk.relay import APPROVAL_KIND, Relay, approval, result_text
    from outlast.agents.adk.session import (
        CONFIRM,
        ThreadSessions,
        confirmation,
        to_event,
        user_content,
    )
    from outlast.agents.adk.tools import CURRENT, KEY_PREFIX, all_tools, journal_tools, reasons
except ImportError:  # pragma: no cover - exercised only without the extra
    LlmAgent = None  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.adk")

SESSION_KEY = "adk"
APP, USER = "outlast", "outlast"
TOOL_THREADS = 32
"""Synchronous tools of ADK agents that run at once in a process (ADK's tool pool is one
per event loop): as many as ``asyncio.to_thread`` runs at most."""


def _require() -> None:
    if LlmAgent is None:
        raise MissingDependency("google-adk", "adk")


def serves(obj: Any) -> bool:
    """True for an ADK ``LlmAgent``, the object this host serves."""
    return LlmAgent is not None and isinstance(obj, LlmAgent)


class AdkAgent(Agent):
    """Hosts a Google ADK agent: its session in the thread, tools journaled,
    confirmations durable, crash resume from the last boundary."""

    capabilities = Capabilities(
        description="Google ADK agent with its session in the thread, journaled tools and "
                    "durable tool confirmations",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, agent: Any) -> None:
        _require()
        journal_tools(agent)
        self.agent = agent

    async def run(self, ctx: RunContext) -> Any:
        store = ctx.session_state.setdefault(SESSION_KEY, {})
        sessions = ThreadSessions(store)
        session = sessions.session or await sessions.create_session(
            app_name=APP, user_id=USER, session_id=ctx.thread_id)
        new_message = await self._catch_up(ctx, sessions, session, store)
        runner = Runner(app=App(name=APP, root_agent=self.agent, plugins=[reasons()]),
                        session_service=sessions)
        relay = Relay(ctx, store)
        abort = asyncio.Event()
        token = CURRENT.set(ctx)
        try:
            async with aclosing(runner.run_async(
                    user_id=USER, session_id=session.id, new_message=new_message,
                    run_config=RunConfig(streaming_mode=StreamingMode.SSE,
                                         tool_thread_pool_config=ToolThreadPoolConfig(
                                             max_workers=TOOL_THREADS)),
                    abort_signal=abort)) as events:
                async for event in events:
                    await relay.send(event)
        finally:
            abort.set()  # a cancelled run stops ADK's model request too
            CURRENT.reset(token)
            # Failed or cancelled too: the session holds what ADK finished, and a
            # later turn must not add the messages of this one again.
            relay.settle()
        await relay.close()
        if relay.confirmations:
            await ctx.interrupt(*[approval(c) for c in relay.confirmations])
        return None

    async def _catch_up(self, ctx: RunContext, sessions: ThreadSessions, session: Session,
                        store: dict[str, Any]) -> Any:
        """Bring the session up to the thread; the message to run ADK with (None: go on
        from the session as it is)."""
        held = set(store.get("ids") or ())
        settled = next((i for i, m in enumerate(ctx.messages) if m.get("id") not in held),
                       len(ctx.messages))
        cut = await mark_cut_off(ctx, settled) if ctx.resumed else None
        owed = await owed_calls(ctx, KEY_PREFIX, settled if ctx.resumed else None)
        for call in owed:  # executed now, through the journal: at most once (G9)
            await answer_placeholder(ctx, call["id"], await self._execute(ctx, call))
        if owed or cut:
            log.info("run %s: resuming from message %d (%d calls owed, reply cut off: %s)",
                     ctx.run_id, settled, len(owed), cut is not None)
        new = [m for m in finished(ctx.messages) if m.get("id") not in held]
        # An answer a dead attempt already gave ADK (or whose call has its result) is
        # not given again: ADK would take it as consumed and stop.
        given = {r.id for e in session.events for r in e.get_function_responses()
                 if r.name == CONFIRM}
        results = {m.get("toolCallId") for m in ctx.messages if m.get("role") == "tool"}
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND
                   and r.interrupt["metadata"].get("confirmationId") not in given
                   and r.interrupt.get("toolCallId") not in results]
        last: Any = None
        if answers:
            last = types.Content(role="user", parts=[confirmation(a) for a in answers])
        elif new and new[-1].get("role") == "user":
            last = user_content(new.pop())
        calls = {c["id"]: c for m in ctx.messages for c in m.get("toolCalls") or ()}
        for m in new:
            event = to_event(m, self.agent.name, calls, ctx.run_id)
            if event is not None:
                await sessions.append_event(session, event)
        return last

    async def _execute(self, ctx: RunContext, call: dict[str, Any]) -> str:
        """Run one owed call with the agent's own tool, journaled; its result text."""
        name, args = call["function"]["name"], call_args(call)
        tool = next((t for t in all_tools(self.agent)
                     if isinstance(t, FunctionTool) and t.name == name), None)

        async def invoke() -> Any:
            if tool is None or not isinstance(args, dict):
                return f"Not run: the agent has no tool named {name!r} taking these arguments."
            if inspect.iscoroutinefunction(tool.func):
                value = await tool.func(**args)
            else:  # off the event loop
                value = await asyncio.to_thread(tool.func, **args)
            return to_jsonable_python(value, fallback=str)

        recorded = await ctx.effect(KEY_PREFIX + call["id"], invoke, tool=name, args=args,
                                    tool_call_id=call["id"])
        return result_text(recorded)


def factory(settings: Any = None) -> AdkAgent:
    """``--agent NAME=outlast.agents.adk:factory`` with ``OUTLAST_ADK_AGENT=module:attr``
    naming an ADK ``LlmAgent``, or a function of the settings returning one."""
    _require()
    return AdkAgent(load_target("OUTLAST_ADK_AGENT", "ADK host", serves, settings))


HOST = AdkAgent
