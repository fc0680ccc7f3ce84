"""The server's log as an operator reads it: ``--log-format json`` makes every line a
JSON object; every line about a run carries its run id, thread id, attempt and
principal (the agent's own lines included); an agent's failure is logged with its
exception and traceback at the default level; and no secret the server knows — access
tokens, the webhook secret, API keys in its environment, bearer credentials — ever
reaches a line, whatever the agent or a client sends.

Real ``outlast serve`` processes; their stderr is read as written.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.hostile_agents import FAILING_AGENT, HOSTILE_ENV
from tests.support.runs import uid, wait_final
from tests.support.server import READY_PREFIX, ServerProcess, collect, demo_input, wait_for

ALICE = "tok-alice-0123456789abcdef"
BOB = "tok-bob-fedcba9876543210"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"a webhook secret of 32 bytes!!!!").decode()
AGENT_SECRET = "sk-live-0123456789abcdefghij"
API_KEY = "sk-proj-abcdefghijklmnop12345"
SECRETS = (ALICE, BOB, WEBHOOK_SECRET, AGENT_SECRET, API_KEY,
           WEBHOOK_SECRET.removeprefix("whsec_"))


def start(server_factory: Any, tmp_path: Path, *args: str) -> ServerProcess:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{ALICE}\nbob:{BOB}\n")
    server: ServerProcess = server_factory(
        "--agent", FAILING_AGENT, "--tokens-file", str(tokens),
        "--webhook-secret", WEBHOOK_SECRET, *args,
        env={**HOSTILE_ENV, "FAILING_SECRET": AGENT_SECRET,
             "OUTLAST_OPENAI_API_KEY": API_KEY})
    return server


async def fail_a_run(server: ServerProcess) -> tuple[str, str]:
    """A failing run by alice, a refused request, a demo run by bob: their ids."""
    thread, run = uid("t"), uid("r")
    async with server.client(headers={"Authorization": f"Bearer {ALICE}"}) as c:
        await collect(c, "POST", "/agents/failing", json=demo_input(thread, run))
        record = await wait_final(c, run)
        assert record["status"] == "failed" and record["error"]["code"] == "agent_error"
        assert AGENT_SECRET not in json.dumps(record)
        wrong = await c.get("/threads", headers={"Authorization": "Bearer tok-wrong-x0x0x0x0"})
        assert wrong.status_code == 401
    async with server.client(headers={"Authorization": f"Bearer {BOB}"}) as c:
        await collect(c, "POST", "/agents/demo", json=demo_input(uid("t"), uid("r"), steps=1))
    return thread, run


def no_secret_in(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a secret reached the log: {secret[:8]}…"


async def test_json_lines_carry_the_run_and_no_secret(server_factory: Any,
                                                      tmp_path: Path) -> None:
    server = start(server_factory, tmp_path, "--log-format", "json")
    thread, run = await fail_a_run(server)

    async def logged_failure() -> bool:
        return any("the agent raised" in line for line in server.log)

    await wait_for(logged_failure)
    server.stop()
    lines = [line for line in server.log  # stderr; stdout says only where it serves
             if line.strip() and not line.startswith(READY_PREFIX)]
    entries = [json.loads(line) for line in lines]  # every line is JSON
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= set(entry), entry
    about = [e for e in entries if e.get("run_id") == run]
    for entry in about:
        assert (entry["thread_id"], entry["attempt"], entry["principal"]) == (thread, 1,
                                                                              "alice")
    [own] = [e for e in about if e["logger"] == "failing_agent"]
    assert own["message"] == "calling the model with key [redacted]"
    [failure] = [e for e in about if "the agent raised" in e["message"]]
    assert failure["level"] == "error" and "ValueError" in failure["message"]
    assert "Traceback" in failure["traceback"] and "hostile_agents.py" in failure["traceback"]
    assert "ValueError: the model refused key [redacted]" in failure["traceback"]
    no_secret_in("\n".join(server.log))


async def test_text_lines_name_the_run_and_no_secret(server_factory: Any,
                                                     tmp_path: Path) -> None:
    server = start(server_factory, tmp_path)
    thread, run = await fail_a_run(server)

    async def logged_failure() -> bool:
        return any("the agent raised" in line for line in server.log)

    await wait_for(logged_failure)
    server.stop()
    text = "\n".join(server.log)
    [failure] = [line for line in server.log if "the agent raised" in line]
    assert failure.endswith(f"[run={run} thread={thread} attempt=1 principal=alice]")
    assert " ERROR outlast.run: " in failure
    assert "Traceback (most recent call last)" in text
    assert "ValueError: the model refused key [redacted]" in text
    no_secret_in(text)


def test_an_unknown_log_format_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--log-format",
                          "xml", "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "--log-format" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("line", [
    f"Authorization: Bearer {ALICE}", f"key={API_KEY}", f"secret {WEBHOOK_SECRET} here"])
def test_the_redactor_hides_credentials_by_their_shape(line: str) -> None:
    from outlast.logs import Redactor

    scrubbed = Redactor().scrub(line)
    no_secret_in(scrubbed)
    assert "[redacted]" in scrubbed
