"""The stock ``@ag-ui/client`` (tests/js/fold.mjs) as a judge of stored streams."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS_DIR = Path(__file__).resolve().parents[1] / "js"


def stock_client_runs(runs: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Fold runs' event lists, one ``runAgent`` each, on one stock client agent.

    Returns ``{"messages", "state", "pendingInterrupts", "errors"}``; ``errors[i]`` is
    why run ``i`` failed in the client (verification included), or None. Skips (fails
    under ``CI=true``) when node or the client is missing."""
    return stock_client_scenarios([{"runs": [{"events": events} for events in runs]}])[0]


def stock_client_node() -> str:
    """The ``node`` that runs the harness; skips (fails under ``CI=true``) when node or
    tests/js/node_modules is missing."""
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "node is not installed"
    elif not (JS_DIR / "node_modules" / "@ag-ui" / "client").is_dir():
        problem = "tests/js/node_modules is missing; run `npm ci --prefix tests/js`"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"@ag-ui/client harness unavailable under CI: {problem}")
        pytest.skip(problem)
    assert node is not None
    return node


def stock_client_scenarios(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several independent scenarios (``{"messages"?, "state"?, "runs": [{"events"}]}``),
    each on its own stock client agent, in one node process."""
    proc = subprocess.run([stock_client_node(), str(JS_DIR / "fold.mjs")],
                          input=json.dumps({"scenarios": scenarios}),
                          capture_output=True, text=True, timeout=120, check=True)
    results: list[dict[str, Any]] = json.loads(proc.stdout)["scenarios"]
    return results
