#!/usr/bin/env bash
# Static checks: ruff on the package and tests, mypy --strict on the package.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check src tests bench
.venv/bin/mypy
