"""ChatAgent through outlast against reading the model server directly.

A scripted OpenAI-compatible server (``tests.support.fake_openai``, in its own
process) streams a reply at a fixed token rate. Direct: a client reads its
chat-completions stream itself. Through outlast: ``POST /agents/chat`` on a real
``outlast serve`` whose ChatAgent reads the same server, each token stored before
it is sent. Targets: first token no more than 20 ms later than direct (medians),
tokens per second at least 0.95 x direct; outlast's CPU time per token is reported.

    python -m bench.chat_agent [--quick]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import Server, client, fmt, median, parser, report

FIRST_TOKEN_TARGET_MS = 20.0
RATE_TARGET = 0.95


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def serve_model(tokens: int, rate: float) -> None:
    """The model server process: every request streams ``tokens`` words at ``rate``/s."""
    from tests.support.fake_openai import FakeOpenAI, Reply

    class Endless(list[Reply]):
        def pop(self, index: Any = -1) -> Reply:
            return Reply(text=" ".join(f"tok{i}" for i in range(tokens)))

        def __bool__(self) -> bool:
            return True

    fake = await FakeOpenAI(token_delay=1.0 / rate).start()
    fake.replies = Endless()
    print(f"outlast serving on {fake.url}", flush=True)
    await asyncio.Event().wait()


async def direct(c: httpx.AsyncClient, url: str, tokens: int) -> tuple[float, float]:
    """(first token seconds, tokens per second) reading the model server itself."""
    body = {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    seen = 0
    first = 0.0
    start = time.perf_counter()
    async with c.stream("POST", f"{url}/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: {") and '"content": "' in line \
                    and '"content": ""' not in line:
                seen += 1
                if seen == 1:
                    first = time.perf_counter() - start
    elapsed = time.perf_counter() - start
    if seen != tokens:
        raise RuntimeError(f"direct: {seen} tokens, expected {tokens}")
    return first, seen / elapsed


async def through(c: httpx.AsyncClient, tokens: int) -> tuple[float, float]:
    """(first token seconds, tokens per second) through ``POST /agents/chat``."""
    tag = uuid.uuid4().hex[:10]
    body = {"threadId": f"t-{tag}", "runId": f"r-{tag}", "protocolVersion": "1.0",
            "messages": [{"id": "u1", "role": "user", "content": "go"}],
            "tools": [], "context": [], "state": {}}
    seen = 0
    first = 0.0
    start = time.perf_counter()
    async with c.stream("POST", "/agents/chat", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and '"TEXT_MESSAGE_CONTENT"' in line:
                seen += 1
                if seen == 1:
                    first = time.perf_counter() - start
    elapsed = time.perf_counter() - start
    if seen != tokens:
        raise RuntimeError(f"outlast: {seen} tokens, expected {tokens}")
    return first, seen / elapsed


async def measure(model_url: str, outlast: Server, tokens: int, reps: int) -> dict[str, Any]:
    firsts: dict[str, list[float]] = {"direct": [], "outlast": []}
    rates: dict[str, list[float]] = {"direct": [], "outlast": []}
    async with client(outlast.url) as c, httpx.AsyncClient(timeout=60) as m:
        await through(c, tokens)  # warm up both paths
        await direct(m, model_url, tokens)
        cpu = 0.0
        for rep in range(reps):
            order = ["outlast", "direct"] if rep % 2 == 0 else ["direct", "outlast"]
            for path in order:
                if path == "outlast":
                    before = cpu_seconds(outlast.pid)
                    first, rate = await through(c, tokens)
                    cpu += cpu_seconds(outlast.pid) - before
                else:
                    first, rate = await direct(m, model_url, tokens)
                firsts[path].append(first)
                rates[path].append(rate)
    return {
        "first_token_ms": {k: median(v) * 1000 for k, v in firsts.items()},
        "tokens_per_s": {k: median(v) for k, v in rates.items()},
        "cpu_us_per_token": cpu / (reps * tokens) * 1e6,
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--serve-model", action="store_true", help=argparse_hidden())
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--rate", type=float, default=50.0, help="model tokens per second")
    ns = p.parse_args()
    if ns.quick:
        ns.tokens, ns.rate = 50, 100.0
    if ns.serve_model:
        asyncio.run(serve_model(ns.tokens, ns.rate))
        return
    reps = 3 if ns.quick else 7
    with tempfile.TemporaryDirectory(prefix="outlast-chat-bench-") as tmp:
        model = Server([sys.executable, "-m", "bench.chat_agent", "--serve-model",
                        "--tokens", str(ns.tokens), "--rate", str(ns.rate)]).start()
        try:
            os.environ["OUTLAST_OPENAI_BASE_URL"] = model.url
            os.environ["OUTLAST_OPENAI_MODEL"] = "fake"
            with Server.outlast(Path(tmp), "--agent",
                                "chat=outlast.agents.openai:factory") as outlast:
                results = asyncio.run(measure(model.url, outlast, ns.tokens, reps))
        finally:
            model.stop()
    ft, tps = results["first_token_ms"], results["tokens_per_s"]
    over = ft["outlast"] - ft["direct"]
    ratio = tps["outlast"] / tps["direct"]
    results.update(first_token_over_direct_ms=over, rate_ratio=ratio,
                   tokens=ns.tokens, rate=ns.rate, reps=reps)
    rows = [
        ("measure", "direct", "through outlast", "target", "met"),
        ("first token (median)", fmt(ft["direct"], " ms", 1), fmt(ft["outlast"], " ms", 1),
         f"≤ direct + {FIRST_TOKEN_TARGET_MS:.0f} ms",
         "yes" if over <= FIRST_TOKEN_TARGET_MS else "NO"),
        ("tokens/s (median)", fmt(tps["direct"], "", 1), fmt(tps["outlast"], "", 1),
         f"≥ {RATE_TARGET} x direct", "yes" if ratio >= RATE_TARGET else "NO"),
        ("outlast CPU per token", "", fmt(results["cpu_us_per_token"], " µs"), "", ""),
    ]
    report(f"chat agent ({ns.tokens} tokens at {ns.rate:g}/s, {reps} reps)", results,
           rows, ns.json)
    print(json.dumps({"first_token_over_direct_ms": round(over, 1),
                      "rate_ratio": round(ratio, 3)}))


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
