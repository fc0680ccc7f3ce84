"""Strands Agents host: a ``strands.Agent`` runs durably as an outlast agent.

A Strands ``Agent`` holds one conversation and its pending interrupt, and refuses a
second call while one runs; outlast runs many threads at once. So each run gets its own
``Agent``, built from the served one (its model, tools, system prompt, hooks, middleware,
state and settings), and the thread's Strands state (the SDK's own session snapshot:
messages, agent state, conversation manager state, interrupt state) is kept in the
thread's private ``session_state``, rewritten at every boundary; a new process continues
the conversation from it. Its stream (``stream_async``) becomes AG-UI: text, reasoning
and tool-call events, tool results. Outlast adds:

- every tool execution runs as a journaled effect keyed by the model's call id (G9),
  through Strands' own ``ExecuteToolStage`` middleware;
- an ``event.interrupt()`` in a hook (a ``BeforeToolCallEvent`` approval, or the SDK's
  ``HumanInTheLoop`` intervention) ends the run with durable outlast interrupts (G7); the
  answer, after any restart, goes back as the ``interruptResponse`` the hook reads;
- a crash resume (G8) continues from the Strands state at the last boundary: a reply it
  was cutting off is kept, marked ``interrupted``, and not sent to the model; a call it
  was executing is in doubt and a person is asked before anything runs;
- every model call's tokens count toward the run's final event (AG-UI 1.0 usage).

Strands' OpenTelemetry spans go to the process's tracer provider: nowhere unless the
application (or outlast's ``OTEL_*`` tracing) installs one. A ``session_manager`` on the
served agent is not used: the thread keeps the conversation. Install with
``pip install "outlast[strands]"``.

The run is in ``host.py``, the per-run ``Agent`` comes from ``fork.py``, and Strands'
stream becomes AG-UI events in ``relay.py``.
"""

from outlast.agents.strands.host import HOST, StrandsAgent, factory, serves

__all__ = ["HOST", "StrandsAgent", "factory", "serves"]
