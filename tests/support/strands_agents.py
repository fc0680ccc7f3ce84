"""Strands agents for the host's tests: the framework's own OpenAI model client pointed at
the scripted model server (``$OUTLAST_OPENAI_BASE_URL``). ``weather_agent`` (the contract
suite's): a ``BeforeToolCallEvent`` hook asks a person (``event.interrupt``) before any
``send_email``; ``gated_agent`` adds a slow gate before it. ``hitl_agent``: the SDK's
``HumanInTheLoop`` intervention, the agent's own state, a tool that asks from inside.
``forecast_agent``: structured output. Each tool execution appends a line to
``$HOST_TOOL_LOG``, so exactly-once is checked from outside."""

# No `from __future__ import annotations`: Strands reads the tools' type hints.

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


def gated_agent(settings: Any = None) -> Any:
    """``weather_agent`` with a gate before every tool call's approval: it logs
    ``gate <tool>`` and takes ``$HOST_SLOW_SECONDS`` (a test kills the server in it)."""
    import asyncio

    from strands.hooks import BeforeToolCallEvent, HookOrder

    async def gate(event: BeforeToolCallEvent) -> None:
        record(f"gate {event.tool_use['name']}")
        await asyncio.sleep(float(os.environ.get("HOST_SLOW_SECONDS", "0")))

    agent = weather_agent(settings)
    agent.add_hook(gate, BeforeToolCallEvent, order=HookOrder.SDK_FIRST)
    return agent


def hitl_agent(settings: Any = None) -> Any:
    """The SDK's ``HumanInTheLoop`` intervention asks before ``send_email``; ``count``
    keeps a tally in the agent's own state; ``deploy`` asks a person from inside its body
    (``tool_context.interrupt``)."""
    from strands import Agent, ToolContext, tool
    from strands.models.openai import OpenAIModel
    from strands.vended_interventions.hitl import HumanInTheLoop

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    @tool(context=True)
    def count(tool_context: ToolContext) -> str:
        """Count one more."""
        state = tool_context.agent.state
        state.set("count", int(state.get("count") or 0) + 1)
        record(f"count {state.get('count')}")
        return f"count is {state.get('count')}"

    @tool(context=True)
    def deploy(target: str, tool_context: ToolContext) -> str:
        """Deploy to a target (asks a person first)."""
        record(f"deploy asks {target}")
        answer = tool_context.interrupt("deploy-ok", reason=f"Deploy to {target}?")
        if not (isinstance(answer, dict) and answer.get("approved")):
            return f"not deployed to {target}"
        record(f"deploy {target}")
        return f"deployed to {target}"

    model = OpenAIModel(client_args={"base_url": os.environ["OUTLAST_OPENAI_BASE_URL"],
                                     "api_key": "unused"}, model_id="fake")
    return Agent(model=model, system_prompt="Be brief.", callback_handler=None,
                 tools=[send_email, count, deploy],
                 interventions=[HumanInTheLoop(allowed_tools=["count", "deploy"])])


def forecast_agent(settings: Any = None) -> Any:
    """Answers with a ``Forecast`` (Strands' structured output)."""
    from pydantic import BaseModel
    from strands import Agent
    from strands.models.openai import OpenAIModel

    class Forecast(BaseModel):
        """A city's forecast."""

        city: str
        sky: str

    model = OpenAIModel(client_args={"base_url": os.environ["OUTLAST_OPENAI_BASE_URL"],
                                     "api_key": "unused"}, model_id="fake")
    return Agent(model=model, callback_handler=None, structured_output_model=Forecast)
