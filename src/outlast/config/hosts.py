"""Host names: a ``Host`` header's name, and what ``--allowed-host`` accepts."""

from __future__ import annotations


def host_name(value: str) -> str | None:
    """The name of a ``Host`` header or of an allowed host, lowercased, without port,
    brackets or a trailing dot; None when it is not ``name[:port]`` or ``[v6][:port]``."""
    value = value.strip().lower()
    if not value or any(c in "/\\@?#" or ord(c) <= 32 or ord(c) == 127 for c in value):
        return None
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    name, colon, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    if colon and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def allowed_host_problem(value: str) -> str | None:
    """Why ``value`` cannot be an ``--allowed-host``; None when it can."""
    bare = value.strip().removeprefix(".")
    if value.strip() == "*":
        return None
    if "://" in bare:
        return f"an allowed host is a name, not a URL, got {value[:200]!r}"
    if bare.count(":") == 1 or "]:" in bare:
        return f"an allowed host is a name without port (any port is served), got {value[:200]!r}"
    if host_name(bare) is None:
        return f"expected a host name like api.example.com, .example.com or *, got {value[:200]!r}"
    return None
