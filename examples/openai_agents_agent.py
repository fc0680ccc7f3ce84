"""An OpenAI Agents SDK agent, served durably by outlast.

    pip install "outlast[openai-agents]"
    outlast serve --agent assistant=examples.openai_agents_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI client reads them, the model
named by ``OPENAI_MODEL``. ``delete_file`` deletes only inside ``EXAMPLE_SANDBOX``
(default ``./sandbox``), and only after a person approves the call.
"""

import logging
import os
from pathlib import Path

from agents import Agent, function_tool, set_default_openai_api, set_tracing_disabled

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))

# Chat Completions is what every OpenAI-compatible server serves (the SDK's default is
# the Responses API), and the SDK's traces go to OpenAI unless turned off.
set_default_openai_api("chat_completions")
set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@function_tool(needs_approval=True)
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


agent = Agent(name="assistant", instructions="You are a helpful assistant. Be brief.",
              model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
              tools=[get_weather, delete_file])
