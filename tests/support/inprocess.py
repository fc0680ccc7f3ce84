"""An Engine served by uvicorn in the test's own event loop: real HTTP on loopback and a
real SQLite file (or PostgreSQL), with the engine at hand for what only Python can see
(the snapshot hook, what the process holds per run)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from outlast.agent import Agent
from outlast.agents.demo import DemoAgent
from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.http.app import create_app
from outlast.http.auth import Principals
from outlast.store import open_store
from tests.support.server import wait_for


@dataclass
class InProcess:
    """A served engine and a client for it."""

    engine: Engine
    client: httpx.AsyncClient
    url: str


@contextlib.asynccontextmanager
async def in_process_server(data_dir: Path, *, store_url: str | None = None,
                            agents: dict[str, Agent] | None = None,
                            principals: Principals | None = None,
                            **settings: Any) -> AsyncIterator[InProcess]:
    """Serve an Engine over ``data_dir`` (SQLite unless ``store_url``) on a free port."""
    config = Settings(data_dir=data_dir, keepalive=2.0, **settings)
    store = open_store(store_url, data_dir)
    engine = Engine(config, store, agents or {"demo": DemoAgent(data_dir / "workspace")})
    server = uvicorn.Server(uvicorn.Config(create_app(engine, principals), host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())

    async def up() -> bool:
        return server.started or task.done()

    try:
        await wait_for(up, timeout=20)
        assert server.started, "uvicorn did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0)) as client:
            yield InProcess(engine, client, url)
    finally:
        server.should_exit = True
        await task
