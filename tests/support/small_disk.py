"""A real small filesystem for full-disk tests: a tmpfs of a few megabytes mounted by
the test (root only), filled with a file until the kernel says ENOSPC, freed by
removing the file."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted(where: Path, size_mb: int = 24, owner: tuple[int, int] | None = None
            ) -> Iterator[Path]:
    """A ``size_mb`` tmpfs at ``where`` for the block; skips the test (fails it under
    ``CI=true``) where this process cannot mount one."""
    where.mkdir(parents=True, exist_ok=True)
    problem = None
    if os.geteuid() != 0:
        problem = "mounting a small filesystem needs root"
    else:
        mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs",
                                str(where)], capture_output=True, text=True, check=False)
        if mount.returncode != 0:
            problem = f"could not mount a tmpfs: {mount.stderr.strip()}"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    try:
        if owner is not None:
            os.chown(where, *owner)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the filesystem is full; the file (remove it to free the space)."""
    filler = disk / "filler"
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    os.write(fd, chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler
