"""The one place where domain errors become HTTP statuses and JSON bodies."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from outlast.errors import LimitExceeded, OutlastError, StoreUnavailable

log = logging.getLogger("outlast.http")

STATUS: dict[str, int] = {
    "unauthorized": 401,
    "forbidden": 403,
    "host_not_allowed": 403,
    "origin_not_allowed": 403,
    "not_found": 404,
    "run_not_found": 404,
    "thread_not_found": 404,
    "agent_not_found": 404,
    "run_already_active": 409,
    "run_id_conflict": 409,
    "thread_busy": 409,
    "interrupt_not_pending": 409,
    "interrupt_expired": 409,
    "idempotency_key_reused": 422,
    "invalid_request": 422,
    "resume_incomplete": 422,
    "invalid_answer": 422,
    "limit_exceeded": 429,
    "invalid_last_event_id": 400,
    "run_compacted": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "request_timeout": 408,
    "headers_too_large": 431,
    "method_not_allowed": 405,
    "draining": 503,
    "storage_full": 503,
    "store_unavailable": 503,
    # fork
    "history_diverged": 409,
    "thread_id_conflict": 409,
    "unavailable": 503,
    "internal": 500,
}


def error_body(code: str, message: str, **fields: Any) -> dict[str, Any]:
    """spec §3 error shape."""
    return {"error": {"code": code, "message": message, **fields}}


# The request's body may still be arriving (slowly, or too much of it): end the
# connection after answering instead of reading on.
CLOSE_AFTER = frozenset({"request_timeout", "payload_too_large", "headers_too_large"})

# Every refusal has the spec §3 shape; the OpenAPI document says so for every route.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
    }},
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"description": description,
             "content": {"application/json": {"schema": ERROR_SCHEMA}}}
    for status, description in (("4XX", "Refused: `{\"error\": {\"code\", \"message\"}}`"),
                                 ("5XX", "Unavailable (draining) or an internal error"))
}


def error_response(code: str, message: str, *,
                   response_headers: Mapping[str, str] | None = None,
                   **fields: Any) -> JSONResponse:
    """The JSON error response for ``code`` (its status from ``STATUS``)."""
    extra = dict(response_headers or {})
    if code == "unauthorized":
        extra["WWW-Authenticate"] = "Bearer"
    if code in CLOSE_AFTER:
        extra["Connection"] = "close"
    return JSONResponse(error_body(code, message, **fields), status_code=STATUS.get(code, 500),
                        headers=extra or None)


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at the request's path: Starlette's 405 names
    only the first route that matched the path (``GET /threads/{id}``, not its
    ``DELETE``)."""
    routes = request.app.router.routes
    return [method for method in METHODS
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL
                   for route in routes)]


def install(app: FastAPI) -> None:
    """Register the exception handlers."""

    async def domain(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OutlastError)
        if exc.code not in STATUS:
            log.error("unmapped error %s: %s", exc.code, exc.message)
            return error_response("internal", "internal error")
        if isinstance(exc, StoreUnavailable | LimitExceeded):
            # Nothing was stored; the load balancer and the client may try again.
            return error_response(exc.code, exc.message, **exc.fields,
                                  response_headers={"Retry-After": str(exc.retry_after)})
        return error_response(exc.code, exc.message, **exc.fields)

    async def validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
            for e in exc.errors()[:20]
        ]
        return error_response("invalid_request", "the request is not valid", problems=problems)

    async def http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_response("not_found", "no such resource")
        if exc.status_code == 405:
            allow = allowed_methods(request)
            if not allow or request.method in allow:  # refused inside a mount: static files
                given = (exc.headers or {}).get("Allow", "")
                allow = [m.strip() for m in given.split(",")] if given else ["GET", "HEAD"]
            return error_response(
                "method_not_allowed",
                f"{request.method} is not served here; this path serves {', '.join(allow)}",
                response_headers={**(exc.headers or {}), "Allow": ", ".join(allow)})
        return JSONResponse(error_body("http_error", str(exc.detail)),
                            status_code=exc.status_code, headers=exc.headers)

    async def internal(_: Request, exc: Exception) -> JSONResponse:
        # A bug, never the client's input; the traceback is logged by the server.
        return error_response("internal", "internal error")

    app.add_exception_handler(OutlastError, domain)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(HTTPException, http)
    app.add_exception_handler(Exception, internal)
