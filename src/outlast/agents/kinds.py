"""The agent you have, served: an outlast ``Agent`` as it is, a framework's own agent
object through its host, picked by the object's type.

``--agent NAME=module:attr`` and ``outlast.mount(agents=...)`` both come here. A host
module (``outlast.agents.<host>``) exports ``serves(obj)``, true for the objects it takes,
and ``HOST``, the outlast agent class that wraps one. A host is imported only when an
object's class comes from its framework, so a server never imports frameworks it does
not serve.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from outlast.agent import Agent
from outlast.errors import MissingDependency
from outlast.targets import describe


@dataclass(frozen=True)
class Kind:
    """A framework's agent object and the host that serves it."""

    label: str  # what the object is, as a person names it
    origin: str  # the package its class (or a base class) comes from: found when installed
    host: str  # the host module: serves(obj) and HOST
    extra: str  # pip install "outlast[extra]" installs the framework and the host's needs


KINDS: tuple[Kind, ...] = (
    Kind("a Pydantic AI Agent", "pydantic_ai", "outlast.agents.pydantic_ai", "pydantic-ai"),
    Kind("an OpenAI Agents SDK Agent", "agents", "outlast.agents.openai_agents",
         "openai-agents"),
    Kind("a compiled LangGraph graph", "langgraph", "outlast.agents.langgraph", "langgraph"),
    Kind("a Strands Agents Agent", "strands", "outlast.agents.strands", "strands"),
    Kind("a Google ADK LlmAgent", "google.adk", "outlast.agents.adk", "adk"),
    Kind("an Agno Agent", "agno", "outlast.agents.agno", "agno"),
    Kind("a Microsoft Agent Framework agent", "agent_framework", "outlast.agents.maf", "maf"),
)


class NotAnAgent(TypeError):
    """An object of no kind outlast serves; the message says what is accepted."""


def accepted() -> str:
    """The kinds ``--agent`` takes, each missing framework with the extra that installs it."""
    kinds = ["an outlast Agent"]
    for kind in KINDS:
        try:
            installed = importlib.util.find_spec(kind.origin) is not None
        except (ImportError, ValueError):
            installed = False
        kinds.append(kind.label if installed else
                     f'{kind.label} (pip install "outlast[{kind.extra}]")')
    return ", ".join(kinds)


def _origin(obj: Any) -> Kind | None:
    modules = {getattr(cls, "__module__", "") for cls in type(obj).__mro__}
    for kind in KINDS:
        if any(m == kind.origin or m.startswith(kind.origin + ".") for m in modules):
            return kind
    return None


def host_for(obj: Any) -> Agent | None:
    """``obj`` as an outlast agent: itself, or its framework's host wrapping it; None for
    an object of no known kind. A host whose own dependencies are missing raises
    ``MissingDependency`` (naming the extra)."""
    if isinstance(obj, Agent):
        return obj
    kind = _origin(obj)
    if kind is None:
        return None
    host = importlib.import_module(kind.host)
    if not host.serves(obj):
        return None
    agent: Agent = host.HOST(obj)
    return agent


def agent_of(obj: Any, settings: Any = None, *, name: str = "the object") -> Agent:
    """The outlast agent that serves ``obj``: an agent or a framework's agent object, or a
    callable (a factory, given ``settings``) returning one. ``NotAnAgent`` otherwise; a
    factory that raises is reported as ``name`` failing, with where it raised."""
    agent = host_for(obj)
    if agent is not None:
        return agent
    if not callable(obj):
        raise NotAnAgent(f"{name} is {_a(obj)}, not an agent; it may be {accepted()}, "
                         "or a function of the settings returning one")
    try:
        made = obj(settings)
    except MissingDependency:
        raise
    except Exception as exc:
        raise FactoryFailed(f"{name}(settings) raised {describe(exc)}") from exc
    agent = host_for(made)
    if agent is None:
        raise NotAnAgent(f"{name}(settings) returned {_a(made)}, not an agent; it may "
                         f"return {accepted()}")
    return agent


class FactoryFailed(RuntimeError):
    """A factory raised; the message names it, the exception and where it raised."""


def _a(obj: Any) -> str:
    name = type(obj).__qualname__
    module = type(obj).__module__
    shown = name if module == "builtins" else f"{module}.{name}"
    return f"an {shown}" if shown[:1].lower() in "aeiou" else f"a {shown}"


__all__ = ["KINDS", "FactoryFailed", "Kind", "NotAnAgent", "accepted", "agent_of",
           "host_for"]
