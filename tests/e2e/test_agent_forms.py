"""``--agent NAME=module:attr`` takes the agent you have, run as a person runs it: the
``outlast`` command in a directory holding their module, nothing on PYTHONPATH. A
framework's own object (its host picked by its type), a function returning one, an outlast
agent, the older ``outlast.agents.<host>:factory`` form, ``--app-dir``; and each mistake
as one line naming the user's module, the exception and where it was raised."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

import outlast
from outlast.agents.kinds import NotAnAgent
from outlast.agents.pydantic_ai import PydanticAIAgent
from tests.support.server import ServerProcess

OUTLAST = str(Path(sys.executable).with_name("outlast"))

AGENTS_PY = '''\
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from outlast.agent import Agent as OutlastAgent, Capabilities


def _model():
    return OpenAIChatModel("m", provider=OpenAIProvider(base_url="http://127.0.0.1:9/v1",
                                                        api_key="unused"))


agent = Agent(_model(), instructions="Be brief.")


def make(settings):
    return Agent(_model(), instructions="Made by a factory.")


class Echo(OutlastAgent):
    capabilities = Capabilities(description="echoes")

    async def run(self, ctx):
        return None


echo = Echo()
notes = {"not": "an agent"}


def broken_factory(settings):
    return settings.no_such_setting
'''

BROKEN_PY = '''\
import os

MODEL = os.environ["NO_SUCH_VARIABLE_FOR_THIS_TEST"]
'''


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """A person's project: ``myapp/agents.py`` and a module that fails to import."""
    root = tmp_path / "project"
    (root / "myapp").mkdir(parents=True)
    (root / "myapp" / "__init__.py").write_text("")
    (root / "myapp" / "agents.py").write_text(AGENTS_PY)
    (root / "myapp" / "broken.py").write_text(BROKEN_PY)
    return root


def env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("OUTLAST_") and k != "PYTHONPATH"}
    return {**clean, **extra}


def refused(cwd: Path, *args: str) -> str:
    """``outlast serve ARGS`` in ``cwd`` must stop with one line and exit status 2."""
    done = subprocess.run([OUTLAST, "serve", "--port", "0", "--data-dir", str(cwd / ".data"),
                           *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env())
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_each_form_is_served_from_the_current_directory(app: Path, tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", command=[
        OUTLAST, "serve", "--agent", "plain=myapp.agents:agent",
        "--agent", "made=myapp.agents:make", "--agent", "echo=myapp.agents:echo",
        "--agent", "older=outlast.agents.pydantic_ai:factory"],
        env=env(OUTLAST_PYDANTIC_AI_AGENT="myapp.agents:agent"), cwd=app)
    try:
        srv.start(timeout=60)
        listed = {a["name"]: a for a in httpx.get(f"{srv.url}/agents", timeout=10).json()[
            "agents"]}
    finally:
        srv.stop()
    assert {"plain", "made", "echo", "older"} <= set(listed), listed
    pydantic = "Pydantic AI agent with journaled tool calls and durable approvals"
    assert listed["plain"]["description"] == pydantic
    assert listed["made"]["description"] == pydantic
    assert listed["older"]["description"] == pydantic
    assert listed["echo"]["description"] == "echoes"


def test_app_dir_imports_from_another_directory(app: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    srv = ServerProcess(tmp_path / "data", command=[
        OUTLAST, "serve", "--app-dir", str(app), "--agent", "plain=myapp.agents:agent"],
        env=env(), cwd=elsewhere)
    try:
        srv.start(timeout=60)
        names = [a["name"] for a in httpx.get(f"{srv.url}/agents", timeout=10).json()[
            "agents"]]
    finally:
        srv.stop()
    assert "plain" in names
    line = refused(elsewhere, "--agent", "plain=myapp.agents:agent")
    assert f"no module named 'myapp.agents' in {elsewhere}" in line, line
    assert "--app-dir" in line


def test_a_module_that_fails_to_import_is_named_with_where_it_failed(app: Path) -> None:
    line = refused(app, "--agent", "a=myapp.broken:agent")
    assert line.startswith("outlast serve: --agent / OUTLAST_AGENTS a=myapp.broken:agent: "
                           "your module 'myapp.broken' failed to import: KeyError: "), line
    assert "NO_SUCH_VARIABLE_FOR_THIS_TEST" in line
    assert line.endswith(f"({Path('myapp', 'broken.py')}, line 3)"), line
    # The older form says the same of the module its variable names.
    done = subprocess.run([OUTLAST, "serve", "--port", "0", "--agent",
                           "a=outlast.agents.pydantic_ai:factory"], cwd=app,
                          capture_output=True, text=True, timeout=60,
                          env=env(OUTLAST_PYDANTIC_AI_AGENT="myapp.broken:agent"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    assert "OUTLAST_PYDANTIC_AI_AGENT=myapp.broken:agent: your module 'myapp.broken' " \
        "failed to import: KeyError" in done.stderr, done.stderr


def test_an_object_of_no_known_kind_lists_the_kinds_accepted(app: Path) -> None:
    line = refused(app, "--agent", "a=myapp.agents:notes")
    assert "myapp.agents:notes is a dict, not an agent; it may be an outlast Agent, " \
        "a Pydantic AI Agent, an OpenAI Agents SDK Agent, a compiled LangGraph graph" in line
    line = refused(app, "--agent", "a=myapp.agents:broken_factory")
    assert "myapp.agents:broken_factory(settings) raised AttributeError" in line, line
    assert f"({Path('myapp', 'agents.py')}, line" in line
    line = refused(app, "--agent", "a=myapp.agents:nothing")
    assert "module 'myapp.agents' has no attribute 'nothing'" in line


def test_a_missing_framework_names_its_extra() -> None:
    """Where a framework is not installed, the kinds accepted name the extra for it."""
    script = textwrap.dedent("""
        import importlib.abc, sys
        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"pydantic_ai", "langgraph"}:
                    raise ModuleNotFoundError(name)
                return None
        sys.meta_path.insert(0, NotInstalled())
        from outlast.agents.kinds import accepted
        print(accepted())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env=env())
    assert done.returncode == 0, done.stderr
    assert 'a Pydantic AI Agent (pip install "outlast[pydantic-ai]")' in done.stdout
    assert 'a compiled LangGraph graph (pip install "outlast[langgraph]")' in done.stdout
    assert "an OpenAI Agents SDK Agent, " in done.stdout  # installed: no extra named


def test_mount_takes_a_framework_object(tmp_path: Path) -> None:
    from fastapi import FastAPI
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    app = FastAPI()
    engine = outlast.mount(app, agents={"p": Agent(TestModel())}, data_dir=tmp_path / "d")
    assert isinstance(engine.agents["p"], PydanticAIAgent)
    with pytest.raises(NotAnAgent, match="agents\\['x'\\] is not an agent; it may be"):
        outlast.mount(FastAPI(), agents={"x": object()}, data_dir=tmp_path / "e")
