"""The command line against a real server: what a person reads (runs as text, tool calls
and approvals as one line each), JSON for scripts, control commands, and bad input."""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from outlast.cli.main import build_parser
from tests.support.runs import stored_log
from tests.support.server import ServerProcess, collect, demo_input, wait_for

APPROVAL_RUN = {"steps": 3, "step_delay_ms": 50, "tokens_per_message": 6,
                "token_delay_ms": 5, "approve_at": [2]}
COMMANDS = ("threads", "thread", "runs", "run", "tail", "cancel", "answer", "fork")


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


def one_line_error(out: subprocess.CompletedProcess[str], code: str) -> None:
    assert out.returncode == 1, out
    assert out.stderr.startswith(f"error: {code}: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr


async def test_inspect_commands_show_threads_runs_and_snapshots(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await finished_run(client, "cli-t1", "cli-r1", steps=1)
    out = cli(server, "threads")
    assert out.returncode == 0 and "cli-t1" in out.stdout and "idle" in out.stdout
    assert out.stdout.splitlines()[0].split() == ["THREAD", "STATUS", "UPDATED", "TITLE"]
    threads = [json.loads(line) for line in cli(server, "threads", "--json").stdout.splitlines()]
    assert [t["threadId"] for t in threads] == ["cli-t1"]

    out = cli(server, "thread", "cli-t1")
    assert "user: do the work" in out.stdout.splitlines()
    assert any(line.startswith("assistant: Plan:") for line in out.stdout.splitlines())
    thread = json.loads(cli(server, "thread", "cli-t1", "--json").stdout)
    assert thread["status"] == "idle" and thread["messages"]
    assert "sessionState" not in thread and "session_state" not in thread

    out = cli(server, "runs", "cli-t1")
    assert out.stdout.splitlines()[1].split()[:3] == ["cli-r1", "succeeded", "demo"]
    out = cli(server, "runs", "cli-t1", "--json")
    runs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["runId"] for r in runs] == ["cli-r1"]
    out = cli(server, "run", "cli-r1")
    assert out.stdout.splitlines()[0] == "run cli-r1  succeeded"
    assert json.loads(cli(server, "run", "cli-r1", "--json").stdout)["status"] == "succeeded"
    for args in (("threads",), ("thread", "cli-t1"), ("runs", "cli-t1"), ("run", "cli-r1")):
        assert "\x1b[" not in cli(server, *args).stdout, "no colors when not on a terminal"


async def test_tail_shows_a_run_as_a_person_reads_it(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await finished_run(client, "cli-t2", "cli-r2", **APPROVAL_RUN)
    stored = [f.event for f in await stored_log(client, "cli-r2")]
    out = cli(server, "tail", "cli-r2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    texts: dict[str, str] = {}
    for e in stored:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            texts[e["messageId"]] = texts.get(e["messageId"], "") + e["delta"]
    for text in texts.values():  # streamed deltas: one line per message, by role
        assert lines.count(f"assistant: {text}") == 1, (text, lines)
    calls = [e for e in stored if e["type"] == "TOOL_CALL_START"]
    tool_lines = [line for line in lines if line.startswith("tool ")]
    assert tool_lines == ["tool search_docs(step=1, target=module_1.py)",  # whole lines
                          "tool read_file(step=2, target=module_2.py)"]  # awaits approval
    assert len(calls) == 2
    # A result on a line of its own, labelled by its tool, right after its call here.
    results = [i for i, line in enumerate(lines) if line.startswith("  -> ")]
    assert len(results) == 1
    assert lines[results[0]].startswith("  -> search_docs: search_docs finished step 1")
    assert lines[results[0] - 1] == tool_lines[0]
    approvals = [line for line in lines if line.startswith("approval needed: ")]
    assert len(approvals) == 1 and "read_file" in approvals[0]
    assert "outlast answer cli-t2 --approve" in approvals[0]
    assert lines[-1] == "run interrupted: waiting for an answer"
    assert lines[0] == "run cli-r2 on thread cli-t2"
    assert len(lines) == 1 + len(texts) + len(calls) + len(results) + 2
    assert not any(line.lstrip().startswith("{") or '"type"' in line for line in lines)
    assert "\x1b[" not in out.stdout and out.stderr == ""

    out = cli(server, "tail", "cli-r2", "--json")
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(stored) + 1))
    assert [e["event"] for e in events] == stored
    out = cli(server, "tail", "cli-r2", "--json", "--after", str(len(stored) - 2))
    assert [json.loads(line)["seq"] for line in out.stdout.splitlines()] == \
        [len(stored) - 1, len(stored)]


def test_colors_only_on_a_terminal_without_no_color(server: ServerProcess) -> None:
    def on_terminal(env: dict[str, str]) -> str:
        leader, follower = pty.openpty()
        proc = subprocess.Popen([sys.executable, "-m", "outlast.cli.main", "threads", "--url",
                                 server.url], stdout=follower, stderr=subprocess.PIPE,
                                env={**os.environ, **env})
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(30)
        os.close(leader)
        return b"".join(chunks).decode()

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[" in on_terminal({**env, "NO_COLOR": ""})
    assert "\x1b[" not in on_terminal({"NO_COLOR": "1"})


async def test_tail_resumes_after_the_server_restarts(
        server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "tail"
    first: ServerProcess = server_factory(data_dir=data)
    port = first.url.rsplit(":", 1)[1]
    async with first.client() as c:
        await collect(c, "POST", "/agents/demo", limit=3,
                      json=demo_input("cli-t3", "cli-r3", steps=4, step_delay_ms=1000))
    proc = subprocess.Popen([sys.executable, "-m", "outlast.cli.main", "tail", "cli-r3",
                             "--json", "--url", first.url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # As a person sees it: both streams on one terminal.
    text = subprocess.Popen([sys.executable, "-m", "outlast.cli.main", "--url", first.url,
                             "tail", "cli-r3"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    await wait_for(lambda: _has_output(proc), timeout=20)
    await wait_for(lambda: _has_output(text), timeout=20)
    first.kill()  # the tail loses its connection mid-run
    second = server_factory("--port", port, data_dir=data)  # same address, same data
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "note: connection lost" in err and "Traceback" not in err
    shown = text.communicate(timeout=120)[0].splitlines()
    assert text.returncode == 0, shown
    notes = [line for line in shown if "note: " in line]
    assert notes and all(line.startswith("note: ") for line in notes), shown
    calls = [line for line in shown if line.startswith("tool ")]
    assert calls and all(line.endswith(".py)") for line in calls), shown
    assert shown[-1] == "run succeeded", shown
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), "each once, in order"
    assert events[-1]["event"]["type"] == "RUN_FINISHED"
    async with second.client() as c:
        assert [e["event"] for e in events] == [f.event for f in await stored_log(c, "cli-r3")]


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
    assert out.stdout == "run cli-r4: cancelled\n"
    assert json.loads(cli(server, "cancel", "cli-r4", "--json").stdout)["status"] == "cancelled"

    await finished_run(client, "cli-t5", "cli-r5", steps=2, approve_at=[1])
    out = cli(server, "answer", "cli-t5", "--approve", "--args", '{"target": "edited.py"}',
              "--follow")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("approved; continuation run ")
    assert lines[-1] == "run succeeded"
    assert any(line.startswith("assistant: ") for line in lines)

    t = (await client.get("/threads/cli-t5")).json()
    assert t["status"] == "idle" and t["activeRun"] is None
    # The approved step's effect ran once, in the continuation run (the cancelled run
    # above may have reached an effect of its own before its cancel landed).
    continuation = lines[0].rsplit(" ", 1)[-1]
    effects = [ln.split()[0] for ln in server.effects() if ln.split()[1] == "1"]
    assert effects.count(continuation) == 1 and "cli-r5" not in effects, effects
    tool_results = [m["content"] for m in t["messages"] if m["role"] == "tool"]
    assert any("edited.py" in r for r in tool_results)

    await finished_run(client, "cli-t6", "cli-r6", steps=2, approve_at=[1])
    out = cli(server, "answer", "cli-t6", "--deny", "--json")
    answered = json.loads(out.stdout)
    assert answered["threadId"] == "cli-t6" and answered["replayed"] is False

    async def idle() -> bool:
        return bool((await client.get("/threads/cli-t6")).json()["status"] == "idle")

    await wait_for(idle)
    assert not [ln for ln in server.effects() if ln.split()[0] == answered["runId"]
                and ln.split()[1] == "1"], "a denied tool never runs"


async def test_bad_input_gets_a_clear_error_and_changes_nothing(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    before = (await client.get("/threads")).json()
    for args, code in ((("run", "no-such-run"), "run_not_found"),
                       (("thread", "no-such-thread"), "thread_not_found"),
                       (("cancel", "no-such-run"), "run_not_found"),
                       (("tail", "no-such-run"), "run_not_found"),
                       (("runs", "no-such-thread"), "thread_not_found"),
                       (("answer", "no-such-thread", "--approve"), "thread_not_found"),
                       (("run", "bad id with spaces"), "invalid_request")):
        one_line_error(cli(server, *args), code)
    await finished_run(client, "cli-t7", "cli-r7", steps=1, approve_at=[1])
    for bad, why in (("{not json", "not JSON"), ("[1, 2]", "must be a JSON object")):
        out = cli(server, "answer", "cli-t7", "--approve", "--args", bad)
        assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr
    for args, why in ((("--happened",), "--result"), (("--run-again", "--result", "1"),
                                                      "--result"),
                      (("--deny", "--args", "{}"), "--args"),
                      (("--approve", "--fail"), "not allowed with")):
        out = cli(server, "answer", "cli-t7", *args)
        assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr
        assert out.stderr.strip().splitlines()[-1].startswith("outlast")
    # An approval is not a question about a crash: refused before anything is sent.
    one_line_error(cli(server, "answer", "cli-t7", "--run-again"), "invalid_answer")
    out = cli(server, "fork", "cli-t7", "--as-of", "no-seq")
    assert out.returncode == 2 and "RUN_ID:SEQ" in out.stderr
    assert (await client.get("/threads/cli-t7")).json()["status"] == "interrupted"
    one_line_error(cli(None, "threads", url="http://127.0.0.1:9"), "unreachable")
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "threads", "--status",
                          "bogus"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "invalid choice" in out.stderr
    after = [t for t in (await client.get("/threads")).json()["threads"]
             if t["threadId"] != "cli-t7"]
    assert after == before["threads"]


def test_every_command_explains_itself_with_an_example() -> None:
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "--version"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("outlast ")
    for command in COMMANDS:
        out = subprocess.run([sys.executable, "-m", "outlast.cli.main", command, "--help"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0
        assert f"example:\n  outlast {command}" in out.stdout, out.stdout
        assert "OUTLAST_URL" in out.stdout and "127.0.0.1:8765" in out.stdout


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


def test_serve_tunes_the_interpreter_it_runs_in() -> None:
    # In a process of its own: the settings are process-wide.
    code = ("import gc, sys\n"
            "from outlast.cli.serve import FULL_COLLECTION_EVERY, SWITCH_INTERVAL, "
            "tune_interpreter\n"
            "before = (sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count())\n"
            "tune_interpreter()\n"
            "after = (sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count())\n"
            "assert before[0] == 0.005 and before[2] == 0, before\n"
            "assert after[0] == SWITCH_INTERVAL, after\n"
            "assert after[1] == (*before[1][:2], FULL_COLLECTION_EVERY) != before[1], after\n"
            "assert after[2] > 1000, after\n"
            "print('tuned')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "tuned", done.stderr


def test_outlast_alone_lists_its_commands() -> None:
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    listed = [line.split()[0] for line in out.stdout.splitlines() if line.startswith("   ")]
    parser = build_parser()
    every = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert listed == list(every.choices), out.stdout
    assert {"serve", *COMMANDS, "gc"} <= set(listed)
    for line in out.stdout.splitlines():  # one line each, with what it does
        if line.startswith("   "):
            assert len(line.split()) > 2, line
    assert "outlast COMMAND --help" in out.stdout


async def test_url_token_and_json_go_before_the_command_too(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    await finished_run(client, "cli-t8", "cli-r8", steps=1)
    base = [sys.executable, "-m", "outlast.cli.main"]
    env = {k: v for k, v in os.environ.items() if k not in ("OUTLAST_URL", "OUTLAST_TOKEN")}
    out = subprocess.run([*base, "--url", server.url, "--json", "threads"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["threadId"] for line in out.stdout.splitlines()] == ["cli-t8"]
    out = subprocess.run([*base, "--url", server.url, "--token", "t", "run", "cli-r8"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and out.stdout.startswith("run cli-r8  succeeded"), out
    # After the command wins over before it.
    out = subprocess.run([*base, "--url", "http://127.0.0.1:9", "run", "cli-r8", "--url",
                          server.url], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([*base, "--url", server.url, "serve"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 2 and "--url goes with the client commands" in out.stderr
