#!/usr/bin/env bash
# Run ruff and the test suite inside the given virtual environment.
#   scripts/run_tests.sh VENV [MARKER EXPRESSION] [PHASE] [PATH ...]
# PHASE: all (default), engine (everything but the browser tests) or browser. The engine's tests
# run on two pytest-xdist workers (a module per worker at a time, the slowest first: see
# tests/conftest.py); the browser tests, which start servers and Chromium, on three (below).
# PATHs (default: tests and the package's docstring examples) narrow the engine phase.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
VENV="${1:-.venv}"
MARKERS="${2:-}"
PHASE="${3:-all}"
shift $(( $# < 3 ? $# : 3 ))
PATHS=("$@")
[ ${#PATHS[@]} -gt 0 ] || PATHS=(tests etp_viz)
# One JAX persistent compilation cache for the whole run of an interpreter: the tests, both
# pytest-xdist workers, the notebook kernels and the servers the browser tests start compile the
# same models (a notebook is mostly compilation), and XLA's compile dominates the suite's time on
# CPU. Every compile is kept (no minimum time or size) and the size is not limited: a limit turns
# on JAX's eviction, which lists the whole directory on every write (quadratic over a run). An
# entry read while another process still writes it fails to decompress, which JAX reports as a
# warning and compiles instead. `make test` hands the run one fresh directory (ETP_VIZ_JAX_CACHE,
# a folder per interpreter under it); run alone, this script makes a temporary one and removes it:
# a run never starts warm. JAX keys each entry by the program, jax/jaxlib version, backend, flags.
if [ -z "${ETP_VIZ_JAX_CACHE:-}" ]; then
  ETP_VIZ_JAX_CACHE="$(mktemp -d "${TMPDIR:-/tmp}/etp-viz-jax-cache.XXXXXX")"
  trap 'rm -rf "$ETP_VIZ_JAX_CACHE"' EXIT
fi
export JAX_COMPILATION_CACHE_DIR="$ETP_VIZ_JAX_CACHE/$(basename "$VENV")"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1
# XLA:CPU's LLVM backend at -O0 (the HLO passes still run): the suite compiles thousands of
# tiny programs and runs each a few times, so LLVM's optimisation costs more than it saves:
# 20-32% less CPU time on the claims property test, notebooks 05/06 and tests/live (jax 0.10;
# 12% on jax 0.12), notebook 06's printed losses and gradient errors unchanged
# (docs/development.md, "The CI's time budget").
# JAX's own switch for the same trade (JAX_DISABLE_MOST_OPTIMIZATIONS: also LLVM's expensive
# passes off; the HLO passes, which the structural HLO tests read, untouched): another ~9% of
# user CPU on tests/live/test_compare.py (53.5 s -> 48.5 s, jax 0.10).
# ETP_VIZ_TEST_XLA_OPT=keep (or a level already in XLA_FLAGS) leaves XLA's default.
if [ "${ETP_VIZ_TEST_XLA_OPT:-}" != "keep" ] && [[ "${XLA_FLAGS:-}" != *xla_backend_optimization_level* ]]; then
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_backend_optimization_level=0"
  export JAX_DISABLE_MOST_OPTIMIZATIONS="${JAX_DISABLE_MOST_OPTIMIZATIONS:-1}"
fi
# XLA:CPU's MLIR fusion emitters off where XLA has the switch (jax 0.10's XLA; jax 0.12's
# rejects the flag, and gains nothing from its neighbours): the legacy emitters compile the
# suite's tiny programs faster, 25% less user CPU on the claims property test and on
# tests/ops/test_rules.py + tests/learn/test_inner_loops.py (77.8 -> 53.9 s), the structural
# HLO tests unchanged (docs/development.md, "Sixth step"). Probed by running jax with it.
fusion_off="--xla_cpu_use_fusion_emitters=false"
if [ "${ETP_VIZ_TEST_XLA_OPT:-}" != "keep" ] && [[ "${XLA_FLAGS:-}" != *xla_cpu_use_fusion_emitters* ]] \
  && XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }$fusion_off" "$VENV/bin/python" -c \
    "import jax.numpy as jnp; jnp.zeros(2).block_until_ready()" >/dev/null 2>&1; then
  export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }$fusion_off"
fi
echo "run_tests: $VENV, phase $PHASE, XLA_FLAGS=${XLA_FLAGS:-}, JAX_DISABLE_MOST_OPTIMIZATIONS=${JAX_DISABLE_MOST_OPTIMIZATIONS:-}"
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
  # The browser tests wait on servers, kernels and Chromium about half the time: three
  # workers (a module each at a time, each with its own Chromium and servers on free ports)
  # fill the two cores (one process ~300 s, two 186 s, three 157 s on the idle machine;
  # ETP_VIZ_BROWSER_WORKERS=0: one process).
  BROWSER_WORKERS="${ETP_VIZ_BROWSER_WORKERS:-3}"
  browser_parallel=()
  if [ "$BROWSER_WORKERS" != "0" ] && "$VENV/bin/python" -c "import xdist" 2>/dev/null; then
    browser_parallel=(-n "$BROWSER_WORKERS" --dist loadscope)
  fi
  status=0
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=10 tests \
    "${browser_parallel[@]}" -m "$(markers_and "browser")" || status=$?
  # 5: no test selected (a leg that leaves the browser tests to the other one)
  if [ "$status" != "0" ] && [ "$status" != "5" ]; then exit "$status"; fi
  echo "$VENV: browser tests finished in $(( $(date +%s) - start )) s"
fi
