"""Run every benchmark, each in its own process, and print their tables and a summary.

    python bench/run_all.py            # the full run (about 20 minutes on 2 cores)
    python bench/run_all.py --quick    # a short smoke run (a few minutes)
    python bench/run_all.py --markdown # also print the tables as Markdown
    python bench/run_all.py --plots docs/perf  # also write the charts of soak and reattach

Each bench also runs alone: ``python -m bench.<name> [--quick]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ["stream_throughput", "validation", "tracing", "replay", "reattach", "snapshot", "commit",
           "log_layout", "history", "resend", "memory", "latency", "model_pace", "peers", "hosts",
           "chat_agent", "soak"]
# Where a bench writes its charts, given a directory.
PLOTS = {"soak": lambda d: ["--plot", str(d / "soak-rss.svg")],
         "reattach": lambda d: ["--plot-dir", str(d)]}
# Benches that print their own report (no --json): restart after a crash, PostgreSQL.
REPORTING = ["bench_restart", "bench_postgres"]


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables too")
    parser.add_argument("--only", action="append", choices=BENCHES + REPORTING,
                        help="run just these")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="write the charts of the benches that draw them here")
    ns = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench.common import machine, machine_speed

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    print(f"machine: {machine()}")
    print(f"load average before: {os.getloadavg()[0]:.2f}; "
          f"machine speed: {machine_speed():.1f} ms (bench.common.machine_speed)")
    reports = []
    failed = []
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        for name in ns.only or BENCHES + REPORTING:
            if name in REPORTING:
                cmd = [sys.executable, "-m", f"bench.{name}", *(["--quick"] if ns.quick else [])]
                t0 = time.monotonic()
                if subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode != 0:
                    failed.append(name)
                print(f"  ({name}: {time.monotonic() - t0:.1f} s)")
                continue
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, "-m", f"bench.{name}", "--json", str(out)]
            if ns.quick:
                cmd.append("--quick")
            if ns.plots and name in PLOTS:
                cmd += PLOTS[name](ns.plots.resolve())
            t0 = time.monotonic()
            done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
            print(f"  ({name}: {time.monotonic() - t0:.1f} s)")
            if done.returncode != 0 or not out.exists():
                failed.append(name)
                continue
            reports.append(json.loads(out.read_text()))
    print(f"\nload average after: {os.getloadavg()[0]:.2f}; "
          f"machine speed: {machine_speed():.1f} ms")
    print(f"total: {time.monotonic() - started:.1f} s{' (quick)' if ns.quick else ''}")
    if ns.markdown:
        for r in reports:
            for table in [r, *r.get("tables", [])]:  # a bench may print several tables
                print(f"\n### {table['name']}\n\n{markdown(table['rows'])}")
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
