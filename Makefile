# The README's two commands: `make demo` and `make test`.
PY311 ?= python3
PY312 ?= $(shell command -v pyenv >/dev/null 2>&1 && echo "$$(pyenv root)/versions/3.12.1/bin/python3")
# the demo runs the task recipe's step budget unless STEPS is set (make demo STEPS=200)
STEPS ?=

.PHONY: demo test test-311 test-312 setup lint notebooks dist wheel

# everything: the package with the [explorer,test] extras, the front end, Chromium when root
setup:
	scripts/setup.sh $(PY311) .venv

# only what the demo needs: the package with [explorer] and its front end (`make test` adds the
# test toolchain to the same .venv); `--out` names demo.html, so a rerun replaces it and says so
demo:
	scripts/setup.sh $(PY311) .venv explorer
	.venv/bin/python -m etp_viz demo $(if $(STEPS),--steps $(STEPS)) --out demo.html

# Whole suite on the default interpreter; on the newest stack (pyenv's 3.12) the engine's tests
# (ops, compiler, nn, learn) without the notebooks, the slow runs and the browser tests,
# which run on the 3.11 leg. The 3.12 venv is set up while the 3.11 engine tests run and its
# leg starts as soon as it is ready, at a lower priority (nice 10): it takes the cycles the 3.11
# phases leave idle (pytest-xdist's tail, the browser tests waiting on servers and Chromium)
# and the rest once the 3.11 engine phase is done. The run shares one fresh JAX compilation
# cache (a folder per interpreter, removed at the end): the 3.11 browser tests' kernels and
# servers find what the engine tests compiled (scripts/run_tests.sh). scripts/cpu_busy.sh
# samples how busy the cores are; the summary is printed at the end (docs/development.md,
# "The CI's time budget").
LEG312 = "not notebook and not slow and not browser"
PATHS312 = tests/ops tests/compiler tests/nn tests/learn tests/test_compat.py tests/test_types.py tests/test_layering.py

test:
	scripts/setup.sh $(PY311) .venv
	@set -e; leg=""; began=$$(date +%s); \
	ETP_VIZ_JAX_CACHE="$$(mktemp -d "$${TMPDIR:-/tmp}/etp-viz-jax-cache.XXXXXX")"; \
	scripts/cpu_busy.sh 10 > .ci-cpu.log & cpu=$$!; \
	export ETP_VIZ_JAX_CACHE; \
	trap 'kill $$cpu 2>/dev/null || true; [ -z "$$leg" ] || kill -TERM -$$leg 2>/dev/null || true; scripts/cpu_report.sh .ci-cpu.log; rm -rf "$$ETP_VIZ_JAX_CACHE"' EXIT; \
	if [ -n "$(PY312)" ] && [ -x "$(PY312)" ]; then \
	  setsid bash -c 'ETP_VIZ_SKIP_JS_BUILD=1 scripts/setup.sh "$$1" .venv312 > .setup-312.log 2>&1 \
	    || { echo "test: setting up .venv312 failed"; exit 3; }; \
	    echo "test: 3.12 leg starts at $$(( $$(date +%s) - $$2 )) s"; \
	    exec nice -n 10 scripts/run_tests.sh .venv312 $(LEG312) engine $(PATHS312)' \
	    _ "$(PY312)" "$$began" > .leg-312.log 2>&1 & leg=$$!; \
	else echo "test-312: no Python 3.12 found (pyenv); newest-stack leg skipped"; fi; \
	scripts/run_tests.sh .venv "" engine; \
	echo "test: 3.11 engine phase done at $$(( $$(date +%s) - began )) s"; \
	status=0; scripts/run_tests.sh .venv "" browser || status=$$?; \
	echo "test: 3.11 browser phase done at $$(( $$(date +%s) - began )) s"; \
	if [ -n "$$leg" ]; then \
	  s312=0; wait $$leg || s312=$$?; leg=""; \
	  echo "test: 3.12 leg done at $$(( $$(date +%s) - began )) s"; \
	  echo "---- 3.12 setup ----"; cat .setup-312.log; echo "---- 3.12 leg ----"; cat .leg-312.log; \
	  [ "$$s312" = 0 ] || { echo "test: the 3.12 leg failed"; exit 1; }; \
	fi; \
	exit $$status

test-311:
	scripts/setup.sh $(PY311) .venv
	scripts/run_tests.sh .venv

test-312:
	@if [ -n "$(PY312)" ] && [ -x "$(PY312)" ]; then \
	  scripts/setup.sh $(PY312) .venv312 && scripts/run_tests.sh .venv312 $(LEG312) engine $(PATHS312); \
	else echo "test-312: no Python 3.12 found (pyenv); newest-stack leg skipped"; fi

lint: setup
	.venv/bin/ruff check etp_viz tests bench
	.venv/bin/ruff format --check etp_viz tests bench
	.venv/bin/mypy etp_viz/learn etp_viz/compiler etp_viz/live

# Re-execute notebooks/*.ipynb in place (stored with outputs: they read without a kernel).
notebooks: setup
	.venv/bin/python scripts/execute_notebooks.py

# A wheel with the built front end (dist/etp_viz-<version>-py3-none-any.whl), to hand to
# students: pip install "etp_viz-<version>-py3-none-any.whl[explorer]" needs no Node.js
# (docs/user-guide.md, "Serving a course").
wheel: setup
	rm -f dist/etp_viz-*.whl
	.venv/bin/python -m build --wheel --outdir dist
	@ls dist/etp_viz-*.whl

# The wheel and the sdist an index gets (dist/), checked as PyPI would (twine check --strict).
dist: setup
	rm -rf dist
	.venv/bin/python -m build --outdir dist
	.venv/bin/python -m twine check --strict dist/*
