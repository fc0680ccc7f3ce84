"""Each framework host against the framework's own AG-UI endpoint, side by side in one
run, at a model's pace.

One paced model server (``bench.model_server``: 100 tokens at 50 tokens/s per request,
each token stamped with its send time) answers both:

- **the framework's own endpoint**: Pydantic AI's ``AGUIAdapter.dispatch_request`` in
  a Starlette app (``bench.peer_pydantic_ai``), nothing stored;
- **through outlast**: ``outlast serve --agent pai=outlast.agents.pydantic_ai:factory``
  over the same ``pydantic_ai.Agent`` (SQLite, synchronous FULL): every event stored
  before it is sent (G2), tool calls journaled, the run resumable.

Both get the same ``RunAgentInput`` from the raw load client (``bench.loadclient``, this
process) with 1, 10 and 100 runs at once. Measured per level: time from the request to
the first token (median), each run's tokens/s from its first to its last token
(median), the emit → receipt latency of every token (model send time to the client's
read: p50, p99) and the server process's CPU per token (the model server's own CPU is
not counted). The levels alternate between the two endpoints.

Targets: through outlast, first token within +20 ms of the framework's own endpoint,
tokens/s ≥ 0.95x, and at 100 runs a p99 no worse than the framework's.

The OpenAI Agents SDK has no AG-UI endpoint of its own to compare with; LangGraph's
(``ag-ui-langgraph``) and Microsoft Agent Framework's (``agent-framework-ag-ui``) are
not dependencies of this project: ``bench.peers`` measures what is installed of them.

    python -m bench.hosts [--quick]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Server, fmt, parser, report
from bench.loadclient import Record, percentile, proc_cpu, raise_nofile, rounds

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


async def main_async(quick: bool) -> dict[str, Any]:
    raise_nofile(4096)
    levels = QUICK_LEVELS if quick else LEVELS
    results: dict[str, dict[int, dict[str, Any]]] = {"own": {}, "outlast": {}}
    with tempfile.TemporaryDirectory(prefix="outlast-hosts-") as tmp, \
            Server([sys.executable, "-m", "bench.model_server", "--rate", str(RATE),
                    "--tokens", str(TOKENS)]) as model:
        os.environ["OUTLAST_OPENAI_BASE_URL"] = model.url
        os.environ["OUTLAST_PYDANTIC_AI_AGENT"] = "bench.host_agents:pydantic_agent"
        with Server([sys.executable, "-m", "bench.peer_pydantic_ai"]) as own, \
                Server.outlast(Path(tmp) / "data", "--agent",
                               "pai=outlast.agents.pydantic_ai:factory",
                               "--max-connections", "4000") as outlast:
            endpoints = {"own": (own, "/"), "outlast": (outlast, "/agents/pai")}
            for server, path in endpoints.values():  # warm-up: imports, connections, JIT
                await measure(server, path, 2, 1)
            for concurrency, count in levels.items():
                for name, (server, path) in endpoints.items():
                    results[name][concurrency] = await measure(server, path, concurrency,
                                                               count)
    verdicts = {}
    for concurrency in levels:
        base, ours = results["own"][concurrency], results["outlast"][concurrency]
        verdicts[concurrency] = {
            "first_token": ours["first_token_ms"] <= base["first_token_ms"]
            + FIRST_TOKEN_SLACK_MS,
            "tokens_per_s": ours["tokens_per_s"] >= RATE_RATIO * base["tokens_per_s"],
            "p99": ours["p99_ms"] <= base["p99_ms"] if concurrency == max(levels) else None,
        }
    return {"rate": RATE, "tokens": TOKENS, "results": results, "verdicts": verdicts,
            "load": os.getloadavg()[0]}


def main() -> None:
    ns = parser(__doc__).parse_args()
    out = asyncio.run(main_async(ns.quick))
    rows: list[tuple[str, ...]] = [(
        "runs at once", "endpoint", "first token ms (median)", "tokens/s per run (median)",
        "emit→receipt p50 / p99 ms", "server CPU µs per token", "errors", "target met")]
    names = {"own": "Pydantic AI's own AG-UI endpoint", "outlast": "through outlast"}
    for concurrency, verdict in out["verdicts"].items():
        for key in ("own", "outlast"):
            r = out["results"][key][concurrency]
            met = ""
            if key == "outlast":
                met = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in verdict.items()
                                if v is not None)
            rows.append((str(concurrency), names[key], fmt(r["first_token_ms"], digits=1),
                         fmt(r["tokens_per_s"], digits=2),
                         f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}",
                         fmt(r["cpu_us_per_token"], digits=0), str(r["error_count"]), met))
    print(f"load average: {out['load']:.2f}")
    report("framework hosts against the frameworks' own endpoints, at 50 tokens/s", out,
           rows, ns.json)


if __name__ == "__main__":
    main()
