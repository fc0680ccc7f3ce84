"""Request-scoped access to the engine, the caller and validated options."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Request

from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.errors import InvalidLastEventId, InvalidRequest
from outlast.http.auth import Principals

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")
MAX_SEQ = 2**53 - 1


# Dependencies are ``async def`` on purpose: a sync one runs in a thread pool, and
# that hop lets the server notice a client that sent its request and closed at once
# before the handler reads the body, which uvicorn then drops (G4: such a run must
# still be admitted).
async def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


async def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.engine.settings
    return settings


async def principal(request: Request) -> str:
    principals: Principals = request.app.state.principals
    return principals.authenticate(request)


EngineDep = Annotated[Engine, Depends(engine_of)]
Owner = Annotated[str, Depends(principal)]


def check_id(value: Any, what: str, max_length: int) -> str:
    """Ids (threadId, runId, keys) are short and from a safe alphabet."""
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{what} must be a non-empty string", field=what)
    if len(value) > max_length:
        raise InvalidRequest(f"{what} is longer than {max_length} characters", field=what)
    if not ID_RE.match(value):
        raise InvalidRequest(
            f"{what} may contain only letters, digits and . _ : @ - (and must not start "
            "with punctuation)", field=what)
    return value


def parse_seq(value: str | None, what: str) -> int:
    """A ``seq`` from ``Last-Event-ID`` or ``?after=``."""
    if value is None or value == "":
        return 0
    if not value.isdigit() or len(value) > 16 or int(value) > MAX_SEQ:
        raise InvalidLastEventId(f"{what} must be a non-negative integer event id",
                                 value=value[:50])
    return int(value)


def choice(value: str | None, allowed: tuple[str, ...], default: str, header: str) -> str:
    if value is None or value == "":
        return default
    v = value.strip().lower()
    if v not in allowed:
        raise InvalidRequest(f"{header} must be one of {', '.join(allowed)}", header=header)
    return v
