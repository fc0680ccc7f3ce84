"""``outlast serve``: one process, the engine, the HTTP edge and the web client."""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import logging
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from outlast.agents.base import Agent
from outlast.agents.demo import DemoAgent
from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.http.app import create_app
from outlast.http.auth import Principals
from outlast.store import open_store

log = logging.getLogger("outlast")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_agents(settings: Settings) -> dict[str, Agent]:
    """The demo agent plus ``--agent name=module:factory`` entries."""
    agents: dict[str, Agent] = {"demo": DemoAgent(settings.workspace)}
    for spec in settings.extra_agents:
        name, _, target = spec.partition("=")
        module_name, _, attr = target.partition(":")
        if not name or not module_name or not attr:
            raise SystemExit(f"--agent expects name=module:factory, got {spec!r}")
        factory: Any = getattr(importlib.import_module(module_name), attr)
        agent = factory(settings) if callable(factory) and not isinstance(factory, Agent) \
            else factory
        if not isinstance(agent, Agent):
            raise SystemExit(f"--agent {name}: {target} did not produce an Agent")
        agents[name] = agent
    return agents


class _Server(uvicorn.Server):
    """uvicorn, plus: refuse admissions the moment SIGTERM arrives."""

    engine: Engine

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.engine.begin_drain()
        super().handle_exit(sig, frame)


async def _serve(settings: Settings, principals: Principals) -> None:
    store = open_store(settings.store_url, settings.data_dir,
                       sqlite_synchronous=settings.sqlite_synchronous)
    engine = Engine(settings, store, load_agents(settings))
    app = create_app(engine, principals)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            timeout_graceful_shutdown=max(1, int(settings.drain_timeout)),
                            lifespan="on", access_log=False)
    server = _Server(config)
    server.engine = engine
    task = asyncio.create_task(server.serve())
    # uvicorn exposes readiness only as a flag.
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if server.started:
        port = settings.port
        for s in server.servers:
            for sock in s.sockets:
                port = sock.getsockname()[1]
        host = settings.host if ":" not in settings.host else f"[{settings.host}]"
        print(f"outlast serving on http://{host}:{port}/", flush=True)
    await task
    if not server.started:
        raise SystemExit(1)


def serve(settings: Settings) -> None:
    """Run the server until SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s", stream=sys.stderr)
    principals = Principals.from_file(settings.tokens_file)
    if not is_loopback(settings.host) and not principals.enabled and not settings.insecure:
        print(f"refusing to bind to {settings.host}: no --tokens-file is configured, so "
              "anyone who can reach this address could read and control every run. "
              "Configure tokens, bind to 127.0.0.1, or pass --insecure.", file=sys.stderr)
        raise SystemExit(2)
    settings.data_dir = Path(settings.data_dir)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(_serve(settings, principals))
