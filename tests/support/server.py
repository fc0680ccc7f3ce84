"""Start real ``outlast serve`` processes on loopback and talk to them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

READY_PREFIX = "outlast serving on "


@dataclass
class ServerProcess:
    """One ``outlast serve`` subprocess; its stderr is kept for failure reports."""

    data_dir: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    log: list[str] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)  # e.g. ["ip", "netns", "exec", NS]
    # A command exactly as a document prints it (port and data dir then come from
    # OUTLAST_PORT and OUTLAST_DATA_DIR), run in ``cwd``.
    command: list[str] | None = None
    cwd: Path | None = None

    def start(self, timeout: float = 45.0) -> ServerProcess:
        cmd = [*self.prefix, sys.executable, "-m", "outlast.cli.main", "serve", "--port", "0",
               "--data-dir", str(self.data_dir), *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        if self.command is not None:
            cmd = self.command
            env.update(OUTLAST_PORT="0", OUTLAST_DATA_DIR=str(self.data_dir))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=self.cwd)
        ready = threading.Event()

        def pump_stdout() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.log.append(line.rstrip())
                if line.startswith(READY_PREFIX):
                    self.url = line[len(READY_PREFIX):].strip().rstrip("/")
                    ready.set()

        def pump_stderr() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line.rstrip())

        threading.Thread(target=pump_stdout, daemon=True).start()
        threading.Thread(target=pump_stderr, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.is_set():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("outlast serve did not start:\n" + "\n".join(self.log))
            ready.wait(0.05)
        return self

    @property
    def effects_log(self) -> Path:
        return self.data_dir / "workspace" / "effects.log"

    def effects(self) -> list[str]:
        """Lines of the demo agent's ``effects.log``."""
        if not self.effects_log.exists():
            return []
        return self.effects_log.read_text().splitlines()

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no cleanup of any kind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(30.0), **kwargs)


def demo_input(thread_id: str, run_id: str, text: str = "do the work", *,
               messages: list[dict[str, Any]] | None = None, **knobs: Any) -> dict[str, Any]:
    """A RunAgentInput for the demo agent with fast default knobs."""
    pace = {"steps": 3, "step_delay_ms": 50, "tokens_per_message": 4, "token_delay_ms": 5}
    pace.update(knobs)
    return {
        "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
        "messages": messages if messages is not None else
        [{"id": f"user-{run_id}", "role": "user", "content": text}],
        "state": {}, "tools": [], "context": [], "forwardedProps": {"demo": pace},
    }


@dataclass
class Frame:
    """One SSE frame: its ``id`` (None when synthesized) and the event."""

    id: int | None
    event: dict[str, Any]


def parse_sse(text: str) -> list[Frame]:
    """All data frames of an SSE body (comments and retry lines skipped)."""
    frames: list[Frame] = []
    for block in text.split("\n\n"):
        seq: int | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("id: "):
                seq = int(line[4:])
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            frames.append(Frame(seq, json.loads("\n".join(data))))
    return frames


async def collect(client: httpx.AsyncClient, method: str, url: str, *,
                  limit: int | None = None, **kwargs: Any) -> tuple[httpx.Response, list[Frame]]:
    """Read an SSE response to its end (or ``limit`` frames, then drop the connection)."""
    frames: list[Frame] = []
    async with client.stream(method, url, **kwargs) as resp:
        if resp.status_code >= 400:
            await resp.aread()
            return resp, []
        async with aclosing(sse_frames(resp)) as stream:
            async for frame in stream:
                frames.append(frame)
                if limit is not None and len(frames) >= limit:
                    return resp, frames
    return resp, frames


async def sse_frames(resp: httpx.Response) -> AsyncGenerator[Frame, None]:
    """The data frames of a streamed SSE response, each as soon as its block is complete."""
    buf = ""
    async for chunk in resp.aiter_text():
        buf += chunk
        while "\n\n" in buf:
            block, buf = buf.split("\n\n", 1)
            for frame in parse_sse(block + "\n\n"):
                yield frame


async def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll an async predicate until it returns something truthy."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)
