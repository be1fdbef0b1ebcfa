#!/usr/bin/env bash
# Create (or refresh) a virtual environment with etp_viz and the extras asked for.
#   scripts/setup.sh [PYTHON] [VENV_DIR] [EXTRAS]
# EXTRAS: comma-separated, default "explorer,test" (everything the tests need); `make demo`
# passes "explorer" (the demo needs no test toolchain). Idempotent: a second run only
# re-installs what changed or what was not installed yet. With the test extra it installs
# Debian's chromium and graphviz (browser / static-SVG tests) when run as root and missing;
# otherwise it prints how to get them and goes on.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
PY="${1:-python3}"
VENV="${2:-.venv}"
EXTRAS="${3:-explorer,test}"

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: interpreter '$PY' not found" >&2
  exit 2
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi

# The stamp lists the extras installed (an empty stamp, from before extras were chosen, means
# "explorer,test"); pip runs again when pyproject.toml changed or an extra is missing.
stamp="$VENV/.etp_viz_installed"
installed=""
if [ -f "$stamp" ]; then installed="$(cat "$stamp")"; fi
if [ -f "$stamp" ] && [ -z "$installed" ]; then installed="explorer,test"; fi
missing_extra=""
for extra in ${EXTRAS//,/ }; do
  case ",$installed," in *",$extra,"*) ;; *) missing_extra=1 ;; esac
done
# (ETP_VIZ_SKIP_JS_BUILD=1: a second venv set up while the first one's tests read the bundle)
skip_js="${ETP_VIZ_SKIP_JS_BUILD:-0}"
built=0
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ -n "$missing_extra" ]; then
  wanted="$(printf '%s\n' ${EXTRAS//,/ } ${installed//,/ } | sort -u | paste -sd, -)"
  echo "setup: installing etp_viz[$wanted] into $VENV"
  # pip's build of the package builds the front end (setup.py), once. pip byte-compiles every
  # installed module (half of a fresh install's time): keep it, a machine with
  # PYTHONDONTWRITEBYTECODE=1 would otherwise compile jax & co. from source in every process
  # (`--no-compile` cost the suite ~140 s for the ~19 s it saved: docs/development.md)
  ETP_VIZ_SKIP_JS="$skip_js" "$VENV/bin/python" -m pip install -q -e ".[$wanted]"
  echo "$wanted" > "$stamp"
  built=1
fi

# Front end: js/ is its own npm package; its bundle is written into etp_viz/explorer/static/.
# Built here only when pip did not just build it (the js/ sources may have changed since).
if [ -f js/package.json ] && [ "$skip_js" != "1" ] && [ "$built" = "0" ]; then
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
case ",$EXTRAS," in
  *",test,"*)
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    command -v dot >/dev/null 2>&1 || missing="$missing graphviz"
    ;;
esac
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
