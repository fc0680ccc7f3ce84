"""A Microsoft Agent Framework agent, served durably by outlast.

    pip install "outlast[maf]"
    outlast serve --agent assistant=examples.maf_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI client reads them, the model
named by ``OPENAI_MODEL``. ``delete_file`` deletes only inside ``EXAMPLE_SANDBOX``
(default ``./sandbox``), and only after a person approves the call.
"""

import logging
import os
from pathlib import Path

from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatCompletionClient

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@tool(approval_mode="always_require")
def delete_file(path: str) -> str:
    """Delete a file from the sandbox folder (a person approves each call first)."""
    log.info("delete_file(%r)", path)
    target = (SANDBOX / path).resolve()
    if not target.is_relative_to(SANDBOX.resolve()):
        return f"{path} is outside the sandbox: nothing was deleted."
    if not target.is_file():
        return f"There is no file {path}."
    target.unlink()
    return f"Deleted {path}."


agent = Agent(client=OpenAIChatCompletionClient(model=os.environ.get("OPENAI_MODEL",
                                                                     "gpt-4o-mini")),
              instructions="You are a helpful assistant. Be brief.",
              tools=[get_weather, delete_file])
