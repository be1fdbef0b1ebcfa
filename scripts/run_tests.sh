#!/usr/bin/env bash
# Run ruff and the whole test suite inside the given virtual environment.
#   scripts/run_tests.sh VENV [MARKER EXPRESSION]
# The engine's tests run on two workers (pytest-xdist, one module per worker at a time, so a
# module's fixtures are built once); the browser tests, which start servers and Chromium, run
# after them in one process.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
VENV="${1:-.venv}"
MARKERS="${2:-}"
"$VENV/bin/python" -c "import jax, brainstate, saiunit, sys; print('test leg:', sys.version.split()[0], 'jax', jax.__version__, 'brainstate', brainstate.__version__, 'saiunit', saiunit.__version__)"
"$VENV/bin/ruff" check etp_viz tests bench
start=$(date +%s)
markers_and() { if [ -n "$MARKERS" ]; then echo "($MARKERS) and $1"; else echo "$1"; fi; }
WORKERS="${ETP_VIZ_TEST_WORKERS:-2}"
parallel=()
if [ "$WORKERS" != "0" ] && "$VENV/bin/python" -c "import xdist" 2>/dev/null; then
  parallel=(-n "$WORKERS" --dist loadscope)
fi
# the docstring examples are tests too (numpy-style docstrings with a short runnable example)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules tests etp_viz \
  "${parallel[@]}" -m "$(markers_and "not browser")"
echo "engine tests finished in $(( $(date +%s) - start )) s"
status=0
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests -m "$(markers_and "browser")" || status=$?
# 5: no test selected (a leg that leaves the browser tests to the other one)
if [ "$status" != "0" ] && [ "$status" != "5" ]; then exit "$status"; fi
echo "test leg finished in $(( $(date +%s) - start )) s"
