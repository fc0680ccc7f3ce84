"""Every example in examples/, started by exactly the command docs/agents.md prints for it,
from the repository root with nothing on PYTHONPATH, its model the scripted
OpenAI-compatible server (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``): a weather question
streams and runs ``get_weather`` once; a delete stops for the person's approval, and once
approved (after the server restarted) runs ``delete_file`` once."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agui_validator import assert_valid
from tests.support.fake_openai import Call, FakeOpenAI, Reply
from tests.support.runs import wait_final
from tests.support.server import ServerProcess, collect, wait_for

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agents.md"
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*_agent.py"))
FEATURES = ("agentic-chat", "backend-tool-rendering")
COMMAND = re.compile(r"(?:^|`)((?:\.venv/bin/)?outlast serve --agent "
                     r"assistant=examples\.(\w+):agent)(?:$|`)", re.M)


def printed_commands() -> dict[str, str]:
    """The serve command docs/agents.md prints for each example, by module."""
    return {m.group(2): m.group(1) for m in COMMAND.finditer(DOC.read_text())}


def test_every_example_has_its_command_in_the_docs() -> None:
    assert EXAMPLES, "examples/ holds no example"
    assert set(printed_commands()) == set(EXAMPLES), (
        "docs/agents.md must print `outlast serve --agent assistant=examples.<name>:agent` "
        "for every examples/<name>.py, and name no other")


def test_the_readme_serves_an_example_as_the_docs_do() -> None:
    readme = {m.group(2) for m in COMMAND.finditer((ROOT / "README.md").read_text())}
    assert readme and readme <= set(printed_commands()), readme


def test_the_docs_name_each_examples_extra() -> None:
    doc = DOC.read_text()
    for name in EXAMPLES:
        source = (ROOT / "examples" / f"{name}.py").read_text()
        install = re.search(r'pip install (outlast|"outlast\[[\w-]+\]")', source)
        assert install, f"examples/{name}.py does not say what to install"
        assert install.group(0) in doc, f"docs/agents.md does not print {install.group(0)}"


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    fake = await FakeOpenAI(token_delay=0.002).start()
    yield fake
    await fake.stop()


def serve(name: str, model: FakeOpenAI, tmp_path: Path, started: list[ServerProcess]
          ) -> ServerProcess:
    """The example's server, started by the printed command (``outlast`` from this
    environment), with its port and data dir from OUTLAST_PORT and OUTLAST_DATA_DIR."""
    argv = shlex.split(printed_commands()[name])
    argv[0] = str(Path(sys.executable).with_name("outlast"))
    env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "sk-test-key",
           "EXAMPLE_SANDBOX": str(tmp_path / "sandbox"), "PYTHONPATH": ""}
    srv = ServerProcess(tmp_path / "data", env=env, command=argv, cwd=ROOT)
    started.append(srv)
    return srv.start(timeout=60)


def body(thread: str, run: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
            "tools": [], "context": [], "state": {}}


def calls_in(srv: ServerProcess, tool: str) -> int:
    """How often the example's tool logged that it ran (its module logs at --log-level)."""
    return sum(f"{tool}(" in line for line in srv.log)


@pytest.mark.parametrize("name", EXAMPLES)
async def test_the_example_runs_its_tools_once_and_asks_before_deleting(
        model: FakeOpenAI, tmp_path: Path, name: str) -> None:
    started: list[ServerProcess] = []
    try:
        await _weather_then_delete(name, model, tmp_path, started)
    finally:
        for srv in started:
            srv.stop()


async def _weather_then_delete(name: str, model: FakeOpenAI, tmp_path: Path,
                               started: list[ServerProcess]) -> None:
    srv = serve(name, model, tmp_path, started)
    model.replies = [
        Reply(text="Let me look.", calls=[Call("get_weather", {"city": "Oslo"}, id="ex-w")]),
        Reply(text="It is sunny in Oslo."),
    ]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/assistant",
                                  json=body("ex-t", "ex-r1", "weather in Oslo?"))
        events = [f.event for f in frames]
        assert events[-1]["type"] == "RUN_FINISHED", (events[-1], "\n".join(srv.log[-20:]))
        assert_valid(events, FEATURES)
        [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
        assert "sunny and 21 °C in Oslo" in result["content"]
        resp, again = await collect(c, "POST", "/agents/assistant",
                                    json=body("ex-t", "ex-r1", "weather in Oslo?"))
        assert resp.headers["outlast-replayed"] == "true"
        assert [f.event for f in again] == events
    assert calls_in(srv, "get_weather") == 1, srv.log
    assert len(model.requests) == 2

    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "notes.txt").write_text("old notes")
    model.replies = [Reply(text="I will delete it.", calls=[
        Call("delete_file", {"path": "notes.txt"}, id="ex-d")])]
    async with srv.client() as c:
        _, frames = await collect(c, "POST", "/agents/assistant",
                                  json=body("ex-t", "ex-r2", "delete notes.txt"))
        finished = frames[-1].event
        assert finished["type"] == "RUN_FINISHED", finished
        assert finished["outcome"]["type"] == "interrupt", finished
        [interrupt] = (await c.get("/threads/ex-t")).json()["interrupts"]
    assert (sandbox / "notes.txt").exists(), "nothing is deleted before the person answers"
    assert calls_in(srv, "delete_file") == 0
    srv.stop()

    srv = serve(name, model, tmp_path, started)  # the approval outlives the process
    model.replies = [Reply(text="Deleted notes.txt.")]
    async with srv.client() as c:
        r = await c.post("/threads/ex-t/resume", json={"runId": "ex-r3", "resume": [{
            "interruptId": interrupt["id"], "status": "resolved",
            "payload": {"approved": True}}]})
        assert r.status_code == 200, r.text
        done = await wait_final(c, "ex-r3")
        assert done["status"] == "succeeded", (done, "\n".join(srv.log[-20:]))
        thread = (await c.get("/threads/ex-t")).json()
    assert not (sandbox / "notes.txt").exists()
    assert calls_in(srv, "delete_file") == 1, srv.log
    [deleted] = [m for m in thread["messages"] if m.get("toolCallId") == "ex-d"]
    assert "Deleted notes.txt" in deleted["content"]
    assert thread["messages"][-1]["content"] == "Deleted notes.txt."
    assert thread["interrupts"] == []


def ask_and_answer() -> str:
    """docs/agents.md's commands that ask an example and answer its question."""
    doc = DOC.read_text()
    start = doc.index("Then ask it, and answer its question")
    block = re.search(r"```sh\n(.*?)```", doc[start:], re.S)
    assert block is not None, "docs/agents.md: no sh block after 'Then ask it'"
    return block.group(1)


async def test_asking_an_example_and_answering_works_as_printed(
        model: FakeOpenAI, tmp_path: Path) -> None:
    started: list[ServerProcess] = []
    try:
        srv = serve("chat_agent", model, tmp_path, started)
        (tmp_path / "sandbox").mkdir()
        (tmp_path / "sandbox" / "notes.txt").write_text("old notes")
        model.replies = [Reply(calls=[Call("delete_file", {"path": "notes.txt"})]),
                         Reply(text="Deleted notes.txt.")]
        script = ask_and_answer().replace("http://127.0.0.1:8765", srv.url)
        path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
        # In a thread: the scripted model answers on this test's event loop.
        done = await asyncio.to_thread(
            subprocess.run, ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
            timeout=120, env={**os.environ, "PATH": path, "OUTLAST_URL": srv.url})
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stdout.splitlines()
        assert any(line.startswith("t1 ") and " interrupted " in line for line in lines)
        assert any(line.startswith("approved; continuation run ") for line in lines)
        async with srv.client() as c:
            thread = await wait_thread_idle(c, "t1")
        assert thread["messages"][-1]["content"] == "Deleted notes.txt."
        assert not (tmp_path / "sandbox" / "notes.txt").exists()
        assert calls_in(srv, "delete_file") == 1
    finally:
        for srv in started:
            srv.stop()


async def wait_thread_idle(c: Any, thread: str) -> dict[str, Any]:
    async def idle() -> dict[str, Any] | None:
        value: dict[str, Any] = (await c.get(f"/threads/{thread}")).json()
        return value if value["status"] == "idle" and not value["interrupts"] else None

    found: dict[str, Any] = await wait_for(idle)
    return found
