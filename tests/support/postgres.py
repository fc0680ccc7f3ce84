"""A throwaway PostgreSQL cluster from the machine's server binaries.

``initdb`` into a temporary directory, ``postgres`` on a free loopback port
with durability switched off (tests and benchmarks only), the schema applied
once to a template database by the store's own migrations, and a fresh
database per test cloned from that template.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import glob
import ipaddress
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.net import free_port

TEMPLATE = "outlast_template"


class PostgresUnavailable(RuntimeError):
    """The server binaries are missing or the cluster would not start."""


def find_bindir() -> Path | None:
    """Where ``initdb`` and ``postgres`` live: $OUTLAST_PG_BINDIR, PATH, or Debian's layout."""
    candidates: list[str] = []
    if os.environ.get("OUTLAST_PG_BINDIR"):
        candidates.append(os.environ["OUTLAST_PG_BINDIR"])
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += sorted(glob.glob("/usr/local/pgsql*/bin"), reverse=True)
    for d in candidates:
        p = Path(d)
        if (p / "initdb").is_file() and (p / "postgres").is_file() and (p / "psql").is_file():
            return p
    return None


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to completion on its own loop, even from inside a running one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def postgres_owner() -> tuple[int, int] | None:
    """The uid and gid a cluster started as root runs as (None when not root)."""
    if os.geteuid() != 0:
        return None
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        return None
    return owner.pw_uid, owner.pw_gid


@dataclass
class PostgresCluster:
    """One ``postgres`` server on 127.0.0.1, owned by the caller until ``stop()``."""

    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="outlast-pg-")))
    durable: bool = False
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    _names: itertools.count[int] = field(default_factory=itertools.count)

    data_dir: Path | None = None  # elsewhere than under root, its WAL kept under root
    listen: tuple[str, ...] = ()  # addresses besides 127.0.0.1, their /24 trusted

    @classmethod
    def start_new(cls, *, durable: bool = False, data_dir: Path | None = None,
                  listen: tuple[str, ...] = ()) -> PostgresCluster:
        """Find the binaries, initdb, start the server, build the template database.

        ``durable`` keeps fsync and synchronous commit on (benchmarks against a
        SQLite store that syncs every commit); tests run without them. ``data_dir``
        puts the data directory there (a small filesystem, say) and its write-ahead
        log under the cluster's own directory. ``listen``: more addresses to listen on
        (the network namespaces of partition tests reach the server over them)."""
        bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, postgres, psql) were not found; install "
                "postgresql or set OUTLAST_PG_BINDIR to their directory")
        cluster = cls(bindir, durable=durable, data_dir=data_dir, listen=listen)
        try:
            cluster._start()
            cluster._make_template()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    # -- process ----------------------------------------------------------
    def _as_owner(self, cmd: list[str]) -> list[str]:
        # initdb refuses to run as root: run the server as the postgres user then.
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *cmd]
        return cmd

    @property
    def data(self) -> Path:
        return self.data_dir or self.root / "data"

    def _start(self) -> None:
        data = self.data
        sockets = self.root / "sockets"
        sockets.mkdir()
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable("running as root and no 'postgres' user exists "
                                          "to own the test cluster") from None
            for path in (self.root, sockets):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        init = subprocess.run(
            self._as_owner([str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres",
                            "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                            *(["--waldir", str(self.root / "wal")] if self.data_dir else [])]),
            capture_output=True, text=True, check=False)
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        if self.listen:
            with open(data / "pg_hba.conf", "a", encoding="utf-8") as hba:
                for address in self.listen:
                    network = ipaddress.ip_network(f"{address}/24", strict=False)
                    hba.write(f"host all all {network} trust\n")
        self.port = free_port()
        settings = ["max_connections=300", "shared_buffers=64MB"]
        if not self.durable:
            # A throwaway cluster: nothing needs to survive a power cut.
            settings += ["fsync=off", "synchronous_commit=off", "full_page_writes=off"]
        self.proc = subprocess.Popen(
            self._as_owner([
                str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                "-h", ",".join(("127.0.0.1", *self.listen)), "-k", str(sockets),
                *[arg for s in settings for arg in ("-c", s)],
            ]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise PostgresUnavailable(f"postgres exited at start-up:\n{err}")
            ready = subprocess.run(
                [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port),
                 "-U", "postgres", "-q"], check=False)
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise PostgresUnavailable("postgres did not accept connections in 30 s")
            time.sleep(0.1)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def stop(self) -> None:
        """Fast shutdown, then remove every file of the cluster."""
        if self.proc is not None and self.proc.poll() is None:
            # Signal the postmaster itself (runuser may sit between us and it).
            pidfile = self.data / "postmaster.pid"
            try:
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGINT)
            except (OSError, ValueError, IndexError):
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases --------------------------------------------------------
    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-c", sql],
            capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr.strip()}")
        return out.stdout.strip()

    def _make_template(self) -> None:
        from outlast.store.postgres import PostgresStore

        self.psql(f"CREATE DATABASE {TEMPLATE}")

        async def migrate() -> None:
            store = PostgresStore(self.url(TEMPLATE), min_size=1, max_size=2)
            await store.open()
            await store.close()

        run_async(migrate())

    def fresh_database(self, prefix: str = "t") -> str:
        """A new database cloned from the migrated template; its URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with contextlib.suppress(RuntimeError):
            self.psql(f"DROP DATABASE IF EXISTS {name}")
        self.psql(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        return self.url(name)
