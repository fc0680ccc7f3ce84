"""A raw SSE load client: thousands of streams in one process, cheap enough not to be
what is measured.

Each run is one ``POST`` on its own connection (asyncio ``Protocol``, HTTP/1.1 with
``Connection: close``, so the end of the response is the end of the connection). The
body is never decoded: the client counts frames (``\\nid: ``), notes when the first
stored event arrived, and reads the stamps of the paced agent's content deltas
(``bench.agents.stamp``: ``"delta":"@<emit time>+<lag µs>"``) straight from the bytes,
with one clock reading per ``data_received``.

Two ways to drive it:

- ``rounds`` (in process, ``bench.latency``): C runs at once, R times; every latency
  recorded.
- ``pace`` (``python -m bench.loadclient pace ...``, a subprocess of ``bench.model_pace``):
  N runs started evenly over a ramp, recorded only inside a window of wall-clock time;
  prints one JSON line with a latency histogram (10 µs buckets) that several client
  processes' results can be merged from.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MARK = b'"delta":"@'
FINISHED = b'"type":"RUN_FINISHED"'
BUCKET = 1e-5  # histogram resolution: 10 µs


@dataclass
class Record:
    """What the client saw, over all its streams (only while ``recording``)."""

    recording: bool = True
    latency: array[float] = field(default_factory=lambda: array("d"))  # emit → receipt, s
    lag: array[float] = field(default_factory=lambda: array("d"))  # schedule → emit, s
    first: list[float] = field(default_factory=list)  # sent → first stored event (always)
    first_token: list[float] = field(default_factory=list)  # sent → first stamped delta
    rates: list[float] = field(default_factory=list)  # each run's stamped deltas per second
    tokens: int = 0  # stamped deltas received
    frames: int = 0
    errors: list[str] = field(default_factory=list)
    # What starts a counted frame: a stored event's ``id:`` line (outlast, the no-store
    # twin); ``data: `` for servers that send no ids (bench.peers).
    marker: bytes = b"id: "
    # What ends a frame: servers that end lines with CRLF (the LangGraph dev server) end
    # frames with a blank CRLF line.
    frame_end: bytes = b"\n\n"


class Stream(asyncio.Protocol):
    """One SSE response, parsed as little as the measurement needs."""

    def __init__(self, request: bytes, record: Record) -> None:
        self.request = request
        self.record = record
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.head = b""
        self.status = 0
        self.tail = b""
        self.sent = 0.0
        self.first: float | None = None
        self.token_times: tuple[float, float] | None = None  # first and last stamped delta
        self.tokens = 0
        self.finished = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sent = time.time()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if not self.status:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.head[9:12])
            data, self.head = self.head[end + 4:], b""
            if self.status != 200:
                self.tail = data
                return
        buf = self.tail + data if self.tail else data
        rec = self.record
        cut = buf.rfind(rec.frame_end)
        if cut < 0:
            self.tail = buf
            return
        body, self.tail = buf[:cut], buf[cut + len(rec.frame_end):]
        frames = body.count(b"\n" + rec.marker) + body.startswith(rec.marker)
        if not frames:
            return
        if self.first is None:
            self.first = now - self.sent
            rec.first.append(self.first)  # in any case: runs start before a window
        if FINISHED in body:
            self.finished = True
        if not rec.recording:
            return
        rec.frames += frames
        i = body.find(MARK)
        if i >= 0:
            if self.token_times is None:
                self.token_times = (now, now)
                rec.first_token.append(now - self.sent)
            self.token_times = (self.token_times[0], now)
        while i >= 0:
            self.tokens += 1
            rec.tokens += 1
            j = i + 10
            plus = body.find(b"+", j)
            quote = body.find(b'"', plus)
            emitted = float(body[j:plus])
            rec.latency.append(now - emitted)
            rec.lag.append(int(body[plus + 1:quote]) * 1e-6)
            i = body.find(MARK, quote)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.token_times is not None and self.tokens > 1 and self.record.recording:
            first, last = self.token_times
            if last > first:
                self.record.rates.append((self.tokens - 1) / (last - first))
        if not self.done.done():
            self.done.set_result(None)

    def error(self) -> str | None:
        if self.status != 200:
            return f"status {self.status}: {self.tail[:200]!r}"
        if not self.finished:
            return "stream ended without RUN_FINISHED"
        return None


def request(url: str, path: str, body: dict[str, Any]) -> bytes:
    """The bytes of one ``POST`` with a JSON body, closing the connection after it."""
    host = urlsplit(url).netloc
    payload = json.dumps(body, separators=(",", ":")).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: text/event-stream\r\nConnection: close\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


async def open_stream(url: str, path: str, body: dict[str, Any], record: Record) -> Stream:
    """Connect and send; the returned stream's ``done`` resolves when it ends."""
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    proto = Stream(request(url, path, body), record)
    try:
        await loop.create_connection(lambda: proto, parts.hostname, parts.port)
    except OSError as exc:
        proto.status = -1
        proto.tail = str(exc).encode()
        proto.done.set_result(None)
    return proto


async def finish(streams: Iterable[Stream], record: Record, within: float) -> None:
    """Wait for every stream to end; each one that failed or hung is an error."""
    streams = list(streams)
    pending = [s.done for s in streams if not s.done.done()]
    if pending:
        await asyncio.wait(pending, timeout=within)
    for s in streams:
        if not s.done.done():
            record.errors.append(f"no end within {within:.0f} s")
            if s.transport is not None:
                s.transport.abort()
        elif (err := s.error()) is not None:
            record.errors.append(err)


def tag() -> str:
    return uuid.uuid4().hex[:12]


async def rounds(url: str, path: str, make_body: Any, concurrency: int, count: int,
                 record: Record, within: float = 300.0) -> float:
    """``count`` rounds of ``concurrency`` runs at once; returns the wall time (s)."""
    wall = 0.0
    for _ in range(count):
        start = time.perf_counter()
        streams = await asyncio.gather(*(open_stream(url, path, make_body(tag()), record)
                                         for _ in range(concurrency)))
        await finish(streams, record, within)
        wall += time.perf_counter() - start
    return wall


def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank)."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def histogram(values: Iterable[float]) -> dict[int, int]:
    """10 µs buckets: bucket index → count (mergeable across processes)."""
    return dict(Counter(int(v / BUCKET) for v in values))


def hist_percentile(hist: dict[int, int], q: float) -> float:
    """The q-quantile of a merged histogram, in seconds (bucket's upper edge)."""
    total = sum(hist.values())
    if not total:
        return float("nan")
    rank = q * (total - 1)
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen > rank:
            return (bucket + 1) * BUCKET
    return (max(hist) + 1) * BUCKET


def merge(hists: Iterable[dict[Any, int]]) -> dict[int, int]:
    out: Counter[int] = Counter()
    for h in hists:
        out.update({int(k): v for k, v in h.items()})
    return dict(out)


def raise_nofile(need: int) -> int:
    """Raise this process's open-file limit toward ``need`` (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, need))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def cpu_seconds() -> float:
    """CPU time of this process (user + system), seconds."""
    t = os.times()
    return t.user + t.system


def proc_cpu(pid: int) -> float:
    """CPU time of another process (utime + stime from /proc/<pid>/stat), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def pace(urls: list[str], path: str, runs: int, rate: float, events: int,
               t0: float, ramp: float, window: tuple[float, float],
               within: float, history: int = 0) -> dict[str, Any]:
    """Start ``runs`` paced runs evenly over ``ramp`` seconds from wall time ``t0``;
    record only between the wall times ``window``."""
    from bench.agents import paced_input

    record = Record(recording=False)
    streams: list[Stream] = []
    loop = asyncio.get_running_loop()

    async def toggle() -> dict[str, float]:
        await asyncio.sleep(max(0.0, window[0] - time.time()))
        record.recording = True
        cpu0, at0 = cpu_seconds(), time.time()
        await asyncio.sleep(max(0.0, window[1] - time.time()))
        record.recording = False
        return {"client_cpu": cpu_seconds() - cpu0, "window": time.time() - at0}

    toggler = loop.create_task(toggle())
    for i in range(runs):
        delay = t0 + ramp * i / runs - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        t = tag()
        streams.append(await open_stream(urls[i % len(urls)], path,
                                         paced_input(f"t-{t}", f"r-{t}", events, rate=rate,
                                                     history=history),
                                         record))
    late = max(0.0, time.time() - (t0 + ramp))  # the ramp itself fell behind
    measured = await toggler
    await finish(streams, record, within)
    return {"runs": runs, "frames": record.frames, "errors": record.errors[:20],
            "error_count": len(record.errors), "ramp_late": late, **measured,
            "latency": histogram(record.latency), "lag": histogram(record.lag),
            "first": histogram(record.first)}


def main() -> None:
    p = argparse.ArgumentParser(description="paced SSE load (one JSON line on stdout)")
    p.add_argument("mode", choices=["pace"])
    p.add_argument("--url", action="append", required=True)
    p.add_argument("--path", default="/agents/paced")
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--rate", type=float, default=30.0)
    p.add_argument("--events", type=int, required=True)
    p.add_argument("--t0", type=float, required=True, help="wall time of the first run")
    p.add_argument("--ramp", type=float, required=True)
    p.add_argument("--window", type=float, nargs=2, required=True, help="wall times")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--history", type=int, default=0, help="messages each input resends")
    ns = p.parse_args()
    raise_nofile(ns.runs + 256)
    result = asyncio.run(pace(ns.url, ns.path, ns.runs, ns.rate, ns.events, ns.t0, ns.ramp,
                              (ns.window[0], ns.window[1]), ns.timeout, ns.history))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
