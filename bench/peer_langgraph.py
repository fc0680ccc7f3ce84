"""A LangGraph dev server for ``bench.peers``: ``langgraph dev``'s own server
(``langgraph_api.cli.run_server``, in-memory runtime, in this process) over a graph
whose one node streams custom events as fast as it can, each a text delta stamped like
the paced agent's (``bench.agents.stamp``), awaiting after each one, and a last one
spelled ``{"type":"RUN_FINISHED"}`` so the load client sees the run end.

Runs in an interpreter where ``langgraph-cli[inmem]`` is installed (it is not a
dependency of this project); the client asks ``POST /runs/stream`` (a stateless run)
with ``stream_mode: ["custom"]``:

    python -m bench.peer_langgraph --events 1000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

EVENTS = int(os.environ.get("OUTLAST_BENCH_EVENTS", "1000"))


class State(TypedDict, total=False):
    done: bool


async def stream(state: State) -> dict[str, Any]:
    write = get_stream_writer()
    for _ in range(EVENTS):
        write({"delta": f"@{time.time():.6f}+0"})
        await asyncio.sleep(0)
    write({"type": "RUN_FINISHED"})
    return {"done": True}


graph = StateGraph(State).add_node("stream", stream) \
    .add_edge(START, "stream").add_edge("stream", END).compile()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def announce(port: int) -> None:
    """Print bench.common's READY line once the server answers."""
    url = f"http://127.0.0.1:{port}/ok"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    print(f"outlast serving on http://127.0.0.1:{port}/", flush=True)
                    return
        except OSError:
            time.sleep(0.1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=int, default=1000)
    events = p.parse_args().events
    os.environ["OUTLAST_BENCH_EVENTS"] = str(events)
    from langgraph_api.cli import run_server

    port = free_port()
    threading.Thread(target=announce, args=(port,), daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="outlast-langgraph-") as tmp:
        os.chdir(tmp)  # the in-memory runtime keeps its files in the working directory
        run_server("127.0.0.1", port, reload=False,
                   graphs={"bench": f"{Path(__file__).resolve()}:graph"},
                   open_browser=False, server_level="WARNING")


if __name__ == "__main__":
    main()
