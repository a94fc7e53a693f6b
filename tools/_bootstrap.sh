# Sourced by tools/serve and tools/test: make sure uv exists and the workspace is synced.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
UV_VERSION="0.13.8"
if ! command -v uv >/dev/null 2>&1; then
  if ! "$PYTHON" -m uv --version >/dev/null 2>&1; then
    echo "innkeeper: installing uv ${UV_VERSION} with pip" >&2
    "$PYTHON" -m pip install --quiet "uv==${UV_VERSION}"
  fi
  uv() { "$PYTHON" -m uv "$@"; }
fi
uv sync --quiet --python "$PYTHON"
