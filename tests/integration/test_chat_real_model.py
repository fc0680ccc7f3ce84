"""ChatAgent against a real model server (``scripts/llm-server.sh`` serves
SmolLM2-135M-Instruct on llama.cpp). Skipped unless ``OUTLAST_TEST_LLM_URL`` is set."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import one_result_per_call
from tests.support.server import ServerProcess, collect

URL = os.environ.get("OUTLAST_TEST_LLM_URL")
pytestmark = pytest.mark.skipif(
    not URL, reason="set OUTLAST_TEST_LLM_URL (see scripts/llm-server.sh) for the real model")


def start(server_factory: Any, tmp_path: Path, **params: Any) -> ServerProcess:
    srv: ServerProcess = server_factory("--agent", "chat=tests.support.chat_agents:factory", env={
        "OUTLAST_OPENAI_BASE_URL": str(URL), "OUTLAST_OPENAI_MODEL": "smollm2",
        "CHAT_TOOL_LOG": str(tmp_path / "tools.log"), "OUTLAST_OPENAI_TIMEOUT": "120",
        "OUTLAST_OPENAI_MAX_STEPS": "2", "OUTLAST_OPENAI_PARAMS": json.dumps(params)})
    return srv


def body(thread: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": f"{thread}-r", "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


async def test_a_real_model_streams_an_answer(server_factory: Any, tmp_path: Path) -> None:
    srv = start(server_factory, tmp_path, max_tokens=32, temperature=0)
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat", json=body("real-1", "Say hello."))
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        result = frames[-1].event["result"]
        assert result["finishReason"] in ("stop", "length")
        thread = (await c.get("/threads/real-1")).json()
    assert thread["messages"][-1]["role"] == "assistant"
    assert thread["messages"][-1]["content"].strip()


async def test_a_real_model_calls_a_forced_tool(server_factory: Any, tmp_path: Path) -> None:
    # SmolLM2-135M calls tools only when tool_choice forces one function.
    srv = start(server_factory, tmp_path, max_tokens=64, temperature=0, tool_choice={
        "type": "function", "function": {"name": "get_weather"}})
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/chat",
                                  json=body("real-2", "What is the weather in Paris?"))
        assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1].event
        thread = (await c.get("/threads/real-2")).json()
    kinds = [f.event["type"] for f in frames]
    assert "TOOL_CALL_START" in kinds and "TOOL_CALL_RESULT" in kinds
    one_result_per_call(thread["messages"])
    assert (tmp_path / "tools.log").read_text().startswith("get_weather")
