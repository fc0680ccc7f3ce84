"""``outlast gc [--dry-run]`` (spec §6) against real processes: through a running
server (``POST /admin/gc``), on a store no server holds, and the mistakes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess, collect, demo_input

QUICK = {"steps": 1, "step_delay_ms": 0, "tokens_per_message": 6, "token_delay_ms": 0}


def gc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "outlast.cli.main", "gc", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


async def logged_runs(client: httpx.AsyncClient, n: int, prefix: str) -> tuple[list[str], int]:
    """``n`` finished runs, and the bytes of their logged event bodies."""
    runs, size = [], 0
    for i in range(n):
        run_id = f"{prefix}-r{i}"
        resp, frames = await collect(client, "POST", "/agents/demo",
                                     json=demo_input(f"{prefix}-t{i}", run_id, **QUICK))
        assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
        text = (await client.get(f"/runs/{run_id}/events?follow=false")).text
        size += sum(len(line[6:].encode()) for line in text.split("\n")
                    if line.startswith("data: "))
        runs.append(run_id)
    return runs, size


async def statuses(client: httpx.AsyncClient, runs: list[str]) -> set[int]:
    return {(await client.get(f"/runs/{r}/events?follow=false")).status_code for r in runs}


def report(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


async def test_gc_through_the_server_dry_run_changes_nothing_then_frees(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    runs, size = await logged_runs(client, 3, "gc")
    await asyncio.sleep(0.3)  # so that every run is final for longer than the window below
    dry = report(gc("--url", server.url, "--dry-run", "--older-than", "0.2", "--json"))
    assert dry == {"dryRun": True, "olderThan": 0.2, "runs": 3,
                   "events": dry["events"], "bytes": size}
    assert dry["events"] >= 3 * 5
    assert await statuses(client, runs) == {200}

    human = gc("--url", server.url, "--dry-run", "--older-than", "0.2")
    assert human.returncode == 0
    assert human.stdout.strip() == (f"would free 3 runs, {dry['events']} events, {size} bytes "
                                    "(events of runs final for more than 0.2 s)")

    freed = report(gc("--url", server.url, "--older-than", "0.2", "--json"))
    assert freed == {**dry, "dryRun": False}
    assert await statuses(client, runs) == {410}
    for run_id in runs:  # the records stay
        assert (await client.get(f"/runs/{run_id}")).json()["compactedAt"] is not None
    again = report(gc("--url", server.url, "--older-than", "0.2", "--json"))
    assert (again["runs"], again["events"], again["bytes"]) == (0, 0, 0)


async def test_gc_uses_the_servers_retention_window(server_factory: Any) -> None:
    server: ServerProcess = server_factory("--event-retention", "3600")
    async with server.client() as client:
        runs, _ = await logged_runs(client, 1, "win")
        out = report(gc("--url", server.url, "--json"))
        assert out["olderThan"] == 3600 and out["runs"] == 0  # younger than an hour
        assert await statuses(client, runs) == {200}


async def test_gc_on_a_store_no_server_holds(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "direct"
    server: ServerProcess = server_factory(data_dir=data)
    async with server.client() as client:
        runs, size = await logged_runs(client, 2, "direct")
    # While the server holds the directory: one line saying to go through it.
    out = gc("--data-dir", str(data), "--older-than", "0.01")
    assert out.returncode == 2 and "without --data-dir" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    server.stop()

    out = gc("--data-dir", str(data), "--dry-run", "--json")
    assert out.returncode == 2 and "--older-than" in out.stderr  # no window anywhere
    dry = report(gc("--data-dir", str(data), "--dry-run", "--json",
                    env={"OUTLAST_EVENT_RETENTION": "0.01"}))
    assert (dry["runs"], dry["bytes"], dry["olderThan"]) == (2, size, 0.01)
    freed = report(gc("--data-dir", str(data), "--older-than", "0.01", "--json"))
    assert freed == {**dry, "dryRun": False}

    server = server_factory(data_dir=data)
    async with server.client() as client:
        assert await statuses(client, runs) == {410}
        assert (await client.get(f"/runs/{runs[0]}")).json()["status"] == "succeeded"


async def test_gc_needs_an_admin_principal_when_tokens_are_configured(
        server_factory: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("alice:alice-token\nbob:bob-token\n")
    server: ServerProcess = server_factory("--tokens-file", str(tokens), "--admin", "alice")
    out = gc("--url", server.url, "--older-than", "1", "--token", "bob-token")
    assert out.returncode == 1 and "403 forbidden" in out.stderr
    out = gc("--url", server.url, "--older-than", "1")
    assert out.returncode == 1 and "401 unauthorized" in out.stderr
    assert report(gc("--url", server.url, "--older-than", "1", "--json",
                     "--token", "alice-token"))["runs"] == 0


def test_gc_mistakes_are_one_line() -> None:
    for args in (["--older-than", "0"], ["--older-than", "soon"],
                 ["--data-dir", "x", "--store", "sqlite:///y"]):
        out = gc(*args)
        assert out.returncode == 2, args
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = gc("--url", "http://127.0.0.1:9", "--older-than", "1")
    assert out.returncode == 1 and "cannot reach" in out.stderr
