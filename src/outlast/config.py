"""Server settings: flags, ``OUTLAST_*`` environment variables and defaults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

SnapshotHook = Callable[[dict[str, Any]], Awaitable[None] | None]


@dataclass
class Settings:
    """Everything a server process is configured with; see ``outlast serve --help``."""

    host: str = "127.0.0.1"
    port: int = 8765
    data_dir: Path = Path(".outlast")
    store_url: str | None = None
    demo_workspace: Path | None = None
    # Request-option defaults (SPEC §3).
    on_disconnect: Literal["continue", "cancel"] = "continue"
    multitask: Literal["reject", "enqueue", "interrupt"] = "reject"
    # Snapshots (G5).
    snapshot_mode: Literal["boundary", "run_end"] = "boundary"
    snapshot_min_interval: float = 0.0
    snapshot_hook: SnapshotHook | None = None
    # Leases and crashes (G8).
    lease_ttl: float = 10.0
    crash_policy: Literal["resume", "fail"] | None = None  # None: resume if the agent can
    max_attempts: int = 3
    max_runs: int = 1000
    drain_timeout: float = 10.0
    # Retention.
    idempotency_retention: float = 24 * 3600.0
    event_retention: float | None = None
    # Limits.
    max_body_bytes: int = 1 << 20
    max_messages: int = 1000
    max_event_bytes: int = 1 << 20
    max_id_length: int = 200
    max_header_bytes: int = 16 << 10
    body_timeout: float = 30.0
    keepalive: float = 15.0
    # Access.
    tokens_file: Path | None = None
    insecure: bool = False
    cors_origins: list[str] = field(default_factory=list)
    sqlite_synchronous: str = "FULL"
    extra_agents: list[str] = field(default_factory=list)

    @property
    def workspace(self) -> Path:
        """Where the demo agent writes ``effects.log``."""
        return self.demo_workspace or self.data_dir / "workspace"
