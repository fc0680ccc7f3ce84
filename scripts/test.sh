#!/usr/bin/env bash
# Install everything the test suite needs and run all of it (unit, integration
# with real SQLite and PostgreSQL, e2e with server processes and Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test,postgres,dev]"

# The stock @ag-ui/client, used to check that our fold and streams agree with it.
npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
# The JavaScript packages, whose own suites tests/e2e/test_js_clients.py runs.
for pkg in clients/js clients/copilotkit web; do
    npm ci --prefix "$pkg" --no-audit --no-fund --loglevel=error
done

# Debian's Chromium for the browser tests (a test tool's own browser download cannot work here).
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = "0" ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "chromium is missing: install it with 'sudo apt-get install -y chromium'" >&2
    fi
fi

# iproute2 (ip, tc): the partition tests cut a server off from PostgreSQL with network
# namespaces (as root; elsewhere they skip, and fail under CI=true).
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    if [ "$(id -u)" = "0" ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
    else
        echo "iproute2 is missing: the partition tests need it ('apt-get install -y iproute2')" >&2
    fi
fi

# PostgreSQL server binaries: the fixtures start a throwaway cluster from them.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
    echo "PostgreSQL server binaries are missing (apt-get install -y postgresql)" >&2
    if [ "${CI:-}" = "true" ]; then exit 1; fi
fi

# The suite starts hundreds of Python processes (servers, CLI calls, examples): with
# bytecode caching off in the environment, each would compile outlast's modules anew.
unset PYTHONDONTWRITEBYTECODE

# Four workers, each taking whole test files (their module-scoped servers stay within
# one worker): most tests wait on processes, clocks and sockets, and with three the 2
# cores were busy 1.5 of the time (1,240 CPU-seconds in 820 s); four keep them busier.
# `-n 0` runs the suite serially.
exec .venv/bin/python -m pytest -n 4 --dist loadfile "$@"
