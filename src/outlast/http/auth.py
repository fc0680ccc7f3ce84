"""Bearer tokens mapped to principals; every thread and run belongs to one."""

from __future__ import annotations

import hashlib
import hmac
import inspect
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from starlette.requests import HTTPConnection

from outlast.errors import InvalidRequest, Unauthorized

LOCAL_PRINCIPAL = "local"


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _entries(path: Path) -> Iterator[tuple[int, str, str]]:
    """A tokens file's ``principal:token`` lines: (line number, principal, token)."""
    for number, raw in enumerate(path.read_text("utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        principal, sep, token = line.partition(":")
        if not sep or not principal.strip() or not token.strip():
            raise InvalidRequest(f"{path}:{number}: expected principal:token")
        yield number, principal.strip(), token.strip()


def tokens_in(path: Path | None) -> list[str]:
    """The tokens a file gives (for the log's redaction: never logged)."""
    return [] if path is None else [token for _, _, token in _entries(path)]


class Principals:
    """Token hashes to principals; with no tokens, everyone is the local principal."""

    def __init__(self, tokens: dict[bytes, str] | None = None) -> None:
        self._tokens = tokens or {}

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    @classmethod
    def from_file(cls, path: Path | None) -> Principals:
        """Read ``principal:token`` lines (``#`` comments); only hashes are kept."""
        if path is None:
            return cls()
        tokens: dict[bytes, str] = {}
        for number, principal, token in _entries(path):
            digest = _hash(token)
            if tokens.get(digest, principal) != principal:
                raise InvalidRequest(f"{path}:{number}: this token is already given to "
                                     "another principal")
            tokens[digest] = principal
        if not tokens:
            raise InvalidRequest(f"{path}: no tokens")
        return cls(tokens)

    def authenticate(self, conn: HTTPConnection) -> str:
        """The caller's principal, or Unauthorized."""
        if not self._tokens:
            return LOCAL_PRINCIPAL
        header = conn.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("a bearer token is required")
        digest = _hash(token.strip())
        found = None
        # Constant time over every known token: timing reveals nothing.
        for known, principal in self._tokens.items():
            if hmac.compare_digest(known, digest):
                found = principal
        if found is None:
            raise Unauthorized("the bearer token is not valid")
        return found

    async def resolve(self, conn: HTTPConnection) -> str:
        """The caller's principal, or Unauthorized (what every route asks)."""
        return self.authenticate(conn)


PrincipalOf = Callable[[HTTPConnection], "str | Awaitable[str | None] | None"]


class HostPrincipals(Principals):
    """The host app's own auth decides (``outlast.mount(..., principal=...)``): its
    callable maps a request to the caller's principal, or None to refuse it."""

    def __init__(self, principal_of: PrincipalOf) -> None:
        super().__init__()
        self._principal_of = principal_of

    @property
    def enabled(self) -> bool:
        return True  # callers are told apart: resources belong to each principal

    def authenticate(self, conn: HTTPConnection) -> str:
        raise TypeError("HostPrincipals resolve asynchronously: await resolve()")

    async def resolve(self, conn: HTTPConnection) -> str:
        found = self._principal_of(conn)
        if inspect.isawaitable(found):
            found = await found
        if not isinstance(found, str) or not found:
            raise Unauthorized("this application did not authenticate the request")
        return found
