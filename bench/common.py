"""What every bench shares: a server subprocess, an SSE reader, medians, reporting."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from outlast.store.base import AdmitResult, RunRecord

ROOT = Path(__file__).resolve().parent.parent
READY = "outlast serving on "


@dataclass
class Server:
    """A server subprocess on 127.0.0.1 (``bench.server`` or a real ``outlast serve``)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to this process's
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    log: list[str] = field(default_factory=list)

    @classmethod
    def bench(cls, data_dir: Path, synchronous: str = "FULL") -> Server:
        return cls([sys.executable, "-m", "bench.server", "--data-dir", str(data_dir),
                    "--synchronous", synchronous])

    @classmethod
    def outlast(cls, data_dir: Path, *args: str) -> Server:
        return cls([sys.executable, "-m", "outlast.cli.main", "serve", "--port", "0",
                    "--data-dir", str(data_dir), *args])

    def start(self, timeout: float = 30.0) -> Server:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line.rstrip())
                if line.startswith(READY):
                    self.url = line[len(READY):].strip().rstrip("/")
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout):
            self.stop()
            raise RuntimeError("server did not start:\n" + "\n".join(self.log[-40:]))
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(120.0))


@dataclass
class StreamStats:
    """One SSE response as the client saw it."""

    status: int
    frames: int  # data frames (stored and synthesized)
    nbytes: int
    elapsed: float  # request start to end of stream (or to the first id frame)
    first_id: float | None  # request start to the first frame carrying an id
    headers: dict[str, str]


async def read_stream(c: httpx.AsyncClient, method: str, url: str, *,
                      until_first_id: bool = False, **kwargs: Any) -> StreamStats:
    """Read an SSE response counting frames without parsing events (the client must not
    be the bottleneck); with ``until_first_id``, hang up at the first stored event."""
    frames = nbytes = 0
    first_id: float | None = None
    tail = b""
    start = time.perf_counter()
    async with c.stream(method, url, **kwargs) as resp:
        async for chunk in resp.aiter_raw():
            nbytes += len(chunk)
            data = tail + chunk
            frames += data.count(b"\ndata: ") - tail.count(b"\ndata: ")
            if first_id is None and b"\nid: " in data:
                first_id = time.perf_counter() - start
                if until_first_id:
                    break
            tail = data[-8:]
        elapsed = time.perf_counter() - start
        return StreamStats(resp.status_code, frames, nbytes, elapsed, first_id,
                           dict(resp.headers))


async def alternating(steps: Mapping[str, Callable[[], Awaitable[Sequence[float]]]],
                      parts: Sequence[str], reps: int, warm: int) -> dict[str, Any]:
    """Each case's step ``warm`` times, then ``reps`` times with the cases alternating
    (so drift hits them alike); each step returns one sample per part. The samples,
    by case and part."""
    for _ in range(warm):
        for step in steps.values():
            await step()
    out: dict[str, Any] = {case: {part: [] for part in parts} for case in steps}
    for _ in range(reps):
        for case, step in steps.items():
            for part, sample in zip(parts, await step(), strict=True):
                out[case][part].append(sample)
    return out


def started_run(admitted: AdmitResult) -> RunRecord:
    """The run an admission created, as ``Engine.admit`` leaves it on a free thread:
    leased to the admitting engine and started by its claim (``RUN_STARTED`` logged)."""
    [run] = [r for r in admitted.claimed if r.rid == admitted.run.rid]
    assert run.status == "running" and run.last_seq == 1, run
    return run


@contextlib.contextmanager
def postgres_cluster() -> Iterator[tuple[Any, str]]:
    """A durable throwaway PostgreSQL cluster (``tests/support/postgres.py``) for the
    block, or None with the reason a bench skips PostgreSQL."""
    from tests.support.postgres import PostgresCluster, PostgresUnavailable, find_bindir

    if find_bindir() is None:
        yield None, "PostgreSQL: skipped (no initdb/postgres binaries found)"
        return
    try:
        cluster = PostgresCluster.start_new(durable=True)
    except PostgresUnavailable as exc:
        yield None, f"PostgreSQL: skipped ({exc})"
        return
    try:
        yield cluster, ""
    finally:
        cluster.stop()


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p10_p90(values: Sequence[float], digits: int = 2) -> str:
    """The 10th to the 90th percentile of ``values``, as ``a-b``."""
    v = sorted(values)
    return f"{v[len(v) // 10]:.{digits}f}-{v[(len(v) * 9) // 10]:.{digits}f}"


def median_p10_p90(values: Sequence[float], digits: int = 2) -> str:
    """The median of ``values`` with its 10th to 90th percentiles, as ``m (a-b)``."""
    return f"{median(values):.{digits}f} ({p10_p90(values, digits)})"


def spread(values: Sequence[float]) -> tuple[float, float]:
    return min(values), max(values)


def paired(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Two series measured turn by turn: the ratio of their medians and each turn's."""
    return {"ratio": median(a) / median(b),
            "pair_ratios": [x / y for x, y in zip(a, b, strict=True)]}


def paired_row(label: str, r: dict[str, Any], a: str, b: str,
               target: float) -> tuple[str, ...]:
    """A table row of ``paired`` series ``r[a]`` against ``r[b]``: medians with their
    ranges, the ratio with the range of the turns' ratios, and whether it meets
    ``target``."""
    lo, hi = spread(r[a])
    blo, bhi = spread(r[b])
    plo, phi = spread(r["pair_ratios"])
    return (label, f"{r['events']:,}", str(r["reps"]),
            f"{fmt(median(r[a]))} ({fmt(lo)}-{fmt(hi)})",
            f"{fmt(median(r[b]))} ({fmt(blo)}-{fmt(bhi)})",
            f"{r['ratio']:.2f} (pairs {plo:.2f}-{phi:.2f})",
            "yes" if r["ratio"] >= target else "NO")


def machine() -> str:
    """Cores, CPU model and Python, for the report."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores, {model or platform.processor()}, "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def machine_speed(repeat: int = 7) -> float:
    """Milliseconds one fixed piece of interpreter work takes on this machine now (median
    of ``repeat``; less is faster): what the event loop does per event, in miniature
    (building a dict, encoding it, a call, a list). A VM's speed moves with its host's
    other tenants, by 1.7x within one hour here, and every latency figure moves with it;
    the reports print this beside their tables so that runs can be compared."""
    from outlast.protocol.jsonutil import dumps

    def work() -> float:
        started = time.perf_counter()
        kept: list[str] = []
        for i in range(20_000):
            event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": str(i)}
            kept.append(dumps(event))
            if len(kept) > 64:
                kept.clear()
        return (time.perf_counter() - started) * 1e3

    return statistics.median(work() for _ in range(repeat))


def rss_mb(pid: int) -> float:
    """Resident set size of a process, from /proc (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def parser(description: str | None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="short smoke run")
    p.add_argument("--json", type=Path, help="also write the results here (run_all uses it)")
    return p


def report(name: str, results: dict[str, Any], rows: list[tuple[str, ...]],
           out: Path | None) -> None:
    """Print a bench's table; write its results for ``run_all``."""
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"\n== {name} ==")
    for i, row in enumerate(rows):
        print("  " + "  ".join(cell.ljust(width[j]) for j, cell in enumerate(row)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in width))
    if out is not None:
        out.write_text(json.dumps({"name": name, "results": results, "rows": rows}, indent=2))


def fmt(value: float, unit: str = "", digits: int = 0) -> str:
    return f"{value:,.{digits}f}{unit}"


async def finished_run(c: httpx.AsyncClient, events: int) -> tuple[str, int]:
    """Run the bench agent to the end through the durable path: ``(run_id, last seq)``."""
    from bench.agents import bench_input

    run_id = f"finished-{os.getpid()}-{time.monotonic_ns()}"
    stats = await read_stream(c, "POST", "/agents/bench",
                              json=bench_input(f"thread-{run_id}", run_id, events))
    if stats.status != 200:
        raise RuntimeError(f"POST /agents/bench answered {stats.status}")
    run = (await c.get(f"/runs/{run_id}")).json()
    if run["status"] != "succeeded":
        raise RuntimeError(f"the bench run ended {run['status']}")
    return run_id, int(run["lastSeq"])
