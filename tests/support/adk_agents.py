"""Google ADK agents for the host's tests: ADK's own OpenAI model (``OpenAILlm``) pointed
at the scripted model server (``$OUTLAST_OPENAI_BASE_URL``); each tool execution appends
a line to ``$HOST_TOOL_LOG``, so exactly-once is checked from outside."""

from __future__ import annotations

import os
from typing import Any

from tests.support.tool_log import record, slow_step


def get_weather(city: str) -> str:
    """Current weather for a city."""
    record(f"get_weather {city}")
    return f"sunny in {city}"


def send_email(to: str, subject: str) -> str:
    """Send an email (asks a person first)."""
    record(f"send_email {to} {subject}")
    return f"sent to {to}"


def weather_agent(settings: Any = None) -> Any:
    """A weather tool, a slow step, and an email tool that needs a person's confirmation."""
    from google.adk.agents import LlmAgent
    from google.adk.integrations.openai import OpenAILlm
    from google.adk.tools.function_tool import FunctionTool
    from openai import AsyncOpenAI

    model = OpenAILlm(model="fake", client=AsyncOpenAI(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return LlmAgent(name="assistant", model=model, instruction="Be brief.",
                    tools=[get_weather, slow_step,
                           FunctionTool(send_email, require_confirmation=True)])


def memo_agent(settings: Any = None) -> Any:
    """The weather tool, and ADK session state: each reply is kept under ``last_reply``
    (``output_key``) and shown to the model in the next turn's instruction."""
    from google.adk.agents import LlmAgent
    from google.adk.integrations.openai import OpenAILlm
    from openai import AsyncOpenAI

    model = OpenAILlm(model="fake", client=AsyncOpenAI(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return LlmAgent(name="assistant", model=model, output_key="last_reply",
                    instruction="Be brief. You said before: {last_reply?}",
                    tools=[get_weather])
