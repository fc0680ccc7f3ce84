"""An ``outlast serve`` on a fixed port that a shell command can kill and start again
on the same data directory: what ``outlast check --restart-cmd`` needs.

``start(state, cmd, port)`` starts it and writes ``state`` (a JSON file: the
pid, the command, the log); ``python -m tests.support.restartable restart STATE`` kills
it with SIGKILL (no cleanup of any kind), waits until its port is free, starts the same
command again and returns once the new process answers; ``stop(state)`` ends it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def _spawn(cmd: list[str], log: Path) -> int:
    out = open(log, "a")  # the child keeps it
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out.close()
    return proc.pid


def _ready(port: int, timeout: float = 30.0) -> None:
    """Until the server answers HTTP (any status: not every server has /healthz)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"outlast serve on port {port} did not answer in {timeout:g} s")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def outlast_serve(data_dir: Path, port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "outlast.cli.main", "serve", "--port", str(port),
            "--data-dir", str(data_dir), *args]


def start(state: Path, cmd: list[str], port: int) -> None:
    """Start ``cmd`` (a server listening on ``port``) and note it in ``state``."""
    log = state.with_suffix(".log")
    state.write_text(json.dumps({"pid": _spawn(cmd, log), "cmd": cmd, "port": port,
                                 "log": str(log)}))
    _ready(port)


def restart(state: Path) -> None:
    info = json.loads(state.read_text())
    try:
        os.kill(info["pid"], signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while not _port_free(info["port"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    info["pid"] = _spawn(info["cmd"], Path(info["log"]))
    state.write_text(json.dumps(info))
    _ready(info["port"])


def stop(state: Path) -> None:
    info = json.loads(state.read_text())
    try:
        os.kill(info["pid"], signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{info['pid']}/stat").exists() and \
                Path(f"/proc/{info['pid']}/stat").read_text().split()[2] == "Z":
            return
        time.sleep(0.1)
    os.kill(info["pid"], signal.SIGKILL)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "restart":
        sys.exit("usage: python -m tests.support.restartable restart STATE")
    restart(Path(sys.argv[2]))
