"""A Google ADK agent, served durably by outlast.

    pip install "outlast[adk]"
    outlast serve --agent assistant=examples.adk_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API
through ADK's own ``OpenAILlm``: ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI
client reads them, the model named by ``OPENAI_MODEL``. ``delete_file`` deletes only
inside ``EXAMPLE_SANDBOX`` (default ``./sandbox``), and only after a person confirms
the call (ADK's ``require_confirmation``).
"""

import logging
import os
from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.integrations.openai import OpenAILlm
from google.adk.tools.function_tool import FunctionTool

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


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


# OpenAILlm speaks Chat Completions; with no client given, the OpenAI client it makes
# reads OPENAI_BASE_URL and OPENAI_API_KEY itself.
agent = LlmAgent(name="assistant",
                 model=OpenAILlm(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini")),
                 instruction="You are a helpful assistant. Be brief.",
                 tools=[get_weather, FunctionTool(delete_file, require_confirmation=True)])
