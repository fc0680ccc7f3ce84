"""``GET /usage``: the tokens a principal's runs spent, per model and per thread."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Query, Request

from outlast.engine.usage import row_json
from outlast.errors import Forbidden, InvalidRequest
from outlast.http.deps import EngineDep, Principal, check_id

router = APIRouter()

DAY = 86_400.0
MAX_THREADS = 1000


@router.get("/usage", summary="Tokens spent by a principal's runs in a time window",
            tags=["ops"])
async def get_usage(
    request: Request, engine: EngineDep, principal: Principal,
    of: str | None = Query(default=None, alias="principal", max_length=200),
    since: float | None = Query(default=None, ge=0, le=1e12, allow_inf_nan=False),
    until: float | None = Query(default=None, ge=0, le=1e12, allow_inf_nan=False),
    threads: int = Query(default=100, ge=1, le=MAX_THREADS),
) -> dict[str, Any]:
    """The tokens the runs of principal ``of`` (default: the caller) reported from
    ``since`` to ``until`` (Unix seconds; default: the last 24 hours), summed in all,
    per provider and model, and per thread (the ``threads`` largest). Another
    principal's usage is for the principals ``--admin`` names."""
    who = principal if of is None else of
    if of is not None:
        check_id(of, "principal", engine.settings.max_id_length)
    if who != principal and request.app.state.principals.enabled \
            and principal not in engine.settings.admins:
        raise Forbidden("only a principal named by the server's --admin may read another "
                        "principal's usage", principal=principal)
    end = time.time() if until is None else until
    start = end - DAY if since is None else since
    if start > end:
        raise InvalidRequest("since is after until", since=start, until=end)
    models, by_thread = await engine.usage(who, start, end, threads=threads)
    total = {k: sum(m.get(k, 0) for m in map(row_json, models))
             for k in ("inputTokens", "outputTokens", "totalTokens", "reasoningTokens",
                       "cachedInputTokens", "calls")}
    return {"principal": who, "since": start, "until": end, "total": total,
            "models": [row_json(m) for m in models],
            "threads": [{"threadId": t.key, **row_json(t)} for t in by_thread]}
