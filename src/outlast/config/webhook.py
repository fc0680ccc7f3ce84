"""What ``--webhook-secret``, ``--webhook`` and ``--webhook-allow`` accept, and whether a
URL lies under an allowed prefix."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import unquote, urlsplit


def webhook_key(secret: str) -> bytes:
    """The HMAC key of ``--webhook-secret``: the decoded bytes of a Standard Webhooks
    ``whsec_<base64>`` secret, otherwise the text's UTF-8 bytes. ValueError (never
    quoting the secret) for an empty key or a ``whsec_`` one that is not base64."""
    if secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            raise ValueError("a whsec_ secret is whsec_ followed by base64") from None
    else:
        key = secret.encode()
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def webhook_url_problem(url: str, *, prefix: bool, raise_it: bool = False) -> str | None:
    """Why ``url`` cannot be a webhook URL (or, with ``prefix``, an allowed prefix):
    http or https, a host, no spaces or control characters; a prefix reaches the first
    ``/`` of the path, so ``https://hooks.example`` cannot admit
    ``https://hooks.example.evil``. None when it can; ValueError with ``raise_it``."""
    problem = _url_problem(url, prefix)
    if problem is not None and raise_it:
        raise ValueError(problem)
    return problem


def _url_problem(url: str, prefix: bool) -> str | None:
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "a webhook URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port
    except ValueError as exc:  # an unbalanced [ of an IPv6 host, a port out of range
        return f"not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not host:
        return f"expected an http:// or https:// URL with a host, got {url[:200]!r}"
    if prefix and not parts.path.startswith("/"):
        return f"a webhook prefix reaches the / after the host (like {url}/), got {url[:200]!r}"
    if _climbs(parts.path):
        return ("a webhook URL has no . or .. path segments and no backslash, in any "
                f"spelling (%2e, %2E%2E%2F, ...), got {url[:200]!r}")
    return None


def _climbs(path: str) -> bool:
    """Whether ``path``, decoded as often as a chain of servers might, holds a ``.`` or
    ``..`` segment or a backslash (which some servers take for a slash): either could
    take a request out of the prefix it was admitted under."""
    for _ in range(8):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return "\\" in path or any(segment in (".", "..") for segment in path.split("/"))


def within_prefix(url: str, prefix: str) -> bool:
    """Whether ``url`` lies under ``prefix``, compared part by part as a client sends
    it (scheme and host in any case, a default port written or not), never as text."""
    a, b = urlsplit(url), urlsplit(prefix)
    try:
        ports = (a.port or _DEFAULT_PORTS.get(a.scheme.lower()),
                 b.port or _DEFAULT_PORTS.get(b.scheme.lower()))
    except ValueError:
        return False
    return (a.scheme.lower() == b.scheme.lower() and a.hostname == b.hostname
            and ports[0] == ports[1] and (a.username, a.password) == (b.username, b.password)
            and a.path.startswith(b.path) and not _climbs(a.path))


_DEFAULT_PORTS = {"http": 80, "https": 443}
