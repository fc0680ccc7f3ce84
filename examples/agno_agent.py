"""An Agno agent, served durably by outlast.

    pip install "outlast[agno]"
    outlast serve --agent assistant=examples.agno_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI client reads them, the model
named by ``OPENAI_MODEL``. ``delete_file`` deletes only inside ``EXAMPLE_SANDBOX``
(default ``./sandbox``), and only after a person confirms the call: Agno's own
``requires_confirmation`` pauses the run until they answer.
"""

import logging
import os
from pathlib import Path

from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.tools import tool

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@tool(requires_confirmation=True)
def delete_file(path: str) -> str:
    """Delete a file from the sandbox folder (a person confirms each call first)."""
    log.info("delete_file(%r)", path)
    target = (SANDBOX / path).resolve()
    if not target.is_relative_to(SANDBOX.resolve()):
        return f"{path} is outside the sandbox: nothing was deleted."
    if not target.is_file():
        return f"There is no file {path}."
    target.unlink()
    return f"Deleted {path}."


# OpenAIChat speaks Chat Completions; with no base_url the OpenAI client reads
# OPENAI_BASE_URL itself (and OPENAI_API_KEY). Agno's telemetry is off.
agent = Agent(model=OpenAIChat(id=os.environ.get("OPENAI_MODEL", "gpt-4o-mini")),
              instructions="You are a helpful assistant. Be brief.",
              tools=[get_weather, delete_file], telemetry=False)
