"""What the SQL store asks of a backend's connection: named queries, and the one
error a backend translates for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

Row = Mapping[str, Any]


class Conn(Protocol):
    """A connection inside one transaction, speaking named queries."""

    async def one(self, name: str, **params: Any) -> Row | None: ...
    async def all(self, name: str, **params: Any) -> list[Row]: ...
    async def column(self, name: str, **params: Any) -> list[Any]: ...
    async def run(self, name: str, **params: Any) -> int: ...
    async def many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None: ...
    async def rows(self, name: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        """Run a named statement over ``rows`` given positionally (a whole commit's,
        each row one array), returning the first column of what it returns."""
        ...
    async def script(self, sql: str) -> None: ...


class UniqueViolation(Exception):
    """A backend's unique-constraint error, translated at the adapter boundary."""
