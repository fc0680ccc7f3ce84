"""``outlast serve``: one process, the engine, the HTTP edge and the web client."""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import logging
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from outlast.agent import Agent
from outlast.agents.demo import DemoAgent
from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.errors import OutlastError
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
        # A drained shutdown is a clean exit (status 0): uvicorn would re-raise the
        # signal after shutting down, which ends the process as killed by it.
        self._captured_signals.clear()


async def _serve(settings: Settings, principals: Principals) -> None:
    store = open_store(settings.store_url, settings.data_dir,
                       sqlite_synchronous=settings.sqlite_synchronous)
    engine = Engine(settings, store, load_agents(settings))
    app = create_app(engine, principals)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                            timeout_graceful_shutdown=max(1, int(settings.drain_timeout)),
                            lifespan="on", access_log=False,
                            # h11 whatever else is installed: httptools buffers a request
                            # head of any size. Headers past our limit get a typed 431 from
                            # the app; past this cap h11 stops buffering and uvicorn answers 400.
                            http="h11",
                            h11_max_incomplete_event_size=2 * settings.max_header_bytes + 4096)
    server = _Server(config)
    server.engine = engine
    sock = config.bind_socket()
    # asyncio turns Nagle off only on sockets whose proto is IPPROTO_TCP, which this
    # one (proto 0) is not: set it here, accepted connections inherit it. Without it a
    # small write waits for the client's delayed ACK: ~40 ms per keep-alive response.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if hasattr(socket, "TCP_USER_TIMEOUT"):
        # A client that vanished without closing (a phone losing its network) stops
        # acknowledging; keepalive writes then fail within the keepalive interval (G1)
        # instead of after the kernel's minutes of retransmissions. Accepted
        # connections inherit the option from the listening socket.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                        max(1000, int(settings.keepalive * 1000)))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    # uvicorn exposes readiness only as a flag.
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    if server.started:
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
    try:
        principals = Principals.from_file(settings.tokens_file)
    except (OSError, ValueError, OutlastError) as exc:
        print(f"cannot read --tokens-file: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if not is_loopback(settings.host) and not principals.enabled:
        if not settings.insecure:
            print(f"refusing to bind to {settings.host}: no --tokens-file is configured, so "
                  "anyone who can reach this address could read and control every run. "
                  "Configure tokens, bind to 127.0.0.1, or pass --insecure.", file=sys.stderr)
            raise SystemExit(2)
        log.warning("--insecure: serving %s without authentication; anyone who can reach "
                    "it can read and control every run", settings.host)
    settings.data_dir = Path(settings.data_dir)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(_serve(settings, principals))
