"""How a connection to PostgreSQL notices that the other side is gone.

A network partition drops packets silently: no reset, no error. Left to the kernel's
defaults, a connection waiting on a dead peer waits for its retransmissions to give up
(about fifteen minutes), an idle one forever. Every connection this process makes (the
pool's, the lease renewer's, the LISTEN one) therefore carries:

- a connect timeout (``CONNECT_TIMEOUT``);
- TCP keepalives on an idle connection (a probe after ``KEEPALIVE_IDLE`` seconds of
  silence, every ``KEEPALIVE_INTERVAL`` after) and ``TCP_USER_TIMEOUT``
  (``DEAD_PEER``): data or probes unacknowledged that long end the connection, whatever
  it was doing, so the statement on it fails at once with ``StoreUnavailable``;
- the same on the server's side of it (``SERVER_SETTINGS``, PostgreSQL 12 or later), so
  that the sessions of a process cut off end, and their row locks go, within seconds;
- a statement timeout on the client (``STATEMENT_TIMEOUT``): a backstop for a server
  that answers the network but not the statement.

The kernel acknowledges for a busy server, so none of these ends a slow statement of a
server that is reachable.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import asyncpg

CONNECT_TIMEOUT = 5.0
"""Seconds a new connection (TCP, TLS and start-up) may take."""
STATEMENT_TIMEOUT = 60.0
"""Seconds a statement may take before the client gives up on it."""
KEEPALIVE_IDLE = 2
KEEPALIVE_INTERVAL = 1
KEEPALIVE_COUNT = 3
DEAD_PEER = 5.0
"""Seconds of unacknowledged data (or keepalive probes) that end a connection."""

SERVER_SETTINGS = {
    "tcp_keepalives_idle": str(KEEPALIVE_IDLE),
    "tcp_keepalives_interval": str(KEEPALIVE_INTERVAL),
    "tcp_keepalives_count": str(KEEPALIVE_COUNT),
    "tcp_user_timeout": str(int(DEAD_PEER * 1000)),
}
"""The same detection on the server's end of each session."""


def watch_peer(con: asyncpg.Connection) -> None:
    """Turn on keepalives and ``TCP_USER_TIMEOUT`` on a connection's socket (nothing for
    a Unix socket, or where the platform lacks an option)."""
    transport: Any = getattr(con, "_transport", None)
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT),
                        ("TCP_USER_TIMEOUT", int(DEAD_PEER * 1000))):
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


async def on_connect(con: asyncpg.Connection) -> None:
    """The pool's ``init``: every pooled connection watches its peer."""
    watch_peer(con)


async def connect(url: str, *, settings: dict[str, str] | None = None,
                  statement_timeout: float = STATEMENT_TIMEOUT) -> asyncpg.Connection:
    """One connection outside the pool, with the pool's timeouts and detection."""
    con = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT,
                                command_timeout=statement_timeout,
                                server_settings={**SERVER_SETTINGS, **(settings or {})})
    watch_peer(con)
    return con
