"""``outlast.mount``: the whole HTTP surface inside an existing FastAPI/Starlette app.

    from fastapi import FastAPI
    import outlast

    app = FastAPI()
    outlast.mount(app, path="/outlast", agents={"chat": my_agent},
                  principal=lambda request: request.headers.get("x-user"))

The engine starts and stops with the host app's lifespan (a mounted app gets none
of its own in Starlette), and the host's auth decides who the caller is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from outlast.agent import Agent
from outlast.agents.kinds import NotAnAgent, accepted, host_for
from outlast.config import Settings, SnapshotHook
from outlast.engine.runtime import Engine
from outlast.http.app import create_app
from outlast.http.auth import HostPrincipals, PrincipalOf, Principals
from outlast.store import open_store


def mount(app: Starlette, path: str = "/outlast", *, agents: Mapping[str, Any],
          store: str | None = None, principal: PrincipalOf | None = None,
          on_snapshot: SnapshotHook | None = None, data_dir: str | Path = ".outlast",
          settings: Settings | None = None, **options: Any) -> Engine:
    """Serve outlast's HTTP surface under ``path`` of ``app`` and return its engine.

    ``agents`` maps names to the agents you have: outlast agents, or framework agent
    objects (a Pydantic AI or OpenAI Agents SDK ``Agent``, a compiled LangGraph graph, ...),
    each served by its host as ``outlast serve --agent NAME=module:attr`` serves it.
    ``store`` is a PostgreSQL URL (several app processes then form one service), else
    SQLite in ``data_dir``. ``principal`` maps a request to the caller's principal
    (None refuses it with 401); without it every caller is one local principal.
    ``on_snapshot`` is called after each snapshot commit, off the run's path.
    ``options`` are further settings (``lease_ttl=...``), as ``outlast serve`` flags."""
    if not path.startswith("/") or path.endswith("/"):
        raise ValueError(f"path must start with '/' and not end with one, got {path!r}")
    if settings is None:
        settings = Settings(data_dir=Path(data_dir), store_url=store, **options)
    if on_snapshot is not None:
        settings.snapshot_hook = on_snapshot
    if settings.store_url is None:
        Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    engine = Engine(settings, open_store(settings.store_url, Path(settings.data_dir),
                                         sqlite_synchronous=settings.sqlite_synchronous),
                    {name: _agent(name, obj) for name, obj in agents.items()})
    principals: Principals = HostPrincipals(principal) if principal else Principals()
    app.mount(path, create_app(engine, principals, lifespan=False, mounted=True))

    host_lifespan = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(host: Any) -> AsyncIterator[Any]:
        await engine.start()
        try:
            async with host_lifespan(host) as state:
                yield state
        finally:
            await engine.stop()

    app.router.lifespan_context = lifespan
    return engine


def _agent(name: str, obj: Any) -> Agent:
    agent = host_for(obj)
    if agent is None:
        raise NotAnAgent(f"agents[{name!r}] is not an agent; it may be {accepted()}")
    return agent
