"""A Microsoft Agent Framework agent for adapter tests: a weather tool that
records each execution in a file, on a chat client pointed at a model server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def weather_agent(settings: Any) -> Any:
    import agent_framework as af
    from agent_framework.openai import OpenAIChatCompletionClient

    log = Path(os.environ["MAF_TOOL_LOG"])

    def get_weather(city: str) -> str:
        """Weather for a city."""
        with log.open("a") as f:
            f.write(f"{city}\n")
        return f"sunny in {city}"

    client = OpenAIChatCompletionClient(base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                                        api_key="unused", model="fake")
    return af.Agent(client=client, instructions="Be brief.", tools=[get_weather])
