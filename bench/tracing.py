"""What OpenTelemetry tracing costs a durable stream.

Two bench servers, the same code, one with the standard ``OTEL_*`` variables sending its
spans (run, attempt, every group commit) over OTLP/HTTP to a sink on loopback that
accepts and drops them, one without (tracing off). The same durable route
(``POST /agents/bench``) on each, reps alternating; per rep the stream's events/s and
the server's CPU per event (utime + stime). Target: tracing on ≥ 0.9x off.

    python -m bench.tracing [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import Server, client, median, paired, paired_row, parser, report
from bench.loadclient import proc_cpu
from bench.stream_throughput import one

TARGET = 0.9
ROUTE = "/agents/bench"


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts every export and keeps nothing."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def measure(servers: dict[str, Server], events: int, reps: int,
                  yield_every: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    async with client(servers["on"].url) as con, client(servers["off"].url) as coff:
        clients = {"on": con, "off": coff}
        for state in ("on", "off"):  # warm up both
            await one(clients[state], ROUTE, min(events, 2000), yield_every)
        for rep in range(reps):
            for state in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                before = proc_cpu(servers[state].pid)
                rate, n = await one(clients[state], ROUTE, events, yield_every)
                cpu[state].append((proc_cpu(servers[state].pid) - before) / n * 1e6)
                rates[state].append(rate)
    return {"events": events, "reps": reps, "yield_every": yield_every, "on": rates["on"],
            "off": rates["off"], "cpu_on": cpu["on"], "cpu_off": cpu["off"],
            **paired(rates["on"], rates["off"])}


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    events = 5000 if quick else 20000
    reps = 3 if quick else 9
    sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_SERVICE_NAME": "outlast-bench"}
    results: dict[str, Any] = {}
    rows: list[tuple[str, ...]] = [
        ("case", "events/run", "reps", "traced ev/s median (min-max)",
         "untraced ev/s median (min-max)", "ratio", f"≥ {TARGET}",
         "server µs/event traced / untraced")]
    try:
        with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
            on = Server.bench(Path(tmp) / "on")
            on.env = otel
            with on, Server.bench(Path(tmp) / "off") as off:
                for yield_every in (1, 50):
                    r = await measure({"on": on, "off": off}, events, reps, yield_every)
                    key = f"yield_every={yield_every}"
                    results[key] = r
                    rows.append((*paired_row(key, r, "on", "off", TARGET),
                                 f"{median(r['cpu_on']):.1f} / {median(r['cpu_off']):.1f}"))
    finally:
        sink.shutdown()
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("what OpenTelemetry tracing costs a durable stream, one run, one client",
           results, rows, ns.json)


if __name__ == "__main__":
    main()
