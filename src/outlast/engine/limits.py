"""Limits per principal: runs at once, runs per minute, tokens per day.

Each limit has a server-wide default (``--limit-active-runs``, ``--limit-runs-per-minute``,
``--limit-tokens-per-day``; 0 for none) that ``--limits-file`` overrides per principal
(a JSON object: ``{"alice": {"activeRuns": 2, "runsPerMinute": 10, "tokensPerDay":
100000}}``). Admission checks them in its own store transaction, before anything is
stored (429 ``limit_exceeded`` with ``Retry-After``), holding a per-principal lock on
PostgreSQL so that several processes cannot each let one more through. A running run
whose principal's tokens of the last 24 hours pass the day's budget is stopped after
the model call that passed it: ``RUN_ERROR`` ``budget_exceeded``, its journal intact.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from outlast.config import parse_limits as parse
from outlast.engine.outages import OUTAGES

log = logging.getLogger("outlast.limits")

DAY = 86_400.0
STOPS = {**OUTAGES, "budget_exceeded": "The day's token budget is spent: the run was "
         "stopped after the model call that passed it. What it did is kept; more runs "
         "can start once the budget allows."}
"""The stop reasons that end a run failed, with what its RUN_ERROR says."""


@dataclass(frozen=True)
class PrincipalLimits:
    """One principal's limits (0: none)."""

    active_runs: int = 0
    runs_per_minute: int = 0
    tokens_per_day: int = 0

    @property
    def any(self) -> bool:
        return bool(self.active_runs or self.runs_per_minute or self.tokens_per_day)


@functools.lru_cache(maxsize=4)
def _overrides(path: str, _mtime: float) -> dict[str, dict[str, int]]:
    return parse(Path(path).read_text("utf-8"))


def of(settings: Any, principal: str) -> PrincipalLimits:
    """``principal``'s limits: the server's defaults, with its limits file's overrides (read
    again when the file changes)."""
    base = PrincipalLimits(settings.limit_active_runs, settings.limit_runs_per_minute,
                           settings.limit_tokens_per_day)
    path: Path | None = settings.limits_file
    if path is None:
        return base
    try:
        mine = _overrides(str(path), path.stat().st_mtime).get(principal, {})
    except (OSError, ValueError):
        return base  # checked at start-up; a file broken since keeps the defaults
    return PrincipalLimits(**{f.name: mine.get(f.name, getattr(base, f.name))
                              for f in fields(base)})


class Budget:
    """A running run's watch on its principal's tokens of the last 24 hours: after each
    model call, the other runs' from the ledger (every process's committed calls) and
    this run's own as it counts them; past the budget, it stops the run."""

    def __init__(self, store: Any, run: Any, limit: int, mine: Callable[[], int],
                 stop: Callable[[str], None]) -> None:
        # The principal and rid only: the record may hold the run's whole input.
        self.store, self.principal, self.rid, self.limit = store, run.principal, run.rid, limit
        self.mine, self.stop = mine, stop
        self._look: asyncio.Task[None] | None = None

    def spent(self) -> None:
        """A model call's tokens were recorded: look at the budget (one look at a time;
        this run's own count is read when the look ends, so none is missed)."""
        if self.limit and (self._look is None or self._look.done()):
            self._look = asyncio.ensure_future(self._check())

    async def _check(self) -> None:
        try:
            others = await self.store.usage_total(self.principal, time.time() - DAY, but=self.rid)
        except Exception as exc:  # the store is down: the next call looks again
            log.warning("the token budget of %s could not be read: %s", self.principal, exc)
            return
        if others + self.mine() >= self.limit:
            self.stop("budget_exceeded")
