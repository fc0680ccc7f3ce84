"""The ASGI application: routes, errors, the engine's lifespan, the web client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.staticfiles import StaticFiles

from outlast.engine.runtime import Engine
from outlast.http import (
    errors,
    openapi,
    routes_admin,
    routes_agents,
    routes_fork,
    routes_runs,
    routes_threads,
    routes_usage,
)
from outlast.http.auth import Principals
from outlast.http.deps import Principal
from outlast.http.guards import Guards, HostNames, inline_scripts_policy
from outlast.http.request_limits import HeaderLimit

EXPOSED = ["Outlast-Run-Id", "Outlast-Thread-Id", "Outlast-Replayed"]
DOCS_ASSETS = "/docs/assets"


def create_app(engine: Engine, principals: Principals | None = None, *,
               lifespan: bool = True, mounted: bool = False) -> FastAPI:
    """An app serving ``engine``; the engine starts and stops with the app's lifespan
    (with ``lifespan=False`` the host starts and stops it, as ``outlast.mount`` does).
    A ``mounted`` app leaves the Host and Origin policy to the app it is mounted in."""

    @asynccontextmanager
    async def app_lifespan(_: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    # /docs is served with Swagger UI's assets from the swagger-ui-py package, not a
    # CDN: it works offline and behind egress filters. (ReDoc has no packaged assets.)
    app = FastAPI(title="outlast", version="0.1.0", lifespan=app_lifespan if lifespan else None,
                  description="Durable, connection-independent agent runs over AG-UI.",
                  responses=errors.ERROR_RESPONSES, docs_url=None, redoc_url=None,
                  # A body without Content-Type is read as JSON (JsonBodyRoute refuses
                  # any other declared type with 415).
                  strict_content_type=False)
    app.state.engine = engine
    app.state.principals = principals or Principals()
    errors.install(app)
    openapi.install(app, engine, app.state.principals)
    _add_middleware(app, engine, mounted)
    for module in (routes_agents, routes_threads, routes_runs, routes_admin, routes_fork,
                   routes_usage):
        app.include_router(module.router)
    _add_ops_routes(app, engine)
    _add_web_routes(app)
    return app


def _add_middleware(app: FastAPI, engine: Engine, mounted: bool) -> None:
    """The header limit, CORS when origins are configured, and, outermost, the Host and
    Origin guards (left to the host app when mounted)."""
    settings = engine.settings
    app.add_middleware(HeaderLimit, limit=settings.max_header_bytes)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"], expose_headers=EXPOSED)
    app.add_middleware(  # outermost: nothing runs for a refused name or origin
        Guards, hosts=None if mounted else HostNames.for_server(settings.host,
                                                                settings.allowed_hosts),
        origins=None if mounted else settings.cors_origins)


def _add_ops_routes(app: FastAPI, engine: Engine) -> None:
    """Liveness, readiness and metrics."""

    @app.get("/healthz", summary="Liveness", tags=["ops"])
    async def healthz() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: the store answers and writes", tags=["ops"],
             response_model=None)
    async def readyz() -> JSONResponse:
        if engine.draining:
            return errors.error_response("draining", "the server is shutting down")
        outage = engine.outages.outage
        if outage is not None:  # ready again by itself once a write works
            return errors.error_response(
                outage.code, outage.message,
                response_headers={"Retry-After": str(outage.retry_after)})
        try:
            await engine.ping()
        except Exception:
            return errors.error_response("unavailable", "the store does not answer")
        return JSONResponse({"status": "ready"})

    # Liveness and readiness answer without a token (probes carry none); metrics
    # count every principal's runs, so they need one whenever tokens are configured.
    @app.get("/metrics", summary="Prometheus metrics", tags=["ops"], response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def metrics(_: Principal) -> Response:
        return Response(generate_latest(engine.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)


def _add_web_routes(app: FastAPI) -> None:
    """The bundled web client at ``/`` and its files, and Swagger UI at ``/docs``."""
    static = resources.files("outlast.web").joinpath("static")

    @app.get("/", summary="The bundled web client", tags=["web"], response_class=HTMLResponse)
    async def index(_: Request) -> HTMLResponse:
        page = static.joinpath("index.html")
        if not page.is_file():
            return HTMLResponse("<!doctype html><title>outlast</title><p>outlast is running.",
                                status_code=200)
        return HTMLResponse(page.read_text("utf-8"))

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title="outlast API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png")
        page.headers["content-security-policy"] = inline_scripts_policy(bytes(page.body))
        return page

    app.mount(DOCS_ASSETS, StaticFiles(packages=[("swagger_ui", "static")]), name="docs-assets")
    app.mount("/static", StaticFiles(packages=[("outlast.web", "static")]), name="static")
