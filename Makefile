# The README's two commands: `make demo` and `make test`.
PY311 ?= python3
PY312 ?= $(shell command -v pyenv >/dev/null 2>&1 && echo "$$(pyenv root)/versions/3.12.1/bin/python3")
# the demo runs the task recipe's step budget unless STEPS is set (make demo STEPS=200)
STEPS ?=

.PHONY: demo test test-311 test-312 setup lint notebooks dist

setup:
	scripts/setup.sh $(PY311) .venv

demo: setup
	.venv/bin/python -m etp_viz demo $(if $(STEPS),--steps $(STEPS)) --out demo.html

# Whole suite on the default interpreter, then on the newest stack when pyenv's 3.12 exists
# (there without re-executing the notebooks, the slow lesson runs and the browser tests, which
# do not depend on the jax stack: they run on the 3.11 leg, and CI stays under 45 min). The
# 3.12 venv is set up in the background while the 3.11 leg runs.
LEG312 = "not notebook and not slow and not browser"

test:
	scripts/setup.sh $(PY311) .venv
	@set -e; pid=""; \
	if [ -n "$(PY312)" ] && [ -x "$(PY312)" ]; then \
	  (ETP_VIZ_SKIP_JS_BUILD=1 scripts/setup.sh $(PY312) .venv312 > .setup-312.log 2>&1) & pid=$$!; \
	fi; \
	scripts/run_tests.sh .venv; \
	if [ -n "$$pid" ]; then \
	  wait $$pid || { cat .setup-312.log; echo "test: setting up .venv312 failed"; exit 1; }; \
	  cat .setup-312.log; scripts/run_tests.sh .venv312 $(LEG312); \
	else echo "test-312: no Python 3.12 found (pyenv); newest-stack leg skipped"; fi

test-311:
	scripts/setup.sh $(PY311) .venv
	scripts/run_tests.sh .venv

test-312:
	@if [ -n "$(PY312)" ] && [ -x "$(PY312)" ]; then \
	  scripts/setup.sh $(PY312) .venv312 && scripts/run_tests.sh .venv312 $(LEG312); \
	else echo "test-312: no Python 3.12 found (pyenv); newest-stack leg skipped"; fi

lint: setup
	.venv/bin/ruff check etp_viz tests bench
	.venv/bin/ruff format --check etp_viz tests bench
	.venv/bin/mypy etp_viz/learn etp_viz/compiler etp_viz/live

# Re-execute notebooks/*.ipynb in place (stored with outputs: they read without a kernel).
notebooks: setup
	.venv/bin/python scripts/execute_notebooks.py

# The wheel and the sdist an index gets (dist/), checked as PyPI would (twine check --strict).
dist: setup
	rm -rf dist
	.venv/bin/python -m build --outdir dist
	.venv/bin/python -m twine check --strict dist/*
