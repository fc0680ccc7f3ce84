"""outlast: durable, connection-independent AI-agent runs that speak AG-UI.

Agents import ``outlast.agent``; Python programs ``outlast.client``; an existing
FastAPI/Starlette app adds the whole HTTP surface with ``outlast.mount``.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # ``outlast.mount`` without importing the server for ``import outlast.agent``.
    if name == "mount":
        from outlast.http.mount import mount

        return mount
    raise AttributeError(f"module 'outlast' has no attribute {name!r}")
