"""A fresh Strands ``Agent`` per run, built from the served one: Strands refuses a second
call on an agent while one runs, and an agent holds one conversation."""

from __future__ import annotations

import copy
from typing import Any

import strands
from strands.handlers.callback_handler import PrintingCallbackHandler


def fork(template: Any) -> Any:
    """A fresh ``strands.Agent`` with ``template``'s model, tools, system prompt, settings,
    hooks and middleware, and none of its conversation: one per run, so runs of
    different threads never share an agent (Strands refuses concurrent calls)."""
    owned = _owned(template)
    try:
        manager = copy.deepcopy(template.conversation_manager)
    except Exception:  # a manager holding a lock or a client: the default instead
        manager = None
    retry = copy.copy(template._retry_strategy)
    retry._current_attempt = 0
    handler = template.callback_handler
    agent = strands.Agent(
        model=template.model, tools=[t for t in template.tool_registry.registry.values()
                                     if not _bound_to(getattr(t, "_tool_func", None), owned)],
        system_prompt=template._system_prompt_content,
        structured_output_model=template._default_structured_output_model,
        callback_handler=None if isinstance(handler, PrintingCallbackHandler) else handler,
        conversation_manager=manager, record_direct_tool_call=template.record_direct_tool_call,
        trace_attributes=template.trace_attributes, agent_id=template.agent_id,
        name=template.name, description=template.description, state=template.state.get(),
        tool_executor=template.tool_executor, retry_strategy=retry)
    # The template's own hooks and middleware, except those bound to the parts the new
    # agent made for itself (its conversation manager, retry strategy, SDK plugins).
    for event_type, entries in template.hooks._registered_callbacks.items():
        if event_type.__name__ == "AgentInitializedEvent":
            continue
        have = [e.callback for e in agent.hooks._registered_callbacks.get(event_type, ())]
        for entry in entries:
            if not _bound_to(entry.callback, owned) and entry.callback not in have:
                agent.hooks.add_callback(event_type, entry.callback, order=entry.order)
    for stage, tagged in template._middleware_registry._handlers.items():
        mine = agent._middleware_registry._handlers.setdefault(stage, [])
        mine[:] = [t for t in tagged if not _bound_to(t.handler, owned)] + \
            [t for t in mine if t not in tagged]
    return agent


def _bound_to(fn: Any, owned: list[Any]) -> bool:
    owner = getattr(fn, "__self__", None)
    return any(owner is part for part in owned)


def _owned(template: Any) -> list[Any]:
    """The template's own parts: what its hooks bound to them must not be carried."""
    parts = [template, template.conversation_manager, template._retry_strategy,
             getattr(template, "_session_manager", None),
             getattr(template, "_context_manager_instance", None),
             getattr(template, "_background_tasks", None),
             getattr(template, "memory_manager", None)]
    plugins = getattr(template._plugin_registry, "_plugins", {})
    parts += [p for name, p in plugins.items() if str(name).startswith("strands:")]
    return [p for p in parts if p is not None]


