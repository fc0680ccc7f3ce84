"""What a web page the user happens to visit cannot make the server do.

A browser lets any page send requests to 127.0.0.1. Two things stop a page from
using that against a local server (docs/threat-model.md):

* **Host.** A page on ``evil.example`` can rebind its name to 127.0.0.1 and, being
  same-origin for the browser, read every answer. Its requests still carry
  ``Host: evil.example``: only the names the server is reached by are served
  (loopback names, the bind address and ``--allowed-host``), before any route runs.
  Liveness and readiness answer any name: probes use addresses, and they tell
  nothing.
* **Origin.** A page on another origin can still *send* a form or a ``fetch`` that
  changes something, unread. A request that changes something (any method but GET,
  HEAD and OPTIONS) and carries an ``Origin`` is served only when that origin is the
  server's own or one of ``--cors-origin``.

Every response also carries the headers that keep a page from being framed,
sniffed into another type or leaking its address (``SECURITY_HEADERS``); a route
may set its own Content-Security-Policy (``/docs`` allows its one inline script).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from outlast.config import host_name
from outlast.http.errors import error_response

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ANY_HOST_PATHS = frozenset({"/healthz", "/readyz"})
CSP = ("default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
       "form-action 'self'")
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


class HostNames:
    """The names a request's ``Host`` may carry: exact names, ``.example.com`` for a
    domain and its subdomains, or ``*`` for any."""

    def __init__(self, names: Iterable[str]) -> None:
        self.any = False
        self.exact: set[str] = set()
        self.domains: list[str] = []
        for raw in names:
            if raw.strip() == "*":
                self.any = True
            elif raw.startswith("."):
                self.domains.append(raw.lower().rstrip("."))
            elif (name := host_name(raw)) is not None:
                self.exact.add(name)

    @classmethod
    def for_server(cls, bind: str, allowed: Iterable[str]) -> HostNames:
        """Loopback names, the bind address unless it is every address, and ``allowed``."""
        names = [*LOOPBACK, *allowed]
        if bind not in WILDCARD_BINDS:
            names.append(bind)
        return cls(names)

    def admit(self, header: str | None) -> bool:
        if self.any:
            return True
        name = host_name(header or "")
        if name is None:
            return False
        return name in self.exact or any(name == d[1:] or name.endswith(d)
                                         for d in self.domains)


INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def inline_scripts_policy(page: bytes) -> str:
    """A Content-Security-Policy for ``page`` that runs its own inline scripts (by
    hash) and nothing else inline; styles may be inline (Swagger UI sets them)."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in INLINE_SCRIPT.findall(page))
    return (f"default-src 'self'; script-src 'self' {hashes}; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "frame-ancestors 'none'; base-uri 'none'")


def _origin_key(origin: str) -> str | None:
    """``host[:port]`` of an origin, lowercased, without the scheme's default port."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default = 443 if parts.scheme == "https" else 80
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return host if port in (None, default) else f"{host}:{port}"


def _host_key(host: str) -> str:
    host = host.strip().lower()
    for default in (":80", ":443"):
        if host.endswith(default):
            return host.removesuffix(default)
    return host


class Guards:
    """ASGI middleware: the Host and Origin checks, and the security headers.

    ``hosts`` None serves any ``Host`` (an app mounted in another owns that choice)."""

    def __init__(self, app: ASGIApp, *, hosts: HostNames | None,
                 origins: Iterable[str] | None) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = None if origins is None else frozenset(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await self._respond(scope, receive, send, refusal)
            return
        await self.app(scope, receive, _secured(send))

    def _refusal(self, scope: Scope, headers: Headers) -> tuple[str, str] | None:
        host = headers.get("host")
        if (self.hosts is not None and scope.get("path") not in ANY_HOST_PATHS
                and not self.hosts.admit(host)):
            return ("host_not_allowed",
                    f"this server does not answer to the name {(host or '')[:100]!r}; "
                    "an operator can allow it with --allowed-host")
        origin = headers.get("origin")
        if (self.origins is not None and origin is not None
                and scope["method"] not in SAFE_METHODS
                and "*" not in self.origins and origin not in self.origins
                and _origin_key(origin) != _host_key(host or "")):  # unreadable: None
            return ("origin_not_allowed",
                    f"requests from the origin {origin[:100]!r} may not change anything "
                    "here; an operator can allow it with --cors-origin")
        return None

    @staticmethod
    async def _respond(scope: Scope, receive: Receive, send: Send,
                       refusal: tuple[str, str]) -> None:
        response = error_response(*refusal)
        response.headers["connection"] = "close"  # the body, if any, is not read
        await response(scope, receive, _secured(send))


def _secured(send: Send) -> Send:
    async def send_secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
            if b"content-security-policy" not in present:
                headers.append((b"content-security-policy", CSP.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return send_secured
