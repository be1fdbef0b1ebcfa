#!/usr/bin/env bash
# Create (or refresh) a virtual environment with etp_viz and everything its demo and tests need.
#   scripts/setup.sh [PYTHON] [VENV_DIR]
# Idempotent: a second run only re-installs what changed. Installs Debian's chromium (for the
# browser tests) when run as root and it is missing; otherwise prints how to get it and goes on.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
PY="${1:-python3}"
VENV="${2:-.venv}"

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: interpreter '$PY' not found" >&2
  exit 2
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi

stamp="$VENV/.etp_viz_installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing etp_viz[explorer,test] into $VENV"
  "$VENV/bin/python" -m pip install -q -e ".[explorer,test]"
  touch "$stamp"
fi

# Front end: js/ is its own npm package; its bundle is written into etp_viz/explorer/static/.
if [ -f js/package.json ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "setup: npm is required to build the explorer front end (js/). Install Node.js >= 18." >&2
    exit 2
  fi
  if [ ! -d js/node_modules ] || [ js/package-lock.json -nt js/node_modules ]; then
    echo "setup: npm ci (js/)"
    (cd js && npm ci --no-audit --no-fund --loglevel=error)
  fi
  echo "setup: building the front-end bundle"
  (cd js && npm run --silent build)
fi

# System packages for the browser tests.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian chromium (browser tests)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
  else
    echo "setup: chromium not found and not root: browser tests will be skipped" \
         "(install it with: sudo apt-get install -y chromium)"
  fi
fi
echo "setup: $VENV ready"
