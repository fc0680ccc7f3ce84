"""The tool log of the framework hosts' test agents: each tool execution appends a line
to ``$HOST_TOOL_LOG`` (synced), so a test counts executions from outside the server."""

import os
import time
from pathlib import Path


def record(line: str) -> None:
    with Path(os.environ["HOST_TOOL_LOG"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def slow_step(label: str) -> str:
    """A tool that takes ``$HOST_SLOW_SECONDS`` (a test kills the server while it runs):
    its start and its end each logged."""
    record(f"slow_step start {label}")
    time.sleep(float(os.environ.get("HOST_SLOW_SECONDS", "0")))
    record(f"slow_step done {label}")
    return f"{label} done"
