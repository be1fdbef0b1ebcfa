#!/usr/bin/env bash
# Run ruff and the whole test suite inside the given virtual environment.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
VENV="${1:-.venv}"
"$VENV/bin/python" -c "import jax, brainstate, saiunit, sys; print('test leg:', sys.version.split()[0], 'jax', jax.__version__, 'brainstate', brainstate.__version__, 'saiunit', saiunit.__version__)"
"$VENV/bin/ruff" check etp_viz tests bench
start=$(date +%s)
# the docstring examples are tests too (numpy-style docstrings with a short runnable example)
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --doctest-modules tests etp_viz "${@:2}"
echo "test leg finished in $(( $(date +%s) - start )) s"
