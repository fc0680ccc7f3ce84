"""``outlast gc [--dry-run]``: remove the events of runs past the retention window now
and say what that frees (spec §6).

Two ways to the store, chosen by the flags:

- through a running server (the default; ``--url``, ``--token``): ``POST /admin/gc``.
  SQLite's data directory is locked by the server that holds it, and on PostgreSQL the
  server's batches already stay out of live runs' way. Allowed without tokens (a
  loopback server) or for a principal the server names with ``--admin``.
- on the store itself (``--data-dir`` or ``--store``), when no server holds it: a
  SQLite directory in use by a server is refused with one line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import ValidationError

from outlast.cli.options import StartupError, explain, one_line
from outlast.config import Settings, option

if TYPE_CHECKING:
    from outlast.store.base import Freed

DEFAULT_URL = "http://127.0.0.1:8765"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def add_command(sub: Any) -> None:
    """Register ``outlast gc`` on the ``outlast`` parser."""
    p = sub.add_parser(
        "gc", help="remove the events of runs past the retention window now",
        description="Remove the events of runs final for longer than the retention window "
                    "(their run records and the thread snapshots stay; their events then "
                    "answer 410 run_compacted) and print the runs, events and event bytes "
                    "freed. Goes through the server at --url, or, with --data-dir or "
                    "--store, opens a store no server is using.")
    p.add_argument("--dry-run", action="store_true",
                   help="only say what would be freed; change nothing")
    p.add_argument("--older-than", type=_seconds, metavar="S",
                   help="the window, in seconds (default: the server's --event-retention, "
                        f"or {option('event_retention').env} with --data-dir/--store)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--url", default=os.environ.get("OUTLAST_URL", DEFAULT_URL),
                   help=f"the server (default {DEFAULT_URL}, env OUTLAST_URL)")
    p.add_argument("--token", default=os.environ.get("OUTLAST_TOKEN"),
                   help="bearer token of a principal the server names with --admin "
                        "(env OUTLAST_TOKEN)")
    direct = p.add_mutually_exclusive_group()
    direct.add_argument("--data-dir", metavar="DIR",
                        help="open the SQLite store in DIR directly (no server may be using it)")
    direct.add_argument("--store", metavar="URL",
                        help="open this store directly (postgresql://... or sqlite:///PATH)")


def run(ns: argparse.Namespace) -> int:
    """Run ``outlast gc``; the exit status (2 for a mistake in how it was called)."""
    try:
        if ns.data_dir is not None or ns.store is not None:
            report = asyncio.run(_direct(ns))
        else:
            report = _through_server(ns)
    except StartupError as exc:
        print(f"outlast gc: {exc}", file=sys.stderr)
        return 2
    except _Refused as exc:
        print(f"outlast gc: {exc}", file=sys.stderr)
        return 1
    _report(report, as_json=ns.json)
    return 0


class _Refused(Exception):
    """The server refused, or could not be reached."""


def _through_server(ns: argparse.Namespace) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ns.token}"} if ns.token else {}
    params: dict[str, str] = {"dryRun": "true" if ns.dry_run else "false"}
    if ns.older_than is not None:
        params["olderThan"] = repr(ns.older_than)
    try:
        # No read timeout: a large first collection takes as long as it takes.
        with httpx.Client(base_url=ns.url, headers=headers,
                          timeout=httpx.Timeout(30, read=None)) as c:
            resp = c.post("/admin/gc", params=params)
    except httpx.TransportError as exc:
        raise _Refused(f"cannot reach {ns.url}: {one_line(exc)} (is the server running? "
                       "with none, pass --data-dir or --store)") from None
    try:
        body: dict[str, Any] = resp.json()
    except ValueError:
        raise _Refused(f"{resp.status_code}: {resp.text[:200]}") from None
    if resp.status_code >= 400:
        err = body.get("error") or {}
        raise _Refused(f"{resp.status_code} {err.get('code')}: {err.get('message')}")
    return body


async def _direct(ns: argparse.Namespace) -> dict[str, Any]:
    # The store and the engine's retention, only for this way (every other command of the
    # CLI starts without them).
    from outlast.cli.startup import store_for, store_problem
    from outlast.engine import retention
    from outlast.store.sqlite import DataDirLocked

    given: dict[str, Any] = {}
    if ns.data_dir is not None:
        given["data_dir"] = ns.data_dir
    if ns.store is not None:
        given["store_url"] = ns.store
    try:
        settings = Settings(**given)
    except ValidationError as exc:
        raise StartupError(explain(exc)) from None
    window = ns.older_than if ns.older_than is not None else settings.event_retention
    if window is None:
        raise StartupError(f"no retention window: pass --older-than S (or set "
                           f"{option('event_retention').env})")
    store = store_for(settings)
    try:
        await store.open()
    except DataDirLocked:
        raise StartupError("a server is using this SQLite store: run outlast gc without "
                           "--data-dir / --store to go through it (--url)") from None
    except Exception as exc:
        raise StartupError(store_problem(settings, exc)) from None
    try:
        freed = await retention.compact(store, time.time() - window, dry_run=ns.dry_run)
    finally:
        await store.close()
    return _as_json(ns.dry_run, window, freed)


def _as_json(dry_run: bool, window: float, freed: Freed) -> dict[str, Any]:
    return {"dryRun": dry_run, "olderThan": window, "runs": freed.runs,
            "events": freed.events, "bytes": freed.bytes}


def _report(report: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report))
        return
    verb = "would free" if report["dryRun"] else "freed"
    print(f"{verb} {report['runs']} runs, {report['events']} events, {report['bytes']} "
          f"bytes (events of runs final for more than {report['olderThan']:g} s)")
