"""Each framework host against the framework's own AG-UI endpoint, side by side in one
run, at a model's pace.

One paced model server (``bench.model_server``: 100 tokens at 50 tokens/s per request,
each token stamped with its send time) answers, for each framework, the same agent
served two ways:

- **the framework's own endpoint**, nothing stored: Pydantic AI's
  ``AGUIAdapter.dispatch_request`` in a Starlette route (``bench.peer_pydantic_ai``);
  ag-ui-langgraph's ``add_langgraph_fastapi_endpoint`` with an in-memory checkpointer
  (``bench.peer_ag_ui_langgraph``); Microsoft Agent Framework's
  ``add_agent_framework_fastapi_endpoint`` (``bench.peer_maf_endpoint``); Agno's
  ``AGUI`` interface router (``bench.peer_agno``, ``POST /agui``); ag-ui-adk's
  ``add_adk_fastapi_endpoint`` (``bench.peer_adk``); ag-ui-strands'
  ``add_strands_fastapi_endpoint`` (``bench.peer_strands``); each with its defaults;
- **through outlast**: ``outlast serve --agent host=outlast.agents.<framework>:factory``
  over the same agent (``bench.host_agents``; SQLite, synchronous FULL): every event
  stored before it is sent (G2), tool calls journaled, the run resumable.

ag-ui-langgraph and ``agent-framework-ag-ui`` require ``ag-ui-protocol`` 0.1, which this
project's 1.0 excludes: their endpoints run in another interpreter, named by
``$OUTLAST_BENCH_AGUI_LANGGRAPH_PYTHON`` and ``$OUTLAST_BENCH_MAF_PYTHON`` (one
virtualenv with ``ag-ui-langgraph langchain-openai agent-framework-ag-ui
agent-framework-openai uvicorn`` serves both); without one, that framework is skipped
with the reason.
The OpenAI Agents SDK has no AG-UI endpoint of its own.

Both endpoints get the same ``RunAgentInput`` from the raw load client
(``bench.loadclient``, this process) with 1, 10 and 100 runs at once; the levels
alternate between them. Measured per level: time from the request to the first token
(median), each run's tokens/s from its first to its last token (median), the emit →
receipt latency of every token (model send time to the client's read: p50, p99) and
the server process's CPU per token (the model server's own CPU is not counted).

Targets: through outlast, first token within +20 ms of the framework's own endpoint,
tokens/s ≥ 0.95x, and at 100 runs a p99 no worse than the framework's.

    python -m bench.hosts [--quick] [--framework NAME ...]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import Server, fmt, parser, report
from bench.loadclient import Record, percentile, proc_cpu, raise_nofile, rounds
from bench.peers import peer_python

RATE = 50.0
TOKENS = 100
LEVELS = {1: 5, 10: 3, 100: 2}  # runs at once: rounds
QUICK_LEVELS = {1: 3, 10: 2, 100: 1}
FIRST_TOKEN_SLACK_MS = 20.0
RATE_RATIO = 0.95


def run_input(tag: str) -> dict[str, Any]:
    return {"threadId": f"t-{tag}", "runId": f"r-{tag}",
            "messages": [{"id": f"u-{tag}", "role": "user", "content": "Stream."}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {}}


async def measure(server: Server, path: str, concurrency: int, count: int) -> dict[str, Any]:
    record = Record(marker=b"data: ")
    cpu0 = proc_cpu(server.pid)
    wall = await rounds(server.url, path, run_input, concurrency, count, record)
    cpu = proc_cpu(server.pid) - cpu0
    latency = sorted(record.latency)
    return {
        "runs": concurrency * count, "tokens": record.tokens, "wall_s": wall,
        "first_token_ms": statistics.median(record.first_token) * 1e3
        if record.first_token else float("nan"),
        "tokens_per_s": statistics.median(record.rates) if record.rates else float("nan"),
        "p50_ms": percentile(latency, 0.5) * 1e3, "p99_ms": percentile(latency, 0.99) * 1e3,
        "cpu_us_per_token": cpu / max(record.tokens, 1) * 1e6,
        "errors": record.errors[:5], "error_count": len(record.errors),
    }


@dataclass(frozen=True)
class Host:
    """One framework: its own AG-UI endpoint, and outlast's host over the same agent."""

    name: str
    peer: str  # the module serving the framework's own endpoint
    probe: str  # a module the peer's interpreter must have
    python_variable: str  # where another interpreter may be named
    packages: str  # what to install for the peer
    agent: str  # outlast's factory
    env: dict[str, str] = field(default_factory=dict)
    path: str = "/"  # the framework's endpoint on its server


HOSTS = [
    Host("Pydantic AI", "bench.peer_pydantic_ai", "pydantic_ai",
         "OUTLAST_BENCH_PYDANTIC_AI_PYTHON", "pydantic-ai-slim[openai]",
         "outlast.agents.pydantic_ai:factory",
         {"OUTLAST_PYDANTIC_AI_AGENT": "bench.host_agents:pydantic_agent"}),
    Host("LangGraph", "bench.peer_ag_ui_langgraph", "ag_ui_langgraph",
         "OUTLAST_BENCH_AGUI_LANGGRAPH_PYTHON", "ag-ui-langgraph langchain-openai",
         "outlast.agents.langgraph:factory",
         {"OUTLAST_LANGGRAPH_GRAPH": "bench.host_agents:langgraph_graph"}),
    Host("Microsoft Agent Framework", "bench.peer_maf_endpoint", "agent_framework_ag_ui",
         "OUTLAST_BENCH_MAF_PYTHON", "agent-framework-ag-ui agent-framework-openai",
         "outlast.agents.maf:factory", {"OUTLAST_MAF_AGENT": "bench.host_agents:maf_agent"}),
    Host("Google ADK", "bench.peer_adk", "ag_ui_adk", "OUTLAST_BENCH_ADK_PYTHON",
         "ag-ui-adk", "outlast.agents.adk:factory",
         {"OUTLAST_ADK_AGENT": "bench.host_agents:adk_agent"}),
    Host("Strands Agents", "bench.peer_strands", "ag_ui_strands",
         "OUTLAST_BENCH_STRANDS_PYTHON", "ag-ui-strands strands-agents",
         "outlast.agents.strands:factory",
         {"OUTLAST_STRANDS_AGENT": "bench.host_agents:strands_agent"}),
    Host("Agno", "bench.peer_agno", "agno.os.interfaces.agui", "OUTLAST_BENCH_AGNO_PYTHON",
         "agno fastapi", "outlast.agents.agno:factory",
         {"OUTLAST_AGNO_AGENT": "bench.host_agents:agno_agent"}, path="/agui"),
]


async def compare(host: Host, python: str, model_url: str, tmp: Path,
                  levels: dict[int, int]) -> dict[str, dict[int, dict[str, Any]]]:
    """The framework's own endpoint and outlast over the same agent, level by level."""
    os.environ.update(host.env)
    results: dict[str, dict[int, dict[str, Any]]] = {"own": {}, "outlast": {}}
    with Server([python, "-m", host.peer]) as own, \
            Server.outlast(tmp / host.name.replace(" ", "-"), "--agent",
                           f"host={host.agent}", "--max-connections", "4000") as outlast:
        endpoints = {"own": (own, host.path), "outlast": (outlast, "/agents/host")}
        for server, path in endpoints.values():  # warm-up: imports, connections
            await measure(server, path, 2, 1)
        for concurrency, count in levels.items():
            for name, (server, path) in endpoints.items():
                results[name][concurrency] = await measure(server, path, concurrency, count)
    return results


def verdicts(results: dict[str, dict[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    top = max(results["own"])
    out = {}
    for concurrency, base in results["own"].items():
        ours = results["outlast"][concurrency]
        out[concurrency] = {
            "first_token": ours["first_token_ms"] <= base["first_token_ms"]
            + FIRST_TOKEN_SLACK_MS,
            "tokens_per_s": ours["tokens_per_s"] >= RATE_RATIO * base["tokens_per_s"],
            "p99": ours["p99_ms"] <= base["p99_ms"] if concurrency == top else None,
        }
    return out


async def main_async(quick: bool, only: list[str] | None = None) -> dict[str, Any]:
    raise_nofile(4096)
    levels = QUICK_LEVELS if quick else LEVELS
    hosts: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="outlast-hosts-") as tmp, \
            Server([sys.executable, "-m", "bench.model_server", "--rate", str(RATE),
                    "--tokens", str(TOKENS)]) as model:
        os.environ["OUTLAST_OPENAI_BASE_URL"] = model.url
        for host in HOSTS:
            if only and host.name not in only:
                continue
            python, why = peer_python(host.probe, host.python_variable, host.packages)
            if python is None:
                skipped[host.name] = why
                continue
            results = await compare(host, python, model.url, Path(tmp), levels)
            hosts[host.name] = {"results": results, "verdicts": verdicts(results)}
    return {"rate": RATE, "tokens": TOKENS, "hosts": hosts, "skipped": skipped,
            "load": os.getloadavg()[0]}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--framework", action="append", choices=[h.name for h in HOSTS],
                   help="only this framework (repeatable; default: every one)")
    ns = p.parse_args()
    out = asyncio.run(main_async(ns.quick, ns.framework))
    rows: list[tuple[str, ...]] = [(
        "framework", "runs at once", "endpoint", "first token ms (median)",
        "tokens/s per run (median)", "emit→receipt p50 / p99 ms", "server CPU µs per token",
        "errors", "target met")]
    for framework, h in out["hosts"].items():
        for concurrency, verdict in h["verdicts"].items():
            for key, label in (("own", "its own AG-UI endpoint"), ("outlast", "through outlast")):
                r = h["results"][key][concurrency]
                met = ""
                if key == "outlast":
                    met = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items()
                                    if v is not None)
                rows.append((framework, str(concurrency), label,
                             fmt(r["first_token_ms"], digits=1), fmt(r["tokens_per_s"], digits=2),
                             f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}",
                             fmt(r["cpu_us_per_token"], digits=0), str(r["error_count"]), met))
    for framework, why in out["skipped"].items():
        rows.append((framework, "", "skipped", why, "", "", "", "", ""))
    print(f"load average: {out['load']:.2f}")
    report("framework hosts against the frameworks' own endpoints, at 50 tokens/s", out,
           rows, ns.json)


if __name__ == "__main__":
    main()
