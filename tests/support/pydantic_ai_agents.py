"""Pydantic AI agents for the host's tests: the framework's own OpenAI chat model pointed
at the scripted model server (``$OUTLAST_OPENAI_BASE_URL``); each tool execution appends
a line to ``$HOST_TOOL_LOG``, so exactly-once is checked from outside."""

from __future__ import annotations

import os
from typing import Any

from tests.support.tool_log import record, slow_step


def weather_agent(settings: Any = None) -> Any:
    """A weather tool, and an email tool that needs a person's approval."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("fake", provider=OpenAIProvider(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    agent = Agent(model, instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    agent.tool_plain(slow_step)

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> str:
        """Send an email (asks a person first)."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    return agent
