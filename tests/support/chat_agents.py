"""ChatAgent factories for tests: server-side tools that append one line per
execution to ``$CHAT_TOOL_LOG``, so exactly-once is checked from outside."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from outlast.agent import tool
from outlast.agents.openai import ChatAgent


def _record(line: str) -> None:
    with Path(os.environ["CHAT_TOOL_LOG"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    _record(f"get_weather {city}")
    return f"sunny in {city}"


@tool
async def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    _record(f"add {a} {b}")
    return {"sum": a + b}


@tool
def slow_step(label: str) -> str:
    """A tool that takes a while (the test kills the server while it runs)."""
    _record(f"slow_step start {label}")
    time.sleep(float(os.environ.get("CHAT_SLOW_SECONDS", "0")))
    _record(f"slow_step done {label}")
    return f"{label} done"


@tool(requires_approval=True)
def send_email(to: str, subject: str) -> str:
    """Send an email (asks a person first).

    Args:
        to: The recipient's address.
        subject: The subject line.
    """
    _record(f"send_email {to} {subject}")
    return f"sent to {to}"


def factory(settings: Any = None) -> ChatAgent:
    """The three-line factory of docs/agents.md, configured from the environment."""
    return ChatAgent(
        os.environ.get("OUTLAST_OPENAI_MODEL", "fake"), os.environ["OUTLAST_OPENAI_BASE_URL"],
        api_key=os.environ.get("OUTLAST_OPENAI_API_KEY"),
        tools=[get_weather, add, slow_step, send_email],
        system_prompt=os.environ.get("OUTLAST_OPENAI_SYSTEM_PROMPT"),
        params=json.loads(os.environ.get("OUTLAST_OPENAI_PARAMS") or "{}"),
        timeout=float(os.environ.get("OUTLAST_OPENAI_TIMEOUT") or 60),
        max_steps=int(os.environ.get("OUTLAST_OPENAI_MAX_STEPS") or 10))
