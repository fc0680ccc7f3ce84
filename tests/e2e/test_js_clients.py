"""The JavaScript packages' own test suites, run from pytest so that
``bash scripts/test.sh`` covers them too.

- ``clients/js``: ResumableHttpAgent against a scripted server.
- ``clients/copilotkit``: OutlastAgentRunner inside the real CopilotKit runtime
  against a real ``outlast serve`` (this venv's ``outlast`` executable).
- ``web``: typecheck, and the page's bundle built from ``clients/js``.

``scripts/test.sh`` runs ``npm ci`` for each. Without Node or the packages'
``node_modules`` the tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["clients/js", "clients/copilotkit", "web"]


@pytest.mark.parametrize("package", PACKAGES)
def test_npm_test(package: str) -> None:
    npm = shutil.which("npm")
    folder = ROOT / package
    missing = ("npm is not installed" if npm is None else
               f"{package}/node_modules is missing (npm ci --prefix {package})"
               if not (folder / "node_modules").is_dir() else None)
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    assert npm is not None
    env = {**os.environ, "OUTLAST_BIN": str(Path(sys.executable).parent / "outlast"),
           "COPILOTKIT_TELEMETRY_DISABLED": "true", "NO_COLOR": "1"}
    result = subprocess.run([npm, "test"], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, (
        f"npm test in {package} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
