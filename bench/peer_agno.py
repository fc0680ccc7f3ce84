"""Agno's own AG-UI endpoint for ``bench.hosts``: the ``AGUI`` interface's router
(``agno.os.interfaces.agui``, ``POST /agui``) in a FastAPI app, over
``bench.host_agents.agno_agent`` (no db, nothing durable).

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_agno
"""

from __future__ import annotations

import os

from bench.host_agents import agno_agent
from bench.model_server import serve


def main() -> None:
    from agno.os.interfaces.agui import AGUI
    from fastapi import FastAPI

    os.environ.setdefault("AGNO_TELEMETRY", "false")
    app = FastAPI()
    app.include_router(AGUI(agent=agno_agent()).get_router())
    serve(app)


if __name__ == "__main__":
    main()
