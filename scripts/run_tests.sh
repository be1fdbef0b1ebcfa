#!/usr/bin/env bash
# Run ruff and the test suite inside the given virtual environment.
#   scripts/run_tests.sh VENV [MARKER EXPRESSION] [PHASE] [PATH ...]
# PHASE: all (default), engine (everything but the browser tests) or browser. The engine's tests
# run on two pytest-xdist workers (a module per worker at a time); the browser tests, which start servers and
# Chromium, run in one process. PATHs (default: tests and the package's docstring examples)
# narrow the engine phase.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
VENV="${1:-.venv}"
MARKERS="${2:-}"
PHASE="${3:-all}"
shift $(( $# < 3 ? $# : 3 ))
PATHS=("$@")
[ ${#PATHS[@]} -gt 0 ] || PATHS=(tests etp_viz)
markers_and() { if [ -n "$MARKERS" ]; then echo "($MARKERS) and $1"; else echo "$1"; fi; }
start=$(date +%s)
if [ "$PHASE" != "browser" ]; then
  "$VENV/bin/python" -c "import jax, brainstate, saiunit, sys; print('test leg:', sys.version.split()[0], 'jax', jax.__version__, 'brainstate', brainstate.__version__, 'saiunit', saiunit.__version__)"
  "$VENV/bin/ruff" check etp_viz tests bench
  WORKERS="${ETP_VIZ_TEST_WORKERS:-2}"
  parallel=()
  if [ "$WORKERS" != "0" ] && "$VENV/bin/python" -c "import xdist" 2>/dev/null; then
    parallel=(-n "$WORKERS" --dist loadscope)
  fi
  # the docstring examples are tests too (numpy-style docstrings with a short runnable example)
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules --durations=15 \
    "${PATHS[@]}" "${parallel[@]}" -m "$(markers_and "not browser")"
  echo "$VENV: engine tests finished in $(( $(date +%s) - start )) s"
fi
if [ "$PHASE" != "engine" ]; then
  status=0
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=10 tests \
    -m "$(markers_and "browser")" || status=$?
  # 5: no test selected (a leg that leaves the browser tests to the other one)
  if [ "$status" != "0" ] && [ "$status" != "5" ]; then exit "$status"; fi
  echo "$VENV: browser tests finished in $(( $(date +%s) - start )) s"
fi
