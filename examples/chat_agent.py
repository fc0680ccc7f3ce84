"""outlast's own ChatAgent: an OpenAI-compatible model with tools run on the server.

    pip install outlast
    outlast serve --agent assistant=examples.chat_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, the model named by ``OPENAI_MODEL``.
``delete_file`` deletes only inside ``EXAMPLE_SANDBOX`` (default ``./sandbox``), and
only after a person approves the call.
"""

import logging
import os
from pathlib import Path

from outlast.agent import tool
from outlast.agents.openai import ChatAgent

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


@tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file from the sandbox folder (a person approves each call first).

    Args:
        path: The file's path inside the sandbox.
    """
    log.info("delete_file(%r)", path)
    target = (SANDBOX / path).resolve()
    if not target.is_relative_to(SANDBOX.resolve()):
        return f"{path} is outside the sandbox: nothing was deleted."
    if not target.is_file():
        return f"There is no file {path}."
    target.unlink()
    return f"Deleted {path}."


agent = ChatAgent(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
                  os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
                  api_key=os.environ.get("OPENAI_API_KEY"),
                  tools=[get_weather, delete_file],
                  system_prompt="You are a helpful assistant. Be brief.")
