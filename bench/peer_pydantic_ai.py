"""Pydantic AI's own AG-UI endpoint for ``bench.hosts``: ``AGUIAdapter.dispatch_request``
in a Starlette route, as Pydantic AI's documentation serves an agent, over
``bench.host_agents.pydantic_agent`` (no storage, nothing durable).

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_pydantic_ai
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.host_agents import pydantic_agent
from bench.model_server import serve


def main() -> None:
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    agent = pydantic_agent()

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    serve(Starlette(routes=[Route("/", run, methods=["POST"])]))


if __name__ == "__main__":
    main()
