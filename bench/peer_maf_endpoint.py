"""Microsoft Agent Framework's own AG-UI endpoint for ``bench.hosts``:
``agent-framework-ag-ui``'s ``add_agent_framework_fastapi_endpoint`` over
``bench.host_agents.maf_agent`` (nothing durable), or with ``$OUTLAST_BENCH_APPROVAL=1``
``bench.approval_agents``' (a tool that needs approval); ``$OUTLAST_BENCH_PORT`` picks
the port.

It needs ``ag-ui-protocol`` 0.1, which this project's 1.0 excludes: run it with an
interpreter that has ``agent-framework-ag-ui`` and ``agent-framework-openai``
(``$OUTLAST_BENCH_MAF_PYTHON``):

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_maf_endpoint
"""

from __future__ import annotations

import os

from bench.approval_agents import chosen
from bench.model_server import serve

maf_agent = chosen("maf_agent")


def main() -> None:
    from agent_framework_ag_ui import add_agent_framework_fastapi_endpoint
    from fastapi import FastAPI

    app = FastAPI()
    # bench.conformance_peers measures it both ways: as it comes, and detached.
    detached = os.environ.get("OUTLAST_BENCH_MAF_DETACHED") == "1"
    add_agent_framework_fastapi_endpoint(app, maf_agent(), "/", single_user=True,
                                         detached_runs=detached)
    serve(app)


if __name__ == "__main__":
    main()
