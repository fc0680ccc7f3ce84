"""Loopback networking helpers for tests that start their own listeners."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    The port is released before it is returned, so another process could take it in between;
    use it only for listeners that cannot be told ``--port 0``.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
