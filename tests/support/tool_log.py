"""The tool log of the framework hosts' test agents: each tool execution appends a line
to ``$HOST_TOOL_LOG`` (synced), so a test counts executions from outside the server."""

import os
from pathlib import Path


def record(line: str) -> None:
    with Path(os.environ["HOST_TOOL_LOG"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
