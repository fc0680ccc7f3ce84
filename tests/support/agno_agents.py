"""Agno agents for the host's tests: Agno's own OpenAI chat model pointed at the
scripted model server (``$OUTLAST_OPENAI_BASE_URL``); each tool execution appends a
line to ``$HOST_TOOL_LOG``, so exactly-once is checked from outside."""

from __future__ import annotations

import os
from typing import Any

from agno.run import RunContext  # resolved by Agno in note_visit's signature

from tests.support.tool_log import record, slow_step


def weather_agent(settings: Any = None) -> Any:
    """A weather tool, a slow step, an email tool that needs a person's confirmation,
    and a slow step that needs one."""
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat
    from agno.tools import tool

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    @tool(requires_confirmation=True)
    def send_email(to: str, subject: str) -> str:
        """Send an email (asks a person first)."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    # slow_step again, confirmed first (a test kills the server while it runs).
    slow_confirmed = tool(name="slow_confirmed", requires_confirmation=True)(slow_step)
    model = OpenAIChat(id="fake", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused")
    return Agent(name="weather", model=model, instructions="Be brief.",
                 tools=[get_weather, slow_step, send_email, slow_confirmed], telemetry=False)


def note_visit(run_context: RunContext) -> str:
    """Count one more visit in Agno's own session state."""
    state = run_context.session_state if run_context.session_state is not None else {}
    state["visits"] = int(state.get("visits", 0)) + 1
    record(f"note_visit {state['visits']}")
    return f"visit {state['visits']}"


def visits_agent(settings: Any = None) -> Any:
    """``note_visit``: a tool that counts visits in Agno's session state."""
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    model = OpenAIChat(id="fake", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused")
    return Agent(name="visits", model=model, instructions="Be brief.", tools=[note_visit],
                 session_state={"visits": 0}, telemetry=False)
