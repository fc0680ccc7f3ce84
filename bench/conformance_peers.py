"""``outlast check`` against outlast's peers, side by side: each peer's own AG-UI
endpoint, and outlast hosting the same agent, measured against resumable AG-UI
(docs/resumable-ag-ui.md).

Each peer is installed in its own virtualenv under a cache directory (``--cache``,
default ``~/.cache/outlast/conformance-peers``; made once, reused) and serves the
same small agent (``bench.approval_agents``: answer; one tool, ``get_weather``, that
needs a person's approval, asked in the framework's own way) on the suite's fake
OpenAI-compatible model (``tests.support.fake_openai``, paced: every answer takes
about 2 s, so a run can be dropped, reattached and cancelled mid-way; asked about the
weather, it calls the tool):

- Pydantic AI's own AG-UI app (``AGUIAdapter``, ``bench.peer_pydantic_ai``);
- LangGraph through ``ag-ui-langgraph`` (``bench.peer_ag_ui_langgraph``);
- Microsoft Agent Framework's ``agent-framework-ag-ui`` endpoint, as it comes and with
  ``detached_runs`` (``bench.peer_maf_endpoint``);
- Google ADK through ``ag-ui-adk`` (``bench.peer_adk``);
- outlast hosting each of the same agents (``outlast serve --agent NAME=module:attr``,
  the framework's object itself), from this interpreter, on a data dir of its own.

Each server is started by a script in a temporary directory (``start.sh``: its
interpreter, environment and port, pinned; its process id in ``pid``), and
``restart.sh`` next to it kills that process with SIGKILL and runs ``start.sh`` again:
same port, same data dir. Each gets every check, ``outlast check URL --prompt ...
--forwarded-props '{}' --approval-prompt 'What is the weather in Paris?'
--approval-forwarded-props '{}' --approval-payload '{"approved": true}'
--restart-cmd DIR/restart.sh``; the table says, per check, pass or fail, and how each
failure showed.

    python -m bench.conformance_peers [--cache DIR] [--only NAME] [--reports DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import ROOT

CHECKS = ["valid", "survives-disconnect", "progress-visible", "reattach", "retry-attaches",
          "busy-thread", "cancel", "interrupt-durable", "restart"]
# The fake model echoes the prompt word by word: 45 words, 50 ms apart, about 2 s.
PROMPT = " ".join(["Tell me why a run of an agent should outlive the connection that "
                   "started it, and what a client should do when it comes back."] * 2)
TOKEN_DELAY = 0.05
# The fake model calls the agent's one tool (get_weather, approval required) when the
# prompt says "weather"; the answer is the binding's (§9: an approval's payload).
APPROVAL_PROMPT = "What is the weather in Paris?"
APPROVAL_PAYLOAD = {"approved": True}


@dataclass
class Peer:
    """One server under test: where it runs and what it serves."""

    name: str
    argv: list[str]  # after the interpreter
    venv: str | None = None  # a virtualenv of the cache, or None: this interpreter
    packages: str = ""
    version_of: str = ""  # the distribution whose version the table shows
    env: dict[str, str] = field(default_factory=dict)
    path: str = "/"  # the AG-UI endpoint's path on the server


OUTLAST = ["-m", "outlast.cli.main", "serve", "--port", "{port}", "--agent"]
PEERS = [
    Peer("Pydantic AI AG-UI app", ["-m", "bench.peer_pydantic_ai"], "pydantic-ai",
         "pydantic-ai-slim[openai,ag-ui] uvicorn starlette httpx", "pydantic-ai-slim"),
    Peer("LangGraph + ag-ui-langgraph", ["-m", "bench.peer_ag_ui_langgraph"], "langgraph",
         "ag-ui-langgraph langchain-openai langgraph uvicorn fastapi httpx",
         "ag-ui-langgraph"),
    Peer("agent-framework-ag-ui", ["-m", "bench.peer_maf_endpoint"], "maf",
         "agent-framework-ag-ui agent-framework-openai uvicorn httpx",
         "agent-framework-ag-ui"),
    Peer("agent-framework-ag-ui, detached_runs", ["-m", "bench.peer_maf_endpoint"], "maf",
         "agent-framework-ag-ui agent-framework-openai uvicorn httpx",
         "agent-framework-ag-ui", {"OUTLAST_BENCH_MAF_DETACHED": "1"}),
    Peer("Google ADK + ag-ui-adk", ["-m", "bench.peer_adk"], "adk",
         "ag-ui-adk google-adk>=2.13,<3 openai>=2.20,<4 uvicorn fastapi httpx", "ag-ui-adk"),
    Peer("outlast + Pydantic AI agent", [*OUTLAST, "host=bench.approval_agents:pydantic_agent"],
         version_of="outlast", path="/agents/host"),
    Peer("outlast + LangGraph graph", [*OUTLAST, "host=bench.approval_agents:langgraph_graph"],
         version_of="outlast", path="/agents/host"),
    Peer("outlast + Google ADK agent", [*OUTLAST, "host=bench.approval_agents:adk_agent"],
         version_of="outlast", path="/agents/host"),
    Peer("outlast + MAF agent", [*OUTLAST, "host=bench.approval_agents:maf_agent"],
         version_of="outlast", path="/agents/host"),
]


@contextmanager
def fake_model(token_delay: float) -> Iterator[str]:
    """The suite's fake OpenAI-compatible model (``tests.support.fake_openai``), paced,
    on a loop of its own in this process; yields its base URL."""
    from tests.support.fake_openai import FakeOpenAI

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    fake = FakeOpenAI(token_delay=token_delay)
    asyncio.run_coroutine_threadsafe(fake.start(), loop).result(30)
    try:
        yield fake.url
    finally:
        asyncio.run_coroutine_threadsafe(fake.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def python_of(peer: Peer, cache: Path) -> str:
    """The peer's interpreter, its virtualenv made and filled the first time."""
    if peer.venv is None:
        return sys.executable
    venv = cache / peer.venv
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.exists() or marker.read_text() != peer.packages:
        print(f"installing {peer.packages} in {venv} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *peer.packages.split()],
                       check=True)
        marker.write_text(peer.packages)
    return str(python)


def version(python: str, dist: str) -> str:
    out = subprocess.run([python, "-c", "import importlib.metadata as m, sys; "
                          "print(m.version(sys.argv[1]))", dist],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or "?"


def check(url: str, restart_cmd: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "outlast.cli.main", "check", url, "--prompt", PROMPT,
            "--forwarded-props", "{}", "--approval-prompt", APPROVAL_PROMPT,
            "--approval-forwarded-props", "{}", "--approval-payload",
            json.dumps(APPROVAL_PAYLOAD), "--restart-cmd", restart_cmd, "--json"]
    for c in CHECKS:
        args += ["--check", c]
    out = subprocess.run(args, capture_output=True, text=True, check=False, cwd=ROOT,
                         timeout=1200)
    try:
        report: dict[str, Any] = json.loads(out.stdout)
    except ValueError:
        return {"error": (out.stdout + out.stderr)[-500:]}
    return report


PORT_WAIT = """import socket, sys, time
port, want = int(sys.argv[1]), sys.argv[2] == "up"
for _ in range(1200):
    with socket.socket() as s:
        up = s.connect_ex(("127.0.0.1", port)) == 0
    if up == want:
        sys.exit(0)
    time.sleep(0.05)
sys.exit(f"port {port} not {sys.argv[2]} after 60 s")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Launched:
    """A server started by ``start.sh`` in ``tmp``, killed -9 and started again the same
    way (same port, environment and data dir) by ``restart.sh``: the command the checker
    gets as ``--restart-cmd``. ``pid`` holds the live process's id."""

    tmp: Path
    port: int

    @property
    def restart_cmd(self) -> str:
        return str(self.tmp / "restart.sh")

    def stop(self) -> None:
        pid = int((self.tmp / "pid").read_text())
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        ok = subprocess.run([sys.executable, str(self.tmp / "port.py"), str(self.port),
                             "down"], check=False)
        if ok.returncode != 0:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def launched(argv: list[str], env: dict[str, str], port: int) -> Iterator[Launched]:
    with tempfile.TemporaryDirectory(prefix="outlast-peer-") as name:
        tmp = Path(name)
        (tmp / "port.py").write_text(PORT_WAIT)
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
        (tmp / "start.sh").write_text(
            f"#!/bin/sh\ncd {shlex.quote(str(ROOT))}\n{exports}"
            f"setsid {shlex.join(argv)} >> {tmp}/server.log 2>&1 < /dev/null &\n"
            f"echo $! > {tmp}/pid\n"
            f"exec {shlex.quote(sys.executable)} {tmp}/port.py {port} up\n")
        (tmp / "restart.sh").write_text(
            f"#!/bin/sh\nkill -9 \"$(cat {tmp}/pid)\"\n"
            f"{shlex.quote(sys.executable)} {tmp}/port.py {port} down || exit 1\n"
            f"exec {tmp}/start.sh\n")
        for script in ("start.sh", "restart.sh"):
            (tmp / script).chmod(0o755)
        server = Launched(tmp, port)
        started = subprocess.run([str(tmp / "start.sh")], check=False)
        try:
            if started.returncode != 0:
                log = (tmp / "server.log").read_text(errors="replace")
                raise RuntimeError(f"server did not start: {log[-400:]}")
            yield server
        finally:
            server.stop()


def short(detail: str) -> str:
    """A failure's detail in a table cell: without the server's origin or the checker's
    ids, cut at 150 characters."""
    detail = re.sub(r"https?://[^/\s]+", "", detail).replace("|", "/")
    detail = re.sub(r"'?chk-[\w-]+'?", "…", detail)
    return detail if len(detail) <= 150 else detail[:150].rsplit(" ", 1)[0] + " …"


def row(peer: Peer, ver: str, report: dict[str, Any]) -> str:
    if "error" in report:
        return f"| {peer.name} | {ver} | " + " | ".join("—" for _ in CHECKS) + \
            f" | the checker failed: {report['error'][:120]} |"
    got = {c["id"]: c for c in report["checks"]}
    marks = [{"pass": "pass", "fail": "**fail**", "skip": "skip"}[got[c]["status"]]
             for c in CHECKS]
    details = {c: short(got[c]["detail"]) for c in CHECKS if got[c]["status"] == "fail"}
    if "approval run" in details.get("restart", ""):
        # restart raises an approval first (§10: it must survive too); failing there,
        # it never ran the restart command.
        marks[CHECKS.index("restart")] = "**fail** (at its approval, before the kill)"
        details["restart"] = "never killed the server: the approval it raises first " + (
            "failed as in interrupt-durable" if got["interrupt-durable"]["detail"]
            == got["restart"]["detail"] else f"failed: {details['restart']}")
    how = "; ".join(f"{c}: {d}" for c, d in details.items())
    return f"| {peer.name} | {ver} | " + " | ".join(marks) + f" | {how or '—'} |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=Path,
                   default=Path.home() / ".cache" / "outlast" / "conformance-peers")
    p.add_argument("--only", action="append", help="only the peers whose name has this")
    p.add_argument("--reports", type=Path, help="write each peer's --json report here")
    ns = p.parse_args()
    ns.cache.mkdir(parents=True, exist_ok=True)
    peers = [x for x in PEERS if not ns.only or any(o in x.name for o in ns.only)]
    rows = []
    with fake_model(TOKEN_DELAY) as model_url, ExitStack() as stack:
        for peer in peers:
            try:
                python = python_of(peer, ns.cache)
            except subprocess.CalledProcessError as exc:
                rows.append(f"| {peer.name} | — | not installed: {exc} |")
                continue
            ver = version(python, peer.version_of)
            port = free_port()
            env = {"OUTLAST_OPENAI_BASE_URL": model_url, "OUTLAST_BENCH_APPROVAL": "1",
                   "OUTLAST_BENCH_PORT": str(port), "PYTHONUNBUFFERED": "1",
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   **peer.env}
            argv = [python, *(a.format(port=port) for a in peer.argv)]
            if "serve" in peer.argv:  # outlast: a data dir of its own, kept by restarts
                data = Path(stack.enter_context(tempfile.TemporaryDirectory(
                    prefix="outlast-data-")))
                argv += ["--data-dir", str(data)]
            try:
                with launched(argv, env, port) as server:
                    report = check(f"http://127.0.0.1:{port}{peer.path}", server.restart_cmd)
            except RuntimeError as exc:
                report = {"error": str(exc)}
            if ns.reports is not None:
                ns.reports.mkdir(parents=True, exist_ok=True)
                name = "".join(c if c.isalnum() else "-" for c in peer.name)
                (ns.reports / f"{name}.json").write_text(json.dumps(report, indent=1))
            rows.append(row(peer, ver, report))
            print(rows[-1], file=sys.stderr, flush=True)
    print("| server | version | " + " | ".join(CHECKS) + " | how failures showed |")
    print("|---|---|" + "---|" * len(CHECKS) + "---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
