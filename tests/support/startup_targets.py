"""Targets for ``--agent`` and ``--snapshot-hook`` in startup tests: ones that fail
the ways a person's mistakes do, and a hook that records what it is given."""

from __future__ import annotations

import json
import os
from typing import Any

from outlast.config import Settings

HOOK_LOG = "STARTUP_TEST_HOOK_LOG"  # where record_snapshot appends


def raising(settings: Settings) -> Any:
    """A factory that cannot build its agent."""
    raise RuntimeError("no model configured: set MODEL_URL")


def not_an_agent(settings: Settings) -> Any:
    """A factory returning something that is no agent."""
    return {"name": "not an agent"}


def record_snapshot(snapshot: dict[str, Any]) -> None:
    """A snapshot hook: one JSON line per saved snapshot."""
    with open(os.environ[HOOK_LOG], "a") as f:
        f.write(json.dumps({"threadId": snapshot["threadId"], "runId": snapshot["runId"]})
                + "\n")
