"""``outlast check`` (docs/resumable-ag-ui.md §14), run as a person runs it: the real
CLI in a subprocess, against real servers. It passes outlast with the demo agent on
every check, restart included; it fails a plain AG-UI server that runs the agent
inside the request on every durability check, with evidence; it fails outlast started
with ``--on-disconnect cancel`` on ``survives-disconnect``. The document's wire
examples are what outlast sends."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import restartable
from tests.support.net import free_port
from tests.support.server import ServerProcess
from tests.support.wire_examples import DOC, blocks, examples

ROOT = Path(__file__).resolve().parents[2]
DOC_URL = "http://127.0.0.1:8765"


def doc_command(name: str) -> list[str]:
    """The command the document prints after ``<!-- check:NAME -->``."""
    found = re.search(rf"<!-- check:{name} -->\n```bash\n(.*?)\n```", DOC.read_text(), re.S)
    assert found, f"docs/resumable-ag-ui.md has no <!-- check:{name} --> block"
    return shlex.split(found.group(1))


def run_check(cmd: list[str], url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    """Run the document's command against ``url``; (exit status, --json report, stderr)."""
    assert cmd[:2] == ["outlast", "check"], cmd
    args = [a.replace(DOC_URL, url) for a in cmd[2:]]
    proc = subprocess.run([sys.executable, "-m", "outlast.cli.main", "check", *args,
                           *extra, "--json"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.returncode, report, proc.stderr


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


@pytest.fixture
def restartable_outlast(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """outlast on a fixed port, and the state file its --restart-cmd needs."""
    port = free_port()
    state = tmp_path / "server.json"
    restartable.start(state, restartable.outlast_serve(
        tmp_path / "data", port, "--lease-ttl", "2"), port)
    yield f"http://127.0.0.1:{port}", state
    restartable.stop(state)


def restart_cmd(state: Path) -> str:
    return f"{shlex.quote(sys.executable)} -m tests.support.restartable restart " \
           f"{shlex.quote(str(state))}"


def test_outlast_passes_every_check_even_across_a_kill(
        restartable_outlast: tuple[str, Path]) -> None:
    url, state = restartable_outlast
    code, report, err = run_check(doc_command("outlast"), url,
                                  "--restart-cmd", restart_cmd(state))
    assert statuses(report) == {c: "pass" for c in (
        "valid", "survives-disconnect", "progress-visible", "reattach", "retry-attaches",
        "busy-thread", "cancel", "interrupt-durable", "restart")}, json.dumps(report, indent=1)
    assert code == 0, err
    assert report["capabilities"]["transport"]["resumable"] is True
    assert all(c["section"].startswith("§") and c["evidence"] for c in report["checks"])


@pytest.fixture
def nondurable(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    state = tmp_path / "nondurable.json"
    restartable.start(state, [sys.executable, "-m", "tests.support.nondurable_agui",
                              "--port", str(port)], port)
    yield f"http://127.0.0.1:{port}", state
    restartable.stop(state)


def test_a_server_that_runs_the_agent_in_the_request_fails_each_durability_check(
        nondurable: tuple[str, Path]) -> None:
    url, state = nondurable
    code, report, _ = run_check(doc_command("outlast"), url,
                                "--restart-cmd", restart_cmd(state))
    assert code == 1
    assert report["capabilities"] is None  # it advertises nothing: checked for the core
    got = statuses(report)
    assert got["valid"] == "pass"  # its streams are good AG-UI; they are just not durable
    assert {k: v for k, v in got.items() if k != "valid"} == {c: "fail" for c in (
        "survives-disconnect", "progress-visible", "reattach", "retry-attaches",
        "busy-thread", "cancel", "interrupt-durable", "restart")}, json.dumps(report, indent=1)
    detail = {c["id"]: c["detail"] for c in report["checks"]}
    assert "ever saw the run complete" in detail["survives-disconnect"]
    assert "executed the agent" in detail["progress-visible"]
    assert "no integer SSE id" in detail["reattach"]
    assert "ran the agent again" in detail["retry-attaches"]
    assert "at once" in detail["busy-thread"]
    assert "404" in detail["cancel"]
    assert "never showed a pending interrupt" in detail["interrupt-durable"]
    for c in report["checks"]:
        if c["status"] == "fail":  # what was sent and what came back
            assert c["evidence"] and all("request" in e and "response" in e
                                         for e in c["evidence"]), c


def test_an_invalid_stream_fails_valid_naming_the_rule(nondurable: tuple[str, Path]) -> None:
    url, _ = nondurable
    code, report, _ = run_check(doc_command("outlast"), url, "--check", "valid",
                                "--forwarded-props", '{"broken": true}')
    assert code == 1
    [valid] = report["checks"]
    assert valid["status"] == "fail", valid
    assert "AGUI" in valid["detail"] and valid["evidence"][0]["findings"], valid


def test_outlast_that_cancels_on_disconnect_fails_survives_disconnect(
        server_factory: Any) -> None:
    srv: ServerProcess = server_factory("--on-disconnect", "cancel")
    cmd = doc_command("outlast")
    code, report, _ = run_check(cmd, f"{srv.url}", "--check", "survives-disconnect",
                                "--check", "cancel")
    assert code == 1
    assert statuses(report) == {"survives-disconnect": "fail", "cancel": "pass"}
    [failed] = [c for c in report["checks"] if c["status"] == "fail"]
    assert "ever saw the run complete" in failed["detail"]


def test_a_usage_mistake_is_one_line_and_status_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "outlast.cli.main", "check", "localhost:1"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "http://" in proc.stderr


async def test_the_documents_wire_examples_are_what_outlast_sends(
        server: ServerProcess) -> None:
    async with server.client() as c:
        made = await examples(c)
    shown = blocks(DOC.read_text())
    assert set(shown) == set(made)
    for name, text in made.items():
        assert shown[name] == text, f"wire example {name!r} differs from what outlast " \
            "sends; after a deliberate change run: python -m tests.support.wire_examples"
