"""OpenAI Agents SDK agents for the host's tests: the SDK's chat-completions model
pointed at the scripted model server (``$OUTLAST_OPENAI_BASE_URL``), tracing export off
(no network here); each tool execution appends a line to ``$HOST_TOOL_LOG``."""

from __future__ import annotations

import os
from typing import Any

from tests.support.tool_log import record, slow_step


def triage_agent(settings: Any = None) -> Any:
    """A weather tool, an email tool that needs approval, and a handoff to "forecaster"."""
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    @function_tool(needs_approval=True)
    def send_email(to: str, subject: str) -> str:
        """Send an email (asks a person first)."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    forecaster = Agent(name="forecaster", instructions="Forecast.", model=model,
                       tools=[get_weather])
    return Agent(name="triage", instructions="Be brief.", model=model,
                 tools=[get_weather, send_email, function_tool(slow_step)],
                 handoffs=[forecaster])
