"""What ``outlast serve`` checks and prepares before it serves, each mistake turned
into one line saying what to change (spec §6: exit status 2, never a traceback)."""

from __future__ import annotations

import ipaddress
import logging
import resource
import socket
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from outlast.agent import Agent
from outlast.agents.demo import DemoAgent
from outlast.agents.kinds import FactoryFailed, NotAnAgent, agent_of
from outlast.cli.options import StartupError, one_line
from outlast.config import Settings, load_target, option
from outlast.errors import MissingDependency
from outlast.store import Store, open_store
from outlast.store.sqlite import DataDirLocked

log = logging.getLogger("outlast")

# Open files beyond the connections: the store, the listening socket, agents' files.
SPARE_FILES = 256


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_data_dir(settings: Settings) -> None:
    """Create ``--data-dir`` (and its parents)."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create --data-dir {settings.data_dir}: "
                           f"{exc.strerror or one_line(exc)}; choose a writable directory "
                           f"(--data-dir / {option('data_dir').env})") from None


def load_agents(settings: Settings) -> dict[str, Agent]:
    """The demo agent plus ``--agent name=module:attr`` entries: each an outlast agent, a
    framework's agent object (served by its host), or a function of the settings returning
    one, imported from ``--app-dir`` (default: the current directory) first."""
    agents: dict[str, Agent] = {"demo": DemoAgent(settings.workspace)}
    where = f"--agent / {option('extra_agents').env}"
    for spec in settings.extra_agents:
        name, _, target = spec.partition("=")
        # The modules you serve log at --log-level (the root logger stays at WARNING).
        logging.getLogger(target.partition(":")[0].partition(".")[0]).setLevel(
            settings.log_level.upper())
        try:
            agents[name] = agent_of(load_target(target, settings.app_dir), settings,
                                    name=target)
        except (ValueError, NotAnAgent, FactoryFailed, MissingDependency) as exc:
            log.debug("--agent %s failed", spec, exc_info=True)
            raise StartupError(f"{where} {spec}: {one_line(exc)}") from None
        except SystemExit as exc:  # a host's factory: what to set, in one line
            if not isinstance(exc.code, str):
                raise
            raise StartupError(f"{where} {spec}: {exc.code}") from None
    return agents


def raise_open_files_limit(max_connections: int) -> None:
    """Lift the soft limit on open files to what ``--max-connections`` needs, as far as
    the hard limit allows: past it every accept fails, for normal clients too."""
    needed = max_connections + SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        log.warning("--max-connections %d needs about %d open files, but the limit is %d",
                    max_connections, needed, target)


def bind(settings: Settings) -> socket.socket:
    """The listening socket (not yet listening), with the options connections inherit."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {settings.host} port {settings.port}: "
                           f"{exc.strerror or one_line(exc)}; choose another --port or "
                           "--host") from None
    sock.set_inheritable(True)
    # asyncio turns Nagle off only on sockets whose proto is IPPROTO_TCP, which this
    # one (proto 0) is not: set it here, accepted connections inherit it. Without it a
    # small write waits for the client's delayed ACK, on every keep-alive response.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if hasattr(socket, "TCP_USER_TIMEOUT"):
        # A client that vanished without closing (a phone losing its network) stops
        # acknowledging; keepalive writes then fail within the keepalive interval (G1)
        # instead of after the kernel's minutes of retransmissions. Accepted
        # connections inherit the option from the listening socket.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                        max(1000, int(settings.keepalive * 1000)))
    return sock


def store_for(settings: Settings) -> Store:
    """The configured store, not yet opened."""
    try:
        return open_store(settings.store_url, settings.data_dir,
                          sqlite_synchronous=settings.sqlite_synchronous)
    except (ValueError, MissingDependency) as exc:
        raise StartupError(f"--store / {option('store_url').env}: {one_line(exc)}") from None


def store_problem(settings: Settings, exc: BaseException) -> str:
    """The line for a store that would not open (the engine opens it at start)."""
    if isinstance(exc, DataDirLocked):
        return one_line(exc)
    url = settings.store_url or ""
    if url.startswith(("postgres://", "postgresql://")):
        return (f"cannot open the PostgreSQL store {redact(url)}: {_reason(exc)}; check "
                f"--store / {option('store_url').env} and that the database is up")
    if isinstance(exc, OSError | sqlite3.Error):
        path = Path(url.removeprefix("sqlite:///")) if url else settings.data_dir
        return (f"cannot use the SQLite store in {path}: {_reason(exc)}; choose a writable "
                f"--data-dir / {option('data_dir').env}")
    return (f"the server did not start: {type(exc).__name__}: {one_line(exc)} "
            "(--log-level debug shows where)")


def redact(url: str) -> str:
    """``url`` without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return one_line(exc)
