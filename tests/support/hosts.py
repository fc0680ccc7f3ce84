"""The framework hosts as their tests serve them: each host's name, factory, test agent
and the approval answers it takes, a scripted model per test, and the helpers that start
a real ``outlast serve`` for a host (tests/integration/test_framework_hosts*.py)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI
from tests.support.server import ServerProcess

FEATURES = ("agentic-chat", "backend-tool-rendering")
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


@dataclass(frozen=True)
class Host:
    """A framework host and the test agent it serves."""

    name: str  # the agent's name: POST /agents/<name>
    module: str  # the framework's package
    factory: str  # outlast.agents.<host>:factory
    variable: str  # the factory's environment variable
    target: str  # the test agent, module:attr
    # Approval answers and what follows: payload, tool lines run, text in the result.
    answers: tuple[tuple[str, dict[str, Any], list[str], str], ...]
    # A tool's text result as the framework's own model client sends it to the model.
    model_sees: Callable[[str], str] = str
    # The id the framework's own model client sends for a call the scripted model made,
    # when it is the only one in the request.
    sent_call_id: Callable[[str], str] = str


APPROVED = ("approved", {"approved": True}, ["send_email ann@example.com Hi"],
            "sent to ann@example.com")
DENIED = ("denied", {"approved": False, "reason": "not now"}, [], "not now")
EDITED = {"approved": True, "editedArgs": {"to": "bo@example.com", "subject": "Hi"}}
HOSTS = {
    "pydantic-ai": Host(
        "pyd", "pydantic_ai", "outlast.agents.pydantic_ai:factory",
        "OUTLAST_PYDANTIC_AI_AGENT", "tests.support.pydantic_ai_agents:weather_agent",
        (APPROVED, DENIED,
         ("edited", EDITED, ["send_email bo@example.com Hi"], "sent to bo@example.com"))),
    "openai-agents": Host(
        "oa", "agents", "outlast.agents.openai_agents:factory",
        "OUTLAST_OPENAI_AGENTS_AGENT", "tests.support.openai_agents_agents:triage_agent",
        # The SDK approves a call as the model made it: edited arguments are refused.
        (APPROVED, DENIED, ("edited", EDITED, [], "edited"))),
    "langgraph": Host(
        "lg", "langgraph", "outlast.agents.langgraph:factory",
        "OUTLAST_LANGGRAPH_GRAPH", "tests.support.langgraph_agents:graph",
        (APPROVED, DENIED)),
    "strands": Host(
        "strands", "strands", "outlast.agents.strands:factory", "OUTLAST_STRANDS_AGENT",
        "tests.support.strands_agents:weather_agent",
        # The agent's approval hook applies the arguments a person edited.
        (APPROVED, DENIED,
         ("edited", EDITED, ["send_email bo@example.com Hi"], "sent to bo@example.com"))),
    "adk": Host(
        "adk", "google.adk", "outlast.agents.adk:factory", "OUTLAST_ADK_AGENT",
        "tests.support.adk_agents:weather_agent",
        # ADK confirms a call only as the model made it: edited arguments are refused.
        (APPROVED, DENIED, ("edited", EDITED, [], "edited")),
        # ADK sends a tool's value to the model wrapped, as {"result": value}.
        model_sees=lambda text: json.dumps({"result": text})),
    "agno": Host(
        "agno", "agno", "outlast.agents.agno:factory", "OUTLAST_AGNO_AGENT",
        "tests.support.agno_agents:weather_agent",
        # Agno runs a confirmed call with the arguments a person edited.
        (APPROVED, DENIED,
         ("edited", EDITED, ["send_email bo@example.com Hi"], "sent to bo@example.com")),
        # Agno's OpenAIChat renames a call id unlike OpenAI's ("call_…") in each request it
        # sends, numbering them from 0: the only one becomes call_ and 35 zeros.
        sent_call_id=lambda _: "call_" + "0" * 35),
}


# With Microsoft Agent Framework's adapter: every shipped host of a framework's agent.
WITH_MAF = {**HOSTS, "maf": Host(
    "maf", "agent_framework", "outlast.agents.maf:factory", "OUTLAST_MAF_AGENT",
    "tests.support.maf_agents:slow_agent", ())}


def params(*names: str) -> list[Any]:
    """The hosts, each skipped without its package (the test extra installs them all)."""
    return [pytest.param(HOSTS[n], id=n, marks=pytest.mark.skipif(
        importlib.util.find_spec(HOSTS[n].module) is None, reason=f"{HOSTS[n].module} "
        "is not installed")) for n in (names or HOSTS)]


def with_maf() -> list[Any]:
    """Every host and the Agent Framework adapter, each skipped without its package."""
    return [pytest.param(h, id=key, marks=pytest.mark.skipif(
        importlib.util.find_spec(h.module) is None, reason=f"{h.module} is not installed"))
        for key, h in WITH_MAF.items()]


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.002).start()
    yield fake
    await fake.stop()


def start(server_factory: Any, host: Host, model: FakeOpenAI, log: Path, *,
          data_dir: Path | None = None) -> ServerProcess:
    srv: ServerProcess = server_factory(
        "--agent", f"{host.name}={host.factory}", data_dir=data_dir,
        env={host.variable: host.target, "OUTLAST_OPENAI_BASE_URL": model.url,
             "HOST_TOOL_LOG": str(log)})
    return srv


def body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


def executed(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []
