"""A Strands agent for the host's tests: the framework's own OpenAI model client pointed at
the scripted model server (``$OUTLAST_OPENAI_BASE_URL``); a ``BeforeToolCallEvent`` hook
asks a person (``event.interrupt``) before any ``send_email``. Each tool execution appends
a line to ``$HOST_TOOL_LOG``, so exactly-once is checked from outside."""

from __future__ import annotations

import os
from typing import Any

from tests.support.tool_log import record, slow_step


def weather_agent(settings: Any = None) -> Any:
    """A weather tool, a slow step, and an email tool that needs a person's approval."""
    from strands import Agent, tool
    from strands.hooks import BeforeToolCallEvent
    from strands.models.openai import OpenAIModel

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email (asks a person first)."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    def approve_email(event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        if use["name"] != "send_email":
            return
        answer = event.interrupt("approve-send-email", reason={
            "message": f"Send an email to {use['input'].get('to')}?", "input": use["input"]})
        if not (isinstance(answer, dict) and answer.get("approved")):
            reason = answer.get("reason") if isinstance(answer, dict) else None
            event.cancel_tool = f"Not sent: {reason or 'the person declined'}."
        elif isinstance(answer.get("editedArgs"), dict):
            event.tool_use = {**use, "input": answer["editedArgs"]}

    model = OpenAIModel(client_args={"base_url": os.environ["OUTLAST_OPENAI_BASE_URL"],
                                     "api_key": "unused"}, model_id="fake")
    agent = Agent(model=model, system_prompt="Be brief.", callback_handler=None,
                  tools=[get_weather, tool(slow_step), send_email])
    agent.add_hook(approve_email, BeforeToolCallEvent)
    return agent
