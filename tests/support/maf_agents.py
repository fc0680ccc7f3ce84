"""Microsoft Agent Framework agents for adapter tests.

``weather_agent``: a weather tool on the framework's OpenAI chat client pointed at the
scripted model server. ``approval_agent``: a scripted ``BaseChatClient`` (no model
server at all) that calls an approval-requiring tool, then answers with text; each
tool execution appends a line to ``$MAF_TOOL_LOG``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
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


def _scripted_client() -> Any:
    import agent_framework as af

    class ScriptedClient(af.FunctionInvocationLayer, af.BaseChatClient):  # type: ignore[misc]
        """Calls ``send_email`` when the last message is the user's; otherwise
        answers with text quoting the last tool result."""

        def _inner_get_response(self, *, messages: Sequence[Any], stream: bool,
                                options: Mapping[str, Any], **kwargs: Any) -> Any:
            last = messages[-1]
            results = [c for c in last.contents if c.type == "function_result"]
            if results:
                reply = [af.Content.from_text(f"Done: {results[-1].result}")]
            else:
                reply = [af.Content.from_function_call(
                    call_id=f"mc-{len(messages)}", name="send_email",
                    arguments=json.dumps({"to": "ann@example.com", "subject": "Hi"}))]

            async def updates() -> AsyncIterator[Any]:
                yield af.ChatResponseUpdate(role="assistant", contents=reply)

            if stream:
                return af.ResponseStream(updates(),
                                         finalizer=af.ChatResponse.from_updates)

            async def whole() -> Any:
                return af.ChatResponse(messages=[af.Message("assistant", reply)])

            return whole()

    return ScriptedClient()


def approval_agent(settings: Any) -> Any:
    import agent_framework as af

    log = Path(os.environ["MAF_TOOL_LOG"])

    @af.tool(approval_mode="always_require")
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        with log.open("a") as f:
            f.write(f"send_email {to} {subject}\n")
        return f"sent to {to}"

    return af.Agent(client=_scripted_client(), instructions="Be brief.", tools=[send_email])


def slow_agent(settings: Any = None) -> Any:
    """``slow_step`` and ``get_weather`` (logged to ``$HOST_TOOL_LOG``) on the framework's
    OpenAI chat client pointed at the scripted model server."""
    import agent_framework as af
    from agent_framework.openai import OpenAIChatCompletionClient

    from tests.support.tool_log import record, slow_step

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    client = OpenAIChatCompletionClient(base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                                        api_key="unused", model="fake")
    return af.Agent(client=client, instructions="Be brief.", tools=[slow_step, get_weather])
