"""Operations on the whole store: ``POST /admin/gc`` (spec §6), what ``outlast gc``
calls while a server holds the store."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from outlast.errors import Forbidden
from outlast.http.deps import EngineDep, Principal

router = APIRouter()


@router.post("/admin/gc", summary="Remove the events of runs past the retention window now",
             tags=["ops"])
async def compact(
    request: Request, engine: EngineDep, principal: Principal,
    dry_run: bool = Query(default=False, alias="dryRun"),
    older_than: float | None = Query(default=None, alias="olderThan", gt=0, le=1e12,
                                     allow_inf_nan=False),
) -> dict[str, Any]:
    """Compacts the runs final for longer than ``olderThan`` seconds (default: the
    server's ``--event-retention``): their events go, their records and the thread
    snapshots stay. ``dryRun`` only measures. Says how many runs, events and event
    bytes were (or would be) freed."""
    # Without tokens every caller is the local principal on a loopback bind (or one
    # chose --insecure); with tokens, only the principals --admin names.
    if request.app.state.principals.enabled and principal not in engine.settings.admins:
        raise Forbidden("only a principal named by the server's --admin may run gc",
                        principal=principal)
    window, freed = await engine.compact(older_than, dry_run=dry_run)
    return {"dryRun": dry_run, "olderThan": window, "runs": freed.runs,
            "events": freed.events, "bytes": freed.bytes}
