"""Stores: the persistence interface and its backends."""

from __future__ import annotations

from pathlib import Path

from outlast.errors import MissingDependency
from outlast.store.base import Store


def open_store(url: str | None, data_dir: Path, *, sqlite_synchronous: str = "FULL") -> Store:
    """The store for ``url`` (PostgreSQL, or SQLite at a path), else SQLite in ``data_dir``.
    Raises ValueError for a URL of any other scheme."""
    if url and url.startswith(("postgres://", "postgresql://")):
        try:
            import asyncpg  # noqa: F401
        except ImportError:
            raise MissingDependency("asyncpg", "postgres") from None
        from outlast.store.postgres import PostgresStore

        return PostgresStore(url)
    if url and url.startswith("sqlite:///"):
        return _sqlite(Path(url.removeprefix("sqlite:///")), sqlite_synchronous)
    if url:
        raise ValueError(f"unsupported store URL {url!r}: use postgresql://... or "
                         "sqlite:///path")
    return _sqlite(data_dir / "outlast.db", sqlite_synchronous)


def _sqlite(path: Path, synchronous: str) -> Store:
    from outlast.store.sqlite import SQLiteStore

    return SQLiteStore(path, synchronous=synchronous)


__all__ = ["Store", "open_store"]
