"""Google ADK's AG-UI endpoint for ``bench.hosts``: ag-ui-adk's
``add_adk_fastapi_endpoint`` in a FastAPI app, over ``bench.host_agents.adk_agent``
wrapped in its ``ADKAgent`` with its defaults (in-memory sessions, nothing durable).

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_adk
"""

from __future__ import annotations

from bench.host_agents import adk_agent
from bench.model_server import serve


def main() -> None:
    from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_adk_fastapi_endpoint(app, ADKAgent(adk_agent(), app_name="bench", user_id="bench"),
                             path="/")
    serve(app)


if __name__ == "__main__":
    main()
