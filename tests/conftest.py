"""Fixtures shared by every test layer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[object]:
    """Start ``outlast serve`` processes (each with its own data dir unless given one)."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None = None, env: dict[str, str] | None = None,
              ) -> ServerProcess:
        d = data_dir or tmp_path / f"server{len(started)}"
        proc = ServerProcess(d, list(args), env or {})
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def server(server_factory: object) -> ServerProcess:
    """One server on the embedded store with a fast keepalive."""
    return server_factory("--keepalive", "2")  # type: ignore[operator, no-any-return]


# The options ``module_server`` starts with unless the module sets ``SERVER_ARGS``.
MODULE_SERVER_ARGS = ("--keepalive", "2")


@pytest.fixture(scope="module")
def module_server_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                          ) -> Iterator[Callable[..., ServerProcess]]:
    """Start ``outlast serve`` processes that live until the module's last test is done."""
    started: list[ServerProcess] = []
    name = request.module.__name__.rsplit(".", 1)[-1]

    def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        proc = ServerProcess(tmp_path_factory.mktemp(name), list(args), env or {})
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def module_server(request: pytest.FixtureRequest,
                  module_server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    """One server shared by every test of a module (options: the module's ``SERVER_ARGS``,
    else a fast keepalive). The tests share its store, so each uses its own thread and run ids.
    """
    return module_server_factory(*getattr(request.module, "SERVER_ARGS", MODULE_SERVER_ARGS))


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the test's server: ``module_server`` when the test uses it (directly, or
    through its module's ``pytestmark = pytest.mark.usefixtures("module_server")``), else
    the test's own ``server``."""
    shared = "module_server" in request.fixturenames
    srv: ServerProcess = request.getfixturevalue("module_server" if shared else "server")
    async with srv.client() as c:
        yield c


# -- PostgreSQL: one throwaway cluster per session, a fresh database per test --


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[object]:
    """A PostgreSQL cluster started from the machine's server binaries.

    Missing binaries fail the run under ``CI=true`` and skip (with the reason) elsewhere.
    """
    import os

    from tests.support.postgres import PostgresCluster, PostgresUnavailable

    try:
        cluster = PostgresCluster.start_new()
    except PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"PostgreSQL tests must run in CI, but: {exc}", pytrace=False)
        pytest.skip(f"no PostgreSQL for these tests: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: object) -> str:
    """The URL of a fresh database with the schema applied (cloned from the template)."""
    return pg_cluster.fresh_database()  # type: ignore[attr-defined, no-any-return]
