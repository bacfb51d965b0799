# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export LANCEDB_LOG := error
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
# Python caches compiled modules (__pycache__/, git-ignored) even where the environment says not
# to (PYTHONDONTWRITEBYTECODE, common in container images): the tests start many
# interpreters, each of which would compile flowmem again, and pytest's rewrite of every test
# module (~5 s of CPU a pytest process) would be redone by every worker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup lock demo test lint typecheck pytest bench docs-check clean

setup: $(STAMP)

# `$(call pip,ARGS[,PYTHON])`: pip (of .venv, or of PYTHON) with its full output in
# $(VENV)/pip.log, shown without one notice:
# pip warns "Location 'file:///.../<project>/' is ignored" for every project that an on-disk index
# set in pip.conf (extra-index-url = file:///..., a partial local mirror) lacks, and has no switch
# for it (pypa/pip#8149). Every other line, and pip's exit status, go through.
define pip
$(or $(2),$(BIN)/python) -m pip $(1) >$(VENV)/pip.log 2>&1; status=$$?; \
grep -v "^WARNING: Location 'file:.*' is ignored: it is neither a file nor a directory\.$$" $(VENV)/pip.log >&2; \
exit $$status
endef

# Reinstall only when the project's metadata or the lock changed: otherwise `make setup` is a no-op.
# requirements.lock pins every package (the dev extra, and setuptools to build the project) at
# the versions CI tested, each with its hashes; pip installs from it in hash-checking mode, which
# cannot cover the project itself, so the editable install comes after, with no dependency and no
# build isolation (the locked setuptools builds it). `make lock` refreshes the lock.
# pip shows a local project's build-backend warnings; setuptools sends a notice that is only
# information through them ("Editable installation.": folders named like the package may shadow
# it), so PYTHONWARNINGS ignores that one message, no other.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing the locked flowmem[dev] into $(VENV): a few minutes the first time"
	@$(call pip,install --quiet --upgrade pip)
	@$(call pip,install --quiet --require-hashes -r requirements.lock)
	@PYTHONWARNINGS="ignore:Editable installation:UserWarning" \
		$(call pip,install --quiet --no-deps --no-build-isolation -e .)
	touch $(STAMP)

# Re-resolve requirements.lock from pyproject.toml's ranges with pip-tools (in a venv of its own,
# .venv/lock-tools): versions already locked stay while they still fit; `make lock UPGRADE=1` takes the
# newest each range allows. Then `make setup` installs it and `make test` checks it.
PIP_TOOLS := $(VENV)/lock-tools
lock:
	test -x $(PIP_TOOLS)/bin/pip-compile || { $(PYTHON) -m venv $(PIP_TOOLS) && \
		$(call pip,install --quiet pip-tools==7.6.2,$(PIP_TOOLS)/bin/python); }
	$(PIP_TOOLS)/bin/pip-compile --quiet --generate-hashes --extra dev --build-deps-for editable \
		--allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
		$(if $(UPGRADE),--upgrade) --output-file requirements.lock pyproject.toml

demo: setup
	$(BIN)/flowmem demo

# The complexity gate (xenon, on radon's cyclomatic complexity: a function scores one per branch,
# loop, `except`, boolean operator and comprehension clause, where ruff's C90 counts branches
# only): no function, method or class above rank C (20), no module whose blocks average above C,
# and all of them together A (5) on average. tests/test_complexity.py runs it, and plants a
# function over it in a copy. Tests are not gated.
COMPLEXITY_GATE := --max-absolute C --max-modules C --max-average A
COMPLEXITY_PATHS := flowmem bench examples

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/xenon $(COMPLEXITY_GATE) $(COMPLEXITY_PATHS)
	$(BIN)/lint-imports --no-logo

# flowmem and the benchmarks (bench/) strictly; the tests too, in the same run, with pyproject.toml's
# relaxations for them (tests/fixtures/make_release_store.py runs under an old release: left out).
MYPY := $(BIN)/mypy --strict flowmem bench tests --exclude '^tests/fixtures/'
typecheck: setup
	$(MYPY)

# The dashboard's browser tests need chromium: scripts/ensure-chromium finds it, or installs
# Debian's as root where apt-get is; without it they are skipped, and the last line says so.
# pytest-xdist runs the tests in two processes per core, at most PYTEST_MAX_PROCESSES (each
# process builds the session fixtures it needs and starts its own servers); the modules that share
# an expensive fixture name one `xdist_group`, whose tests run on one of them (`--dist loadgroup`,
# pyproject.toml's addopts). Two per core, not one: many tests mostly wait for the servers and
# commands they start, and with one process per core the cores stood a third idle (2 cores:
# 133% CPU, 684 s; with 4 processes 162%, 559 s).
# `make test PYTEST_PROCESSES=0` runs them in this one process.
PYTEST_PROCESSES ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')
PYTEST_MAX_PROCESSES ?= 4
pytest: setup
	@scripts/ensure-chromium
	$(BIN)/python -m pytest -q -n $(PYTEST_PROCESSES) --maxprocesses $(PYTEST_MAX_PROCESSES)
	@command -v chromium >/dev/null 2>&1 || echo "the dashboard's browser tests were skipped:" \
		"no chromium on PATH (install it, e.g. \`sudo apt-get install chromium\`, then \`make test\`)" >&2

# The type check runs beside the tests (its output shown once they are done), on the CPU the
# tests leave idle while they wait for the processes they start; either failing fails `make test`.
test: lint
	@$(MYPY) >$(VENV)/typecheck.log 2>&1 & \
	types=$$!; $(MAKE) --no-print-directory pytest; tests=$$?; wait $$types; typed=$$?; \
	echo "$(MYPY)"; cat $(VENV)/typecheck.log; \
	test $$tests -eq 0 -a $$typed -eq 0

# The performance figures at quick sizes, side by side (docs/performance.md); memharness too
# when FLOWMEM_BENCH_PY313 names a Python >= 3.13 that has it. The suite is bench/, beside the
# package (never in its wheel). Writes bench/results/local.json (git-ignored); the recorded run
# the docs quote, bench/results/latest.json, changes only with `--out` (`python -m bench --help`).
bench: setup
	$(BIN)/python -m bench --quick

# The figures README.md and docs/ quote, regenerated and compared (bench/docs_check.py; needs ../shared/data).
docs-check: setup
	$(BIN)/python bench/docs_check.py

clean:
	rm -rf $(VENV) .flowmem .mypy_cache .pytest_cache .ruff_cache
