"""Handing memory the process has freed back to the operating system.

glibc's allocator keeps freed memory in its arenas for reuse rather than returning it,
and a server's allocation pattern (buffers of every size, per request, per commit, in
several threads) leaves much of it in holes it cannot give back by itself: over a
long soak RSS creeps up although live objects do not grow, and ``malloc_trim`` takes
it back down to flat (docs/performance.md, "Memory"). So the engine trims once a
minute. Elsewhere (another C library, another platform) there is nothing to call and
nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

TRIM_SECONDS = 60.0
"""How often the engine hands freed memory back."""


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim(pad)``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


async def trim_forever(trim: Callable[[int], int]) -> None:
    """The engine's trim loop (G10): freed memory goes back every ``TRIM_SECONDS``."""
    while True:
        await asyncio.sleep(TRIM_SECONDS)
        await asyncio.to_thread(trim, 0)  # ctypes lets go of the interpreter lock
