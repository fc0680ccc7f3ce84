"""The agents ``bench.hosts`` serves both ways: through the framework's own AG-UI
endpoint and through outlast's host. The model is the framework's OpenAI chat model
pointed at ``bench.model_server`` (``$OUTLAST_OPENAI_BASE_URL``)."""

from __future__ import annotations

import os
from typing import Any


def pydantic_agent(settings: Any = None) -> Any:
    """A Pydantic AI agent that only answers (the model streams; no tools)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return Agent(model, instructions="Answer.")
