"""Limits per principal, checked in admission's transaction (``engine.limits``)."""

from __future__ import annotations

import math
from typing import Any

from outlast.errors import LimitExceeded
from outlast.store.sqlconn import Conn

MINUTE = 60.0
DAY = 86_400.0
BUSY_RETRY = 5  # seconds: a run at once ends when it ends


def _wait(oldest: Any, window: float, now: float) -> int:
    """Seconds until the oldest entry of a window leaves it (at least 1)."""
    return max(1, math.ceil(float(oldest) + window - now)) if oldest is not None else 1


async def check_limits(c: Conn, principal: str, limits: Any, now: float) -> None:
    """Refuse a new run of ``principal`` at one of its limits (LimitExceeded, nothing
    stored). On PostgreSQL the principal's admissions wait for one another from here to
    the commit, so that processes cannot each let one more through."""
    await c.one("principal_lock", principal=principal)
    if limits.active_runs:
        row = await c.one("owner_active_runs", principal=principal)
        if row is not None and int(row["n"]) >= limits.active_runs:
            raise LimitExceeded(
                f"{principal} has {row['n']} runs queued or running, its limit; start more once "
                "one ends", BUSY_RETRY, limit="activeRuns", value=limits.active_runs)
    if limits.runs_per_minute:
        row = await c.one("owner_runs_since", principal=principal, since=now - MINUTE)
        if row is not None and int(row["n"]) >= limits.runs_per_minute:
            raise LimitExceeded(
                f"{principal} started {row['n']} runs in the last minute, its limit",
                _wait(row["oldest"], MINUTE, now), limit="runsPerMinute",
                value=limits.runs_per_minute)
    if limits.tokens_per_day:
        row = await c.one("usage_total_since", principal=principal, since=now - DAY, rid=0)
        if row is not None and int(row["total"] or 0) >= limits.tokens_per_day:
            raise LimitExceeded(
                f"{principal}'s runs spent {row['total']} tokens in the last 24 hours, its "
                "budget", _wait(row["oldest"], DAY, now), limit="tokensPerDay",
                value=limits.tokens_per_day)
