"""Strands Agents' own AG-UI endpoint for ``bench.hosts``: ag-ui-strands'
``add_strands_fastapi_endpoint`` with a ``StrandsAgent`` wrapper (a Strands agent per
thread, kept in memory) in a FastAPI app, over ``bench.host_agents.strands_agent``
(nothing durable).

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_strands
"""

from __future__ import annotations

from bench.host_agents import strands_agent
from bench.model_server import serve


def main() -> None:
    from ag_ui_strands import StrandsAgent, add_strands_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_strands_fastapi_endpoint(app, StrandsAgent(strands_agent(), name="bench"), "/")
    serve(app)


if __name__ == "__main__":
    main()
