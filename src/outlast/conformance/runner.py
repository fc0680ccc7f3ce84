"""Runs the checks against one endpoint: what it advertises, a reference run, then
every check (at once, each on threads of its own), ``restart`` last and alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from ag_ui.core import AgentCapabilities
from pydantic import ValidationError

from outlast.conformance.checks.control import busy_thread, cancel
from outlast.conformance.checks.interrupts import interrupt_durable
from outlast.conformance.checks.replay import reattach, retry_attaches
from outlast.conformance.checks.restart import restart
from outlast.conformance.checks.verdicts import answered, fail
from outlast.conformance.checks.visibility import progress_visible, survives_disconnect
from outlast.conformance.report import CHECKS, Report, Result
from outlast.conformance.session import BINDING, Options, Session
from outlast.conformance.validity import valid
from outlast.conformance.wire import Exchange, Wire, final_event

Check = Callable[[Session], Awaitable[Result]]

CONCURRENT: dict[str, Check] = {
    "survives-disconnect": survives_disconnect,
    "progress-visible": progress_visible,
    "reattach": reattach,
    "retry-attaches": retry_attaches,
    "busy-thread": busy_thread,
    "cancel": cancel,
    "interrupt-durable": interrupt_durable,
}


def capabilities_of(ex: Exchange, name: str) -> dict[str, Any] | None:
    """AG-UI ``AgentCapabilities`` from a discovery answer (§11): the object itself, or
    an ``{"agents": [{"name", "capabilities"}]}`` listing's entry for ``name``."""
    if ex.status != 200:
        return None
    data = ex.json()
    if isinstance(data, dict) and isinstance(data.get("agents"), list):
        data = next((a.get("capabilities") for a in data["agents"]
                     if isinstance(a, dict) and a.get("name") == name), None)
    if not isinstance(data, dict) or not data:
        return None
    try:
        AgentCapabilities.model_validate(data)
    except ValidationError:
        return None
    return data


async def discover(s: Session) -> None:
    """§11: ``GET <endpoint>/capabilities``, else the listing one level up."""
    base = s.url.rstrip("/")
    parent, _, name = base.rpartition("/")
    for url in (f"{base}/capabilities", parent):
        ex = await s.wire.request("GET", url, within=5)
        found = capabilities_of(ex, name)
        if found is not None:
            s.capabilities, s.capabilities_source = found, f"GET {url}"
            return


async def guarded(check_id: str, check: Check, s: Session, limit: float) -> Result:
    """A check bounded in time; a checker bug is a failure that says so."""
    try:
        return await asyncio.wait_for(check(s), limit)
    except TimeoutError:
        return Result(check_id, "fail", f"the check did not finish within {limit:.0f} s")
    except Exception as exc:  # the report must still come out
        return Result(check_id, "fail", f"the checker failed: {type(exc).__name__}: {exc}")


async def run_checks(options: Options) -> Report:
    """Every check (or ``options.only``) against ``options.url``."""
    began = time.monotonic()
    wanted = [c for c in CHECKS if options.only is None or c in options.only]
    headers = {"User-Agent": "outlast-check", **options.headers}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(options.timeout, connect=5),
                                 limits=limits) as client:
        s = Session(options, Wire(client, headers))
        await discover(s)
        thread, run = s.ids("reference")
        s.reference_thread = thread
        ref = await s.post(s.run_input(thread, run))
        results: dict[str, Result] = {}
        if ref.status is None or ref.status >= 300 or final_event(ref) is None:
            why = answered(ref) or ("the stream did not end with the run's end: "
                                    f"{ref.error or 'it was cut'}")
            for c in wanted:
                results[c] = fail(c, f"a plain run does not work, so nothing can be "
                                     f"checked: {why}", ref)
        else:
            s.reference = ref
            s.keep(ref, "a plain run")
            limit = 4 * s.run_seconds + 60
            todo = [c for c in wanted if c in CONCURRENT]
            done = await asyncio.gather(*(guarded(c, CONCURRENT[c], s, limit) for c in todo))
            results.update(zip(todo, done, strict=True))
            if "restart" in wanted:
                results["restart"] = await guarded("restart", restart, s,
                                                   limit + 240)
            if "valid" in wanted:
                results["valid"] = await asyncio.to_thread(valid, s.streams)
    return Report(options.url, BINDING, [results[c] for c in wanted],
                  capabilities=s.capabilities, capabilities_source=s.capabilities_source,
                  seconds=time.monotonic() - began)


def check(options: Options) -> Report:
    """Synchronous entry point (the CLI's)."""
    return asyncio.run(run_checks(options))
