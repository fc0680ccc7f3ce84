"""A Strands Agents agent, served durably by outlast.

    pip install "outlast[strands]"
    outlast serve --agent assistant=examples.strands_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI client reads them, the model
named by ``OPENAI_MODEL``. ``delete_file`` deletes only inside ``EXAMPLE_SANDBOX``
(default ``./sandbox``), and only after a person approves the call: the SDK's own
``HumanInTheLoop`` intervention asks before every tool but ``get_weather``.
"""

import logging
import os
from pathlib import Path

from strands import Agent, tool
from strands.models.openai import OpenAIModel
from strands.vended_interventions.hitl import HumanInTheLoop

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@tool
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


# OpenAIModel speaks Chat Completions; with no client_args the OpenAI client reads
# OPENAI_BASE_URL and OPENAI_API_KEY itself.
agent = Agent(model=OpenAIModel(model_id=os.environ.get("OPENAI_MODEL", "gpt-4o-mini")),
              system_prompt="You are a helpful assistant. Be brief.",
              tools=[get_weather, delete_file], callback_handler=None,
              interventions=[HumanInTheLoop(allowed_tools=["get_weather"])])
