"""Google ADK's AG-UI endpoint for ``bench.hosts``: ag-ui-adk's
``add_adk_fastapi_endpoint`` in a FastAPI app, over ``bench.host_agents.adk_agent``
wrapped in its ``ADKAgent`` with its defaults (in-memory sessions, nothing durable);
with ``$OUTLAST_BENCH_APPROVAL=1`` ``bench.approval_agents``' (a tool that needs
confirmation); ``$OUTLAST_BENCH_PORT`` picks the port.

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_adk
"""

from __future__ import annotations

from bench.approval_agents import chosen
from bench.model_server import serve

adk_agent = chosen("adk_agent")


def main() -> None:
    from ag_ui_adk import ADKAgent, add_adk_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    add_adk_fastapi_endpoint(app, ADKAgent(adk_agent(), app_name="bench", user_id="bench"),
                             path="/")
    serve(app)


if __name__ == "__main__":
    main()
