"""Reading requests within limits: header bytes, body size before buffering, time
against slow clients, and JSON the store and the streams can carry."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from outlast.errors import InvalidRequest, OutlastError, PayloadTooLarge
from outlast.http.errors import error_response

# Deeper JSON is no AG-UI input; nested past this, copies and patches would recurse.
MAX_JSON_DEPTH = 64


# A refused body is still read and thrown away up to this size (see read_json).
DRAIN_LIMIT = 4 << 20


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is over the limit of {limit} bytes", limit=limit)


class UnsupportedMediaType(OutlastError):
    """The body is declared as something other than JSON."""

    code = "unsupported_media_type"


async def check_json_type(request: Request, within: float) -> None:
    """A body declared JSON (``application/json``, ``…+json``) or not declared at all
    (then read as JSON: curl and many scripts send none); any other type is a 415
    that says what to send, not a confusing "not a valid dictionary"."""
    declared = request.headers.get("content-type")
    if not declared:
        return
    kind = declared.split(";", 1)[0].strip().lower()
    if kind == "application/json" or (kind.startswith("application/") and
                                      kind.endswith("+json")):
        return
    # Read and drop the body first (as read_json does past its limit): closing on
    # unread data resets the connection, and the answer would be lost.
    size = 0
    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(within):
            async for chunk in request.stream():
                size += len(chunk)
                if size > DRAIN_LIMIT:
                    break
    hint = " (curl -d sends that: add -H 'content-type: application/json')" \
        if kind == "application/x-www-form-urlencoded" else ""
    raise UnsupportedMediaType(f"the body must be JSON, sent with Content-Type: "
                               f"application/json or none, not {declared[:80]!r}{hint}",
                               contentType=declared[:80])


class RequestTimeout(OutlastError):
    """The request body did not arrive in time."""

    code = "request_timeout"


async def read_json(request: Request, limit: int, within: float) -> Any:
    """The JSON body, refused with 413 past ``limit`` bytes (never buffered whole)."""
    declared = request.headers.get("content-length")
    too_large = False
    if declared is not None:
        try:
            too_large = int(declared) > limit
        except ValueError:
            raise InvalidRequest("Content-Length is not a number") from None
        if too_large and int(declared) > DRAIN_LIMIT:
            raise _too_large(limit)  # not worth reading: answer and close at once
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(within):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    # Keep reading, but only to throw it away: closing a connection with
                    # unread data makes the kernel reset it, and the 413 would be lost.
                    too_large = True
                    chunks.clear()
                    if size > DRAIN_LIMIT:
                        break
                elif not too_large:
                    chunks.append(chunk)
    except TimeoutError:
        if too_large:
            raise _too_large(limit) from None
        raise RequestTimeout(f"the request body did not arrive within {within:g} s") from None
    except ClientDisconnect:
        # Nothing is admitted from half a body; a 4xx (nobody reads it), not a 500.
        raise InvalidRequest("the client closed the connection before sending the whole "
                             "body") from None
    if too_large:
        raise _too_large(limit)
    raw = b"".join(chunks)
    if not raw:
        raise InvalidRequest("the request needs a JSON body")
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidRequest(f"the body is nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_json(value)
    # Kept on the request: FastAPI validates the body model from these, and the
    # route admits the body as it arrived (its fingerprint is G3's identity).
    request._body = raw
    request._json = value
    return value


def body_of(request: Request) -> Any:
    """The JSON body a ``JsonBodyRoute`` read, as the client sent it."""
    return request._json


def release_body(request: Request, model: BaseModel) -> None:
    """Let go of a body once it is stored. FastAPI keeps the request, the parsed body and
    the validated ``model`` in its handler's frame until the response ends: for a run's
    stream, as long as the run lasts, holding whatever history the client resent (three
    times: the bytes, the parse, the model). They are emptied in place, so those
    references hold nothing; the route must not read them afterwards."""
    request._body = b""
    body = getattr(request, "_json", None)
    if isinstance(body, dict):
        body.clear()
    for value in model.__dict__.values():
        if isinstance(value, (list, dict)):
            value.clear()


class JsonBodyRoute(APIRoute):
    """A route whose JSON body is read by ``read_json`` (size before buffering, time,
    depth, valid Unicode) before FastAPI validates it against the route's model.

    The caller is authenticated first: nobody without a token makes us read a body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def read_then_handle(request: Request) -> Response:
            await request.app.state.principals.resolve(request)
            settings = request.app.state.engine.settings
            await check_json_type(request, settings.body_timeout)
            await read_json(request, settings.max_body_bytes, settings.body_timeout)
            return await handler(request)

        return read_then_handle


def check_json(value: Any, depth: int = 1) -> None:
    """Refuse JSON nested deeper than ``MAX_JSON_DEPTH`` or holding text that is not
    valid Unicode (a lone surrogate escape): stored as UTF-8 it would fail later, a 500."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if level > MAX_JSON_DEPTH:
            raise InvalidRequest(f"the body is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key)
                stack.append((child, level + 1))
        elif isinstance(item, list):
            stack.extend((child, level + 1) for child in item)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest("the body holds a string that is not valid Unicode "
                                 "(a lone surrogate escape)") from None


class HeaderLimit:
    """ASGI middleware: a request whose target and headers exceed ``limit`` bytes gets
    431 ``headers_too_large`` before any route runs. (uvicorn's own, larger cap on the
    request head answers a plain 400 beyond it.)"""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            size += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if size > self.limit:
                response = error_response(
                    "headers_too_large",
                    f"the request line and headers are over the limit of {self.limit} bytes",
                    limit=self.limit)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
