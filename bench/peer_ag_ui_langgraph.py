"""LangGraph's own AG-UI endpoint for ``bench.hosts``: ``ag-ui-langgraph``'s
``add_langgraph_fastapi_endpoint`` over ``bench.host_agents.langgraph_graph`` with an
in-memory checkpointer, as its documentation serves a graph (nothing durable), or with
``$OUTLAST_BENCH_APPROVAL=1`` ``bench.approval_agents``' (``interrupt()`` before its
tool); ``$OUTLAST_BENCH_PORT`` picks the port.

It needs ``ag-ui-protocol`` 0.1, which this project's 1.0 excludes: run it with an
interpreter that has ``ag-ui-langgraph`` and ``langchain-openai`` installed
(``$OUTLAST_BENCH_AGUI_LANGGRAPH_PYTHON``):

    OUTLAST_OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 python -m bench.peer_ag_ui_langgraph
"""

from __future__ import annotations

from bench.approval_agents import chosen
from bench.model_server import serve

langgraph_graph = chosen("langgraph_graph")


def main() -> None:
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI
    from langgraph.checkpoint.memory import MemorySaver

    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(
        name="bench", graph=langgraph_graph(checkpointer=MemorySaver())), "/")
    serve(app)


if __name__ == "__main__":
    main()
