"""Settings are declared once (flags, environment, help and checks all come from
``Settings``), and every startup mistake ends ``outlast serve`` with one line on
stderr and exit status 2 — never a traceback (spec §6)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from outlast.config import Settings, options
from tests.support.agents import AGENT_ENV, REPO_ROOT
from tests.support.server import collect, demo_input, wait_for
from tests.support.startup_targets import HOOK_LOG


def serve(data_dir: Path, *args: str, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    """``outlast serve`` that is expected to exit on its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OUTLAST_")}
    port = [] if "OUTLAST_PORT" in (env or {}) else ["--port", "0"]
    return subprocess.run(
        [sys.executable, "-m", "outlast.cli.main", "serve", *port,
         "--data-dir", str(data_dir), *args],
        capture_output=True, text=True, timeout=60, env={**clean, **AGENT_ENV, **(env or {})})


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "outlast serving on" not in done.stdout
    return lines[0]


# -- one declaration ----------------------------------------------------------------


def test_the_readme_lists_exactly_the_declared_flags() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"```\noutlast serve \[(.*?)```", readme, re.S)
    assert block is not None, "README.md has no `outlast serve [...]` block"
    in_readme = set(re.findall(r"\[(--[a-z-]+)", "[" + block.group(1)))
    declared = {opt.flag for opt in options()}
    assert in_readme == declared, {"missing from README": declared - in_readme,
                                   "not declared": in_readme - declared}


def test_help_names_meaning_unit_default_and_variable_even_with_a_bad_variable() -> None:
    done = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--help"],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "OUTLAST_PORT": "abc"})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for opt in options():
        assert opt.flag in text and opt.env in text
    assert "how long a run's lease lasts unrenewed" in text
    assert "(seconds; > 0; default 10; env OUTLAST_LEASE_TTL)" in text
    assert "0..65535; default 8765; env OUTLAST_PORT" in text
    assert "--crash-policy resume|fail" in text


def test_python_callers_build_settings_with_keywords(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTLAST_LEASE_TTL", "7")
    monkeypatch.setenv("OUTLAST_MULTITASK", "enqueue")
    monkeypatch.setenv("OUTLAST_CORS_ORIGINS", "https://a.example, https://b.example")
    settings = Settings(data_dir=tmp_path, lease_ttl=1.0, snapshot_hook=print)
    assert settings.lease_ttl == 1.0, "a keyword wins over the environment"
    assert settings.multitask == "enqueue", "the environment over the default"
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.workspace == tmp_path / "workspace"
    assert settings.snapshot_hook is print
    for bad in ({"lease_ttl": 0}, {"max_attempts": 0}, {"port": 65536},
                {"crash_policy": "bogus"}, {"snapshot_hook": 42}, {"no_such_setting": 1},
                {"body_timeout": float("inf")}):
        with pytest.raises(ValidationError):
            Settings(data_dir=tmp_path, **bad)
    monkeypatch.setenv("OUTLAST_SQLITE_SYNCHRONOUS", "OFF; DROP")
    with pytest.raises(ValidationError, match="'FULL' or 'NORMAL'"):
        Settings(data_dir=tmp_path)


# -- startup mistakes -----------------------------------------------------------------


BAD_VALUES: list[tuple[str, list[str], dict[str, str], tuple[str, ...]]] = [
    ("OUTLAST_CRASH_POLICY", [], {"OUTLAST_CRASH_POLICY": "bogus"},
     ("--crash-policy", "OUTLAST_CRASH_POLICY", "'resume' or 'fail'", "'bogus'")),
    ("OUTLAST_SQLITE_SYNCHRONOUS", [], {"OUTLAST_SQLITE_SYNCHRONOUS": "OFF; DROP"},
     ("--sqlite-synchronous", "OUTLAST_SQLITE_SYNCHRONOUS", "'FULL' or 'NORMAL'")),
    ("OUTLAST_PORT", [], {"OUTLAST_PORT": "abc"},
     ("--port", "OUTLAST_PORT", "valid integer", "0..65535")),
    ("OUTLAST_INSECURE", [], {"OUTLAST_INSECURE": "maybe"},
     ("--insecure", "OUTLAST_INSECURE", "valid boolean")),
    ("--lease-ttl -1", ["--lease-ttl", "-1"], {},
     ("--lease-ttl", "OUTLAST_LEASE_TTL", "greater than 0", "'-1'")),
    ("--lease-ttl soon", ["--lease-ttl", "soon"], {},
     ("--lease-ttl", "OUTLAST_LEASE_TTL", "valid number", "> 0")),
    ("--max-attempts 0", ["--max-attempts", "0"], {},
     ("--max-attempts", "OUTLAST_MAX_ATTEMPTS", "greater than or equal to 1")),
    ("--port 70000", ["--port", "70000"], {}, ("--port", "less than or equal to 65535")),
    ("--head-timeout nan", ["--head-timeout", "nan"], {},
     ("--head-timeout", "OUTLAST_HEAD_TIMEOUT", "finite")),
    ("two at once", ["--multitask", "sometimes"], {"OUTLAST_MAX_RUNS": "-5"},
     ("--multitask", "--max-runs", "OUTLAST_MAX_RUNS")),
    ("unknown flag", ["--lease-tll", "5"], {}, ("unrecognized arguments: --lease-tll",)),
    ("agent spec", ["--agent", "justaname"], {},
     ("--agent", "OUTLAST_AGENTS", "expected name=module:attr")),
    ("agent module", ["--agent", "x=nomodule:factory"], {},
     ("--agent", "OUTLAST_AGENTS", "no module named 'nomodule'", "--app-dir")),
    ("agent env", [], {"OUTLAST_AGENTS": "x=tests.support.startup_targets:missing"},
     ("OUTLAST_AGENTS", "has no attribute 'missing'")),
    ("agent factory raises", ["--agent", "x=tests.support.startup_targets:raising"], {},
     ("--agent", "tests.support.startup_targets:raising(settings) raised RuntimeError: "
      "no model configured: set MODEL_URL (tests/support/startup_targets.py, line")),
    ("agent is no agent", ["--agent", "x=tests.support.startup_targets:not_an_agent"], {},
     ("--agent", "returned a dict, not an agent", "a Pydantic AI Agent")),
    ("snapshot hook module", ["--snapshot-hook", "nomodule:hook"], {},
     ("--snapshot-hook", "OUTLAST_SNAPSHOT_HOOK", "no module named 'nomodule'")),
    ("snapshot hook attribute", [], {"OUTLAST_SNAPSHOT_HOOK": "json:no_such_hook"},
     ("--snapshot-hook", "OUTLAST_SNAPSHOT_HOOK", "no attribute 'no_such_hook'")),
    ("unknown store scheme", ["--store", "foo://bar"], {},
     ("--store", "OUTLAST_STORE", "unsupported store URL 'foo://bar'", "postgresql://")),
]


@pytest.mark.parametrize(("args", "env", "needles"), [case[1:] for case in BAD_VALUES],
                         ids=[case[0] for case in BAD_VALUES])
def test_a_bad_flag_or_variable_is_one_line_and_exit_2(
        tmp_path: Path, args: list[str], env: dict[str, str], needles: tuple[str, ...]) -> None:
    done = serve(tmp_path / "data", *args, env=env)
    assert_one_line_exit_2(done, *needles)


def test_a_flag_wins_over_its_bad_variable_and_the_snapshot_hook_is_called(
        server_factory: Any, tmp_path: Path) -> None:
    hook_log = tmp_path / "hook.jsonl"
    server = server_factory(
        "--crash-policy", "fail", "--snapshot-hook", "tests.support.startup_targets:"
        "record_snapshot", env={**AGENT_ENV, "OUTLAST_CRASH_POLICY": "bogus",
                                "OUTLAST_LOG_LEVEL": "DEBUG", HOOK_LOG: str(hook_log)})
    with httpx.Client(base_url=server.url, timeout=30) as c:
        resp = c.post("/agents/demo", json=demo_input("hook-t", "hook-r", steps=1))
        assert resp.status_code == 200

    async def recorded() -> list[dict[str, Any]]:
        if not hook_log.exists():
            return []
        return [json.loads(line) for line in hook_log.read_text().splitlines()]

    import asyncio

    snapshots = asyncio.run(wait_for(recorded))
    assert {(s["threadId"], s["runId"]) for s in snapshots} == {("hook-t", "hook-r")}


def test_a_second_server_on_a_held_data_dir_is_one_line(
        server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "shared"
    first = server_factory(data_dir=data)
    done = serve(data)
    assert_one_line_exit_2(done, "another outlast process is using", str(data),
                           "--data-dir")
    with httpx.Client(base_url=first.url) as c:
        assert c.get("/healthz").status_code == 200, "the first server is untouched"


def test_a_data_dir_that_cannot_be_created_or_used_is_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("not a directory")
    done = serve(a_file / "data")
    assert_one_line_exit_2(done, "cannot create --data-dir", "Not a directory",
                           "OUTLAST_DATA_DIR")
    data = tmp_path / "data"
    (data / "outlast.db").mkdir(parents=True)  # where the database file must go
    done = serve(data)
    assert_one_line_exit_2(done, "cannot use the SQLite store", str(data), "--data-dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any directory")
def test_a_read_only_data_dir_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o500)
    try:
        done = serve(data)
    finally:
        data.chmod(0o700)
    assert_one_line_exit_2(done, "Permission denied", "--data-dir")


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path / "data", "--port", str(port))
    assert_one_line_exit_2(done, f"cannot listen on 127.0.0.1 port {port}", "--port")


def test_an_unreachable_postgresql_store_is_one_line_without_its_password(
        tmp_path: Path) -> None:
    pytest.importorskip("asyncpg")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    url = f"postgresql://outlast:s3cret-pw@127.0.0.1:{port}/outlast"
    done = serve(tmp_path / "data", "--store", url)
    line = assert_one_line_exit_2(done, "cannot open the PostgreSQL store",
                                  f"127.0.0.1:{port}", "OUTLAST_STORE")
    assert "s3cret-pw" not in line


async def test_variables_configure_the_server_as_flags_do(server_factory: Any) -> None:
    server = server_factory(env={"OUTLAST_MAX_ID_LENGTH": "12",
                                 "OUTLAST_SQLITE_SYNCHRONOUS": "normal"})
    async with server.client() as c:
        resp, _ = await collect(c, "POST", "/agents/demo",
                                json=demo_input("thread-id-too-long", "r1", steps=1))
        assert resp.status_code == 422
        resp, frames = await collect(c, "POST", "/agents/demo",
                                     json=demo_input("short", "r1", steps=1))
        assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
