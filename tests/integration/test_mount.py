"""``outlast.mount``: the whole HTTP surface inside an existing FastAPI app, with the
app's own routes untouched, the app's own auth deciding the principal, the engine started
and stopped by the app's lifespan, the snapshot callback, and the stock ``@ag-ui/client``
``HttpAgent`` talking to the mounted endpoint (spec §7)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException
from starlette.requests import HTTPConnection

import outlast
from outlast.agents.demo import DemoAgent
from outlast.engine.runtime import Engine
from outlast.protocol.jsonutil import dumps
from tests.support.agui_client import JS_DIR, stock_client_node
from tests.support.runs import uid
from tests.support.server import collect, demo_input, wait_for

USERS = {"tok-alice": "alice", "tok-bob": "bob"}


def host_app(tmp_path: Path, snapshots: list[dict[str, Any]]) -> tuple[FastAPI, Engine]:
    """An existing app: its own route and its own bearer-token auth dependency."""
    app = FastAPI()

    def user(authorization: str = Header(default="")) -> str:
        name = USERS.get(authorization.removeprefix("Bearer "))
        if name is None:
            raise HTTPException(401, "who are you?")
        return name

    @app.get("/me")
    async def me(name: str = Depends(user)) -> dict[str, str]:
        return {"user": name}

    def principal(request: HTTPConnection) -> str | None:
        return USERS.get(request.headers.get("authorization", "").removeprefix("Bearer "))

    async def mirror(snapshot: dict[str, Any]) -> None:
        snapshots.append(snapshot)

    engine = outlast.mount(app, "/outlast", agents={"demo": DemoAgent(tmp_path / "ws")},
                           principal=principal, on_snapshot=mirror, data_dir=tmp_path / "d")
    return app, engine


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Engine, list[dict[str, Any]]]]:
    snapshots: list[dict[str, Any]] = []
    app, engine = host_app(tmp_path, snapshots)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on",
                                           log_level="warning"))
    task = asyncio.create_task(server.serve())

    async def up() -> bool:
        return server.started or task.done()

    await wait_for(up, timeout=20)
    assert server.started
    port = server.servers[0].sockets[0].getsockname()[1]
    assert engine.resident() is not None and engine._started  # started by the app
    try:
        yield f"http://127.0.0.1:{port}", engine, snapshots
    finally:
        server.should_exit = True
        await task
    assert not engine._started  # and stopped with it


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_the_app_keeps_its_routes_and_outlast_serves_under_its_path(
        served: tuple[str, Engine, list[dict[str, Any]]]) -> None:
    url, _, snapshots = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        assert (await c.get("/me", headers=auth("tok-alice"))).json() == {"user": "alice"}
        assert (await c.get("/me")).status_code == 401
        agents = await c.get("/outlast/agents", headers=auth("tok-alice"))
        assert agents.status_code == 200 and "demo" in json.dumps(agents.json())
        t, r = uid("t"), uid("r")
        _, frames = await collect(c, "POST", "/outlast/agents/demo",
                                  json=demo_input(t, r), headers=auth("tok-alice"))
        assert frames[-1].event["type"] == "RUN_FINISHED"
        assert (await c.get(f"/outlast/runs/{r}", headers=auth("tok-alice"))).json()[
            "status"] == "succeeded"
        # The app's auth decides: another user gets the 404 a missing thread gets, and a
        # request the app does not authenticate gets 401.
        other = await c.get(f"/outlast/threads/{t}", headers=auth("tok-bob"))
        assert other.status_code == 404 and other.json()["error"]["code"] == "thread_not_found"
        nobody = await c.get(f"/outlast/threads/{t}")
        assert nobody.status_code == 401 and nobody.json()["error"]["code"] == "unauthorized"
        refused = await c.post("/outlast/agents/demo", json=demo_input(uid("t"), uid("r")))
        assert refused.status_code == 401
    # The host's snapshot callback saw the run's boundaries, after each commit.
    await wait_for(lambda: _true(any(s["runId"] == r for s in snapshots)), timeout=10)
    assert {s["threadId"] for s in snapshots} == {t}


async def _true(value: bool) -> bool:
    return value


async def stock_client_run(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One run of ``body`` by the stock HttpAgent against the mounted demo agent (as
    alice): what the client folded, ``{"messages", "state", "error"}``."""
    request = {"url": f"{url}/outlast/agents/demo", "headers": auth("tok-alice"),
               "threadId": body["threadId"], "runId": body["runId"],
               "messages": body["messages"], "forwardedProps": body["forwardedProps"]}
    proc = await asyncio.to_thread(
        subprocess.run, [stock_client_node(), str(JS_DIR / "http_run.mjs")],
        input=json.dumps(request), capture_output=True, text=True, timeout=60, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    assert result["error"] is None, (result["error"], proc.stderr[-2000:])
    return result


async def test_the_stock_agui_client_runs_against_the_mounted_endpoint(
        served: tuple[str, Engine, list[dict[str, Any]]]) -> None:
    url, _, _ = served
    t = uid("t")
    result = await stock_client_run(url, demo_input(t, uid("r"), steps=2))
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        thread = (await c.get(f"/outlast/threads/{t}", headers=auth("tok-alice"))).json()
    assert result["messages"] == thread["messages"]
    assert result["state"] == thread["state"]


async def test_the_stock_client_resends_the_history_as_the_thread_stores_it(
        served: tuple[str, Engine, list[dict[str, Any]]]) -> None:
    """The stock HttpAgent resends what it folded; each message's JSON is then the text
    the thread stores, so admission's history check takes it as the same message
    without parsing the stored copy (engine/history.py, ResentHistory)."""
    url, _, _ = served
    t = uid("t")
    body = demo_input(t, uid("r"), steps=2)
    for _ in range(2):
        result = await stock_client_run(url, body)
        body = demo_input(t, uid("r"), steps=2, messages=[
            *result["messages"], {"id": uid("u"), "role": "user", "content": "more"}])
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        stored = (await c.get(f"/outlast/threads/{t}", headers=auth("tok-alice"))).json()
    resent = result["messages"]
    assert {m["role"] for m in resent} >= {"user", "assistant", "tool"}
    assert [dumps(m) for m in resent] == [dumps(m) for m in stored["messages"]]
