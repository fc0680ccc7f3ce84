"""The one place where domain errors become HTTP statuses and JSON bodies."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from outlast.errors import OutlastError

log = logging.getLogger("outlast.http")

STATUS: dict[str, int] = {
    "unauthorized": 401,
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
    "invalid_last_event_id": 400,
    "payload_too_large": 413,
    "request_timeout": 408,
    "method_not_allowed": 405,
    "draining": 503,
    "unavailable": 503,
}


def error_body(code: str, message: str, **fields: Any) -> dict[str, Any]:
    """SPEC §3 error shape."""
    return {"error": {"code": code, "message": message, **fields}}


def error_response(code: str, message: str, **fields: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == "unauthorized" else None
    return JSONResponse(error_body(code, message, **fields), status_code=STATUS.get(code, 500),
                        headers=headers)


def install(app: FastAPI) -> None:
    """Register the exception handlers."""

    async def domain(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, OutlastError)
        if exc.code not in STATUS:
            log.error("unmapped error %s: %s", exc.code, exc.message)
            return error_response("internal", "internal error")
        return error_response(exc.code, exc.message, **exc.fields)

    async def validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
            for e in exc.errors()[:20]
        ]
        return error_response("invalid_request", "the request is not valid", problems=problems)

    async def http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_response("not_found", "no such resource")
        if exc.status_code == 405:
            return error_response("method_not_allowed", "method not allowed")
        return JSONResponse(error_body("http_error", str(exc.detail)),
                            status_code=exc.status_code)

    app.add_exception_handler(OutlastError, domain)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(HTTPException, http)
