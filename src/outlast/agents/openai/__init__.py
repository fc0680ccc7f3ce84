"""OpenAI-compatible chat completions as an outlast agent.

Works with any server speaking ``POST {base_url}/chat/completions`` with
``stream: true``: a local llama.cpp or vLLM server, Ollama, OpenAI.
``ChatAgent`` is the whole tool-calling loop; ``factory`` builds one from
``OUTLAST_OPENAI_*`` variables for ``--agent chat=outlast.agents.openai:factory``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn

from outlast.agents.openai.agent import ChatAgent
from outlast.agents.openai.wire import to_openai

__all__ = ["ChatAgent", "factory", "to_openai"]


def _startup_error(message: str) -> NoReturn:
    print(f"the chat agent: {message}", file=sys.stderr)
    raise SystemExit(2)


def factory(settings: Any = None) -> ChatAgent:
    """``--agent chat=outlast.agents.openai:factory``, configured from the environment:
    ``OUTLAST_OPENAI_BASE_URL``, ``OUTLAST_OPENAI_MODEL`` (both required),
    ``OUTLAST_OPENAI_API_KEY``, ``OUTLAST_OPENAI_SYSTEM_PROMPT``,
    ``OUTLAST_OPENAI_PARAMS`` (a JSON object sent with every request),
    ``OUTLAST_OPENAI_TIMEOUT`` (seconds to wait for the next chunk, default 60) and
    ``OUTLAST_OPENAI_MAX_STEPS`` (model calls per run, default 10)."""
    env = os.environ
    base, model = env.get("OUTLAST_OPENAI_BASE_URL"), env.get("OUTLAST_OPENAI_MODEL")
    if not base or not model:
        _startup_error("needs OUTLAST_OPENAI_BASE_URL and OUTLAST_OPENAI_MODEL")
    params: Any = {}
    if env.get("OUTLAST_OPENAI_PARAMS"):
        try:
            params = json.loads(env["OUTLAST_OPENAI_PARAMS"])
        except ValueError as exc:
            _startup_error(f"OUTLAST_OPENAI_PARAMS is not JSON ({exc})")
        if not isinstance(params, dict):
            _startup_error("OUTLAST_OPENAI_PARAMS must be a JSON object")
    try:
        timeout = float(env.get("OUTLAST_OPENAI_TIMEOUT") or 60)
        max_steps = int(env.get("OUTLAST_OPENAI_MAX_STEPS") or 10)
        return ChatAgent(model, base, api_key=env.get("OUTLAST_OPENAI_API_KEY"),
                         system_prompt=env.get("OUTLAST_OPENAI_SYSTEM_PROMPT"),
                         params=params, timeout=timeout, max_steps=max_steps)
    except ValueError as exc:
        _startup_error(f"bad OUTLAST_OPENAI_TIMEOUT or OUTLAST_OPENAI_MAX_STEPS ({exc})")
