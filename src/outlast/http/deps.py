"""Request-scoped access to the engine, the caller and validated options."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Depends, Path, Request

from outlast.engine.runtime import Engine
from outlast.errors import InvalidLastEventId, InvalidRequest
from outlast.http.auth import Principals

# \Z, not $: "$" also matches before a trailing newline, which would reach headers.
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]*\Z")
MAX_SEQ = 2**53 - 1
# A seq as ``Last-Event-ID`` and ``?after=`` carry it: up to 15 digits, so that every
# one a pattern admits is below MAX_SEQ (JavaScript's largest exact integer).
SEQ_PATTERN = "^[0-9]{0,15}$"


# Dependencies are ``async def`` on purpose: a sync one runs in a thread pool, and
# that hop lets the server notice a client that sent its request and closed at once
# before the handler reads the body, which uvicorn then drops (G4: such a run must
# still be admitted).
async def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


async def principal(request: Request) -> str:
    principals: Principals = request.app.state.principals
    return await principals.resolve(request)


EngineDep = Annotated[Engine, Depends(engine_of)]
Principal = Annotated[str, Depends(principal)]

# The id rule as the OpenAPI document states it (ECMA-262, where "$" is the very end);
# check_id enforces it, with the server's max_id_length.
ID_DOC: dict[str, Any] = {"pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]*$", "maxLength": 200}
ThreadId = Annotated[str, Path(json_schema_extra=ID_DOC)]
RunId = Annotated[str, Path(json_schema_extra=ID_DOC)]


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
    # isascii: "²" and other Unicode digits pass isdigit() but not int().
    if not (value.isascii() and value.isdigit()) or len(value) > 15:
        raise InvalidLastEventId(f"{what} must be a non-negative integer event id",
                                 value=value[:50])
    return int(value)


def check_after(after: int, last_seq: int, what: str) -> int:
    """A resume point within the run's log: a client is shown only committed events
    (G2), so an id past the run's last ``seq`` is none this server ever sent."""
    if after > last_seq:
        raise InvalidLastEventId(f"{what} {after} is past the run's last event ({last_seq})",
                                 value=str(after), lastSeq=last_seq)
    return after


def choice(value: str | None, allowed: tuple[str, ...], default: str, header: str) -> str:
    if value is None or value == "":
        return default
    v = value.strip().lower()
    if v not in allowed:
        raise InvalidRequest(f"{header} must be one of {', '.join(allowed)}", header=header)
    return v
