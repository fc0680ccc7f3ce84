"""A Microsoft Agent Framework AG-UI server for ``bench.peers``: the package's own
FastAPI endpoint (``agent_framework_ag_ui.add_agent_framework_fastapi_endpoint``) over
an agent that streams text updates as fast as it can, each stamped like the paced
agent's deltas (``bench.agents.stamp``), awaiting after each one.

Runs in an interpreter where ``agent-framework-ag-ui`` is installed (it is not a
dependency of this project):

    python -m bench.peer_maf --events 1000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from agent_framework import AgentResponse, AgentResponseUpdate, Content
from agent_framework_ag_ui import add_agent_framework_fastapi_endpoint
from fastapi import FastAPI


class StreamingAgent:
    """A custom agent (``SupportsAgentRun``): ``events`` stamped text updates."""

    def __init__(self, events: int) -> None:
        self.id = "bench-stream"
        self.name = "bench"
        self.description = "Streams stamped text updates as fast as it can."
        self.events = events

    def create_session(self, **kwargs: Any) -> Any:
        from agent_framework import AgentSession

        return AgentSession(**kwargs)

    def get_session(self, service_session_id: str, **kwargs: Any) -> Any:
        from agent_framework import AgentSession

        return AgentSession(service_session_id=service_session_id, **kwargs)

    def run(self, messages: Any = None, *, stream: bool = False, session: Any = None,
            **kwargs: Any) -> Any:
        async def updates() -> AsyncIterator[AgentResponseUpdate]:
            for _ in range(self.events):
                yield AgentResponseUpdate(
                    contents=[Content.from_text(text=f"@{time.time():.6f}+0")],
                    role="assistant", message_id="bench-message")
                await asyncio.sleep(0)

        if stream:
            return updates()

        async def whole() -> AgentResponse:
            return AgentResponse(messages=[], response_id="bench")

        return whole()


async def serve(events: int) -> None:
    app = FastAPI()
    add_agent_framework_fastapi_endpoint(app, StreamingAgent(events), "/",  # type: ignore[arg-type]
                                          single_user=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", http="h11",
                            access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn: a flag)
        await asyncio.sleep(0.02)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"outlast serving on http://127.0.0.1:{port}/", flush=True)  # bench.common.READY
    await task


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=1000)
    asyncio.run(serve(p.parse_args().events))


if __name__ == "__main__":
    main()
