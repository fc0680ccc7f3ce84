"""``outlast serve``: one process, the engine, the HTTP edge and the web client."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType

import uvicorn
from fastapi import FastAPI

from outlast import logs
from outlast.agent import Agent
from outlast.cli.options import StartupError
from outlast.cli.startup import (
    bind,
    is_loopback,
    load_agents,
    make_data_dir,
    raise_open_files_limit,
    store_for,
    store_problem,
)
from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.errors import OutlastError
from outlast.http.app import create_app
from outlast.http.auth import Principals, tokens_in
from outlast.http.server import guarded_protocol
from outlast.tracing import TRACING

log = logging.getLogger("outlast")

SWITCH_INTERVAL = 0.0005
"""Seconds a thread holds the interpreter lock while another waits for it (Python's
default is 0.005). The store's worker threads release the lock at every statement and
wait for it again to go on; behind a busy event loop each wait lasted up to the full
interval, so a commit of a few statements spent most of its time waiting."""


FULL_COLLECTION_EVERY = 30
"""Collections of the middle generation between two full collections (Python's default
is 10). A full collection walks every object the process holds and stops the event
loop meanwhile, so with hundreds of runs streaming the full collections set the p99 of
every event's delivery. Python still skips a full collection until a quarter more
objects have survived into the oldest generation. Rarer still gained no latency and
held more cyclic garbage (docs/performance.md, "Interpreter settings")."""


def tune_interpreter() -> None:
    """The interpreter settings ``outlast serve`` runs with (docs/performance.md has
    what each is worth): a shorter switch interval, full collections a third as often,
    and what start-up loaded (modules, the app, the agents) kept out of every later
    collection.

    The youngest generation's threshold stays Python's: collecting it far less often
    gained nothing once the append path was lean, made RSS creep over a long soak, and
    left the p99 at a model's pace worse than rarer full collections do."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    gc.freeze()


__all__ = ["is_loopback", "load_agents", "serve"]


class _Server(uvicorn.Server):
    """uvicorn, plus: refuse admissions the moment SIGTERM arrives."""

    engine: Engine

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.engine.begin_drain()
        super().handle_exit(sig, frame)
        # A drained shutdown is a clean exit (status 0): uvicorn would re-raise the
        # signal after shutting down, which ends the process as killed by it.
        self._captured_signals.clear()


@asynccontextmanager
async def _started(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """The app's lifespan (the engine opens its store there), entered before uvicorn
    serves: a store that will not open is a startup mistake told in one line, not
    uvicorn's logged traceback of a failed lifespan."""
    lifespan = app.router.lifespan_context(app)
    threads = set(threading.enumerate())
    try:
        await lifespan.__aenter__()
    except Exception as exc:
        log.debug("startup failed", exc_info=True)
        await _threads_finished(threads)
        raise StartupError(store_problem(settings, exc)) from None
    try:
        yield
    finally:
        await lifespan.__aexit__(None, None, None)


async def _threads_finished(before: set[threading.Thread], within: float = 2.0) -> None:
    """Wait (a little) for threads started since ``before`` to end. aiosqlite stops a
    connection that failed to open from that connection's thread, which then reports
    to this loop; were the loop closed by then, that thread would print a traceback."""
    deadline = time.monotonic() + within

    def running() -> bool:
        return any(t not in before and t.is_alive() and not t.daemon
                   and not t.name.startswith("asyncio_")  # the loop's executor: ends later
                   for t in threading.enumerate())

    while running() and time.monotonic() < deadline:  # noqa: ASYNC110 (threads set no event)
        await asyncio.sleep(0.01)


async def _serve(settings: Settings, principals: Principals, agents: dict[str, Agent],
                 sock: socket.socket) -> None:
    engine = Engine(settings, store_for(settings), agents)
    app = create_app(engine, principals)
    # log_config=None: uvicorn's lines go through the server's log (its format, its
    # redaction), not through handlers of uvicorn's own.
    config = uvicorn.Config(app, log_level="warning", access_log=False, log_config=None,
                            timeout_graceful_shutdown=max(1, int(settings.drain_timeout)),
                            # The lifespan runs in _started, around uvicorn.
                            lifespan="off",
                            # h11 whatever else is installed: httptools buffers a request
                            # head of any size. Headers past our limit get a typed 431 from
                            # the app; past this cap h11 stops buffering and uvicorn answers
                            # 400. The guarded protocol caps connections and head time.
                            http=guarded_protocol(settings.max_connections,
                                                  settings.head_timeout),
                            h11_max_incomplete_event_size=2 * settings.max_header_bytes + 4096)
    server = _Server(config)
    server.engine = engine
    async with _started(app, settings):
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
    """Run the server until SIGTERM/SIGINT; a startup mistake is one line, exit 2."""
    secret = settings.webhook_secret
    redactor = logs.configure(settings.log_format, settings.log_level,
                              [secret.get_secret_value()] if secret is not None else [])
    try:
        with contextlib.suppress(OSError, ValueError, OutlastError):
            redactor.add(tokens_in(settings.tokens_file))  # unreadable: refused below
        _prepare_and_serve(settings)
    except StartupError as exc:
        print(f"outlast serve: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _prepare_and_serve(settings: Settings) -> None:
    try:
        principals = Principals.from_file(settings.tokens_file)
    except (OSError, ValueError, OutlastError) as exc:
        raise StartupError(f"cannot read --tokens-file: {exc}") from None
    if not is_loopback(settings.host) and not principals.enabled:
        if not settings.insecure:
            raise StartupError(
                f"refusing to bind to {settings.host}: no --tokens-file is configured, so "
                "anyone who can reach this address could read and control every run. "
                "Configure tokens, bind to 127.0.0.1, or pass --insecure.")
        log.warning("--insecure: serving %s without authentication; anyone who can reach "
                    "it can read and control every run", settings.host)
    try:
        TRACING.configure()  # the standard OTEL_* variables: off unless they ask for it
    except OutlastError as exc:
        raise StartupError(f"OpenTelemetry tracing is configured (OTEL_*), but {exc.message}"
                           ) from None
    make_data_dir(settings)
    agents = load_agents(settings)
    raise_open_files_limit(settings.max_connections)
    sock = bind(settings)
    tune_interpreter()
    try:
        asyncio.run(_serve(settings, principals, agents, sock))
    finally:
        sock.close()
        TRACING.shutdown()  # export the spans still pending
