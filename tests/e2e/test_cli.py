"""The command line against a real server: inspect, tail, cancel, answer, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess, collect, demo_input, wait_for


def cli(server: ServerProcess | None, *args: str, url: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = url or (server.url if server else "http://127.0.0.1:9")
    return subprocess.run(
        [sys.executable, "-m", "outlast.cli.main", *args, "--url", base],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )


async def finished_run(client: httpx.AsyncClient, thread: str, run: str, **knobs: Any) -> None:
    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=demo_input(thread, run, **knobs))
    assert resp.status_code == 200
    assert frames[-1].event["type"] == "RUN_FINISHED"


async def test_inspect_commands_show_threads_runs_and_snapshots(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await finished_run(client, "cli-t1", "cli-r1", steps=1)
    threads = json.loads(cli(server, "threads").stdout)["threads"]
    assert [t["threadId"] for t in threads] == ["cli-t1"]
    thread = json.loads(cli(server, "thread", "cli-t1").stdout)
    assert thread["status"] == "idle" and thread["messages"]
    assert "sessionState" not in thread and "session_state" not in thread
    runs = json.loads(cli(server, "runs", "cli-t1").stdout)["runs"]
    assert [r["runId"] for r in runs] == ["cli-r1"]
    run = json.loads(cli(server, "run", "cli-r1").stdout)
    assert run["status"] == "succeeded"


async def test_tail_prints_every_event_once_in_order(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await finished_run(client, "cli-t2", "cli-r2", steps=2)
    out = cli(server, "tail", "cli-r2")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    seqs = [e["seq"] for e in events if e["seq"] is not None]
    assert seqs == list(range(1, len(seqs) + 1))
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_tail_resumes_after_the_server_restarts(
        server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "tail"
    first: ServerProcess = server_factory(data_dir=data)
    port = first.url.rsplit(":", 1)[1]
    async with first.client() as c:
        await collect(c, "POST", "/agents/demo", limit=3,
                      json=demo_input("cli-t3", "cli-r3", steps=3, step_delay_ms=400))
    proc = subprocess.Popen([sys.executable, "-m", "outlast.cli.main", "tail", "cli-r3",
                             "--url", first.url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    await wait_for(lambda: _has_output(proc), timeout=20)
    first.kill()  # the tail loses its connection mid-run
    server_factory("--port", port, data_dir=data)  # same address, same data
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "connection lost" in err
    events = [json.loads(line) for line in out.splitlines()]
    seqs = [e["seq"] for e in events if e["seq"] is not None]
    assert seqs == list(range(1, len(seqs) + 1)), "every event once, in order"
    assert events[-1]["type"] == "RUN_FINISHED"


async def _has_output(proc: subprocess.Popen[str]) -> bool:
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 0)
    return bool(ready)


async def test_cancel_and_answer_control_runs(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await collect(client, "POST", "/agents/demo", limit=2,
                  json=demo_input("cli-t4", "cli-r4", steps=5, step_delay_ms=2000))
    out = cli(server, "cancel", "cli-r4", "--wait")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "cancelled"

    await finished_run(client, "cli-t5", "cli-r5", steps=2, approve_at=[1])
    out = cli(server, "answer", "cli-t5", "--approve", "--args", '{"target": "edited.py"}')
    assert out.returncode == 0, out.stderr

    async def idle() -> bool:
        t = (await client.get("/threads/cli-t5")).json()
        return t["status"] == "idle" and t["activeRun"] is None

    await wait_for(idle)
    lines = [ln for ln in server.effects() if ln.split()[1] == "1"]
    assert len(lines) == 1
    tool_results = [m["content"] for m in (await client.get("/threads/cli-t5")).json()["messages"]
                    if m["role"] == "tool"]
    assert any("edited.py" in r for r in tool_results)


async def test_bad_input_gets_a_clear_error_and_changes_nothing(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    before = (await client.get("/threads")).json()
    for args in (("run", "no-such-run"), ("thread", "no-such-thread"),
                 ("cancel", "no-such-run"), ("runs", "no-such-thread"),
                 ("answer", "no-such-thread", "--approve")):
        out = cli(server, *args)
        assert out.returncode == 1
        assert "404" in out.stderr and "not_found" in out.stderr
    out = cli(server, "run", "bad id with spaces")
    assert out.returncode == 1 and "invalid_request" in out.stderr
    await finished_run(client, "cli-t6", "cli-r6", steps=1, approve_at=[1])
    out = cli(server, "answer", "cli-t6", "--approve", "--args", "{not json")
    assert out.returncode == 1 and "--args is not JSON" in out.stderr
    out = cli(server, "answer", "cli-t6", "--approve", "--args", "[1, 2]")
    assert out.returncode == 1 and "JSON object" in out.stderr
    assert (await client.get("/threads/cli-t6")).json()["status"] == "interrupted"
    out = cli(None, "threads", url="http://127.0.0.1:9")
    assert out.returncode == 1 and "cannot reach" in out.stderr
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "threads", "--status",
                          "bogus"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "invalid choice" in out.stderr
    after = [t for t in (await client.get("/threads")).json()["threads"]
             if t["threadId"] != "cli-t6"]
    assert after == before["threads"]


def test_serve_rejects_bad_flags_and_reads_environment(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--lease-ttl",
                          "soon"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--lease-ttl" in out.stderr
    proc = ServerProcess(tmp_path / "env", [], {"OUTLAST_MULTITASK": "enqueue"})
    proc.start()
    try:
        with httpx.Client(base_url=proc.url, timeout=30) as c:
            with c.stream("POST", "/agents/demo",
                          json=demo_input("env-t", "env-r1", steps=3, step_delay_ms=500)):
                pass
            resp = c.post("/agents/demo", json=demo_input("env-t", "env-r2", steps=1),
                          headers={"Accept": "text/event-stream"})
            # the server default from the environment: enqueue instead of 409
            assert resp.status_code == 200
    finally:
        proc.stop()
