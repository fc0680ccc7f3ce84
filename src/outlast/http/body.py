"""Reading request bodies within limits: size before buffering, time against slow clients."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import ClientDisconnect, Request

from outlast.errors import InvalidRequest, OutlastError, PayloadTooLarge


class RequestTimeout(OutlastError):
    """The request body did not arrive in time."""

    code = "request_timeout"


async def read_json(request: Request, limit: int, within: float) -> Any:
    """The JSON body, refused with 413 past ``limit`` bytes (never buffered whole)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise PayloadTooLarge(f"the body is over the limit of {limit} bytes", limit=limit)
        except ValueError:
            raise InvalidRequest("Content-Length is not a number") from None
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(within):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(f"the body is over the limit of {limit} bytes",
                                          limit=limit)
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive within {within:g} s") from None
    except ClientDisconnect:
        # Nothing is admitted from half a body; a 4xx (nobody reads it), not a 500.
        raise InvalidRequest("the client closed the connection before sending the whole "
                             "body") from None
    raw = b"".join(chunks)
    if not raw:
        raise InvalidRequest("the request needs a JSON body")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}") from None
