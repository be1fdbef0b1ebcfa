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
# (ETP_VIZ_SKIP_JS_BUILD=1: a second venv set up while the first one's tests read the bundle)
if [ -f js/package.json ] && [ "${ETP_VIZ_SKIP_JS_BUILD:-0}" != "1" ]; then
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

# System packages the tests need: Debian's chromium (browser tests) and graphviz (the static
# SVG fallback of the explorer is rendered with `dot` when one is present).
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v dot >/dev/null 2>&1 || missing="$missing graphviz"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian packages:$missing"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null; }
  else
    echo "setup: not root, so not installing:$missing (browser / static-SVG tests will skip;" \
         "install with: sudo apt-get install -y$missing)"
  fi
fi
echo "setup: $VENV ready"
