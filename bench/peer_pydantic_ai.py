"""Pydantic AI's own AG-UI endpoint for ``bench.hosts``: ``AGUIAdapter.dispatch_request``
in a Starlette route, as Pydantic AI's documentation serves an agent, over
``bench.host_agents.pydantic_agent`` (no storage, nothing durable), or with
``$OUTLAST_BENCH_APPROVAL=1`` ``bench.approval_agents``' (a tool that needs approval);
``$OUTLAST_BENCH_PORT`` picks the port.

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_pydantic_ai
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.approval_agents import chosen
from bench.model_server import serve

pydantic_agent = chosen("pydantic_agent")


def main() -> None:
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    agent = pydantic_agent()

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    serve(Starlette(routes=[Route("/", run, methods=["POST"])]))


if __name__ == "__main__":
    main()
