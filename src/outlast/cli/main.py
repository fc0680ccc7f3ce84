"""``outlast`` entry point. Every flag also reads an ``OUTLAST_*`` environment variable."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from outlast.config import Settings


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get(f"OUTLAST_{name}", default)


def _bool_env(name: str) -> bool:
    return str(_env(name, "")).lower() in ("1", "true", "yes", "on")


def _add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the service (embedded SQLite store by default)")
    d = Settings()
    p.add_argument("--host", default=_env("HOST", d.host))
    p.add_argument("--port", type=int, default=int(_env("PORT", d.port)))
    p.add_argument("--data-dir", type=Path, default=Path(_env("DATA_DIR", d.data_dir)))
    p.add_argument("--store", dest="store_url", default=_env("STORE"),
                   help="postgresql://... for several processes on one database")
    p.add_argument("--demo-workspace", type=Path, default=_env("DEMO_WORKSPACE"))
    p.add_argument("--on-disconnect", choices=["continue", "cancel"],
                   default=_env("ON_DISCONNECT", d.on_disconnect))
    p.add_argument("--multitask", choices=["reject", "enqueue", "interrupt"],
                   default=_env("MULTITASK", d.multitask))
    p.add_argument("--snapshot-mode", choices=["boundary", "run_end"],
                   default=_env("SNAPSHOT_MODE", d.snapshot_mode))
    p.add_argument("--snapshot-min-interval", type=float,
                   default=float(_env("SNAPSHOT_MIN_INTERVAL", d.snapshot_min_interval)))
    p.add_argument("--lease-ttl", type=float, default=float(_env("LEASE_TTL", d.lease_ttl)))
    p.add_argument("--crash-policy", choices=["resume", "fail"], default=_env("CRASH_POLICY"))
    p.add_argument("--max-attempts", type=int,
                   default=int(_env("MAX_ATTEMPTS", d.max_attempts)))
    p.add_argument("--max-runs", type=int, default=int(_env("MAX_RUNS", d.max_runs)))
    p.add_argument("--drain-timeout", type=float,
                   default=float(_env("DRAIN_TIMEOUT", d.drain_timeout)))
    p.add_argument("--idempotency-retention", type=float,
                   default=float(_env("IDEMPOTENCY_RETENTION", d.idempotency_retention)))
    p.add_argument("--event-retention", type=float, default=_env("EVENT_RETENTION"))
    p.add_argument("--max-body-bytes", type=int,
                   default=int(_env("MAX_BODY_BYTES", d.max_body_bytes)))
    p.add_argument("--max-messages", type=int,
                   default=int(_env("MAX_MESSAGES", d.max_messages)))
    p.add_argument("--max-event-bytes", type=int,
                   default=int(_env("MAX_EVENT_BYTES", d.max_event_bytes)))
    p.add_argument("--max-header-bytes", type=int,
                   default=int(_env("MAX_HEADER_BYTES", d.max_header_bytes)),
                   help="request line plus headers; larger requests get 431")
    p.add_argument("--body-timeout", type=float,
                   default=float(_env("BODY_TIMEOUT", d.body_timeout)))
    p.add_argument("--keepalive", type=float, default=float(_env("KEEPALIVE", d.keepalive)))
    p.add_argument("--tokens-file", type=Path, default=_env("TOKENS_FILE"))
    p.add_argument("--insecure", action="store_true", default=_bool_env("INSECURE"),
                   help="allow a non-loopback bind without tokens")
    p.add_argument("--cors-origin", dest="cors_origins", action="append",
                   default=[o for o in str(_env("CORS_ORIGINS", "")).split(",") if o])
    p.add_argument("--sqlite-synchronous", choices=["FULL", "NORMAL"],
                   default=_env("SQLITE_SYNCHRONOUS", d.sqlite_synchronous))
    p.add_argument("--agent", dest="extra_agents", action="append",
                   default=[a for a in str(_env("AGENTS", "")).split(",") if a],
                   help="register another agent: name=module:factory")


def _settings(ns: argparse.Namespace) -> Settings:
    fields = Settings.__dataclass_fields__
    values = {k: v for k, v in vars(ns).items() if k in fields}
    if values.get("event_retention") is not None:
        values["event_retention"] = float(values["event_retention"])
    return Settings(**values)


def build_parser() -> argparse.ArgumentParser:
    from outlast.cli import client

    parser = argparse.ArgumentParser(prog="outlast", description="Durable AG-UI agent runs.")
    parser.add_argument("--version", action="version", version=client.version_text())
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    client.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Console script entry point."""
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.command == "serve":
        from outlast.cli.serve import serve

        serve(_settings(ns))
        return
    from outlast.cli import client

    sys.exit(client.run(ns))


if __name__ == "__main__":
    main()
