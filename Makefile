# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export LANCEDB_LOG := error
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120

.PHONY: setup demo test lint typecheck pytest bench docs-check clean

setup: $(STAMP)

# `$(call pip,ARGS)`: pip with its full output in $(VENV)/pip.log, shown without one notice:
# pip warns "Location 'file:///.../<project>/' is ignored" for every project that an on-disk index
# set in pip.conf (extra-index-url = file:///..., a partial local mirror) lacks, and has no switch
# for it (pypa/pip#8149). Every other line, and pip's exit status, go through.
define pip
$(BIN)/python -m pip $(1) >$(VENV)/pip.log 2>&1; status=$$?; \
grep -v "^WARNING: Location 'file:.*' is ignored: it is neither a file nor a directory\.$$" $(VENV)/pip.log >&2; \
exit $$status
endef

# Reinstall only when the project's metadata changed: otherwise `make setup` is a no-op.
# pip shows a local project's build-backend warnings; setuptools sends a notice that is only
# information through them ("Editable installation.": folders named like the package may shadow
# it), so PYTHONWARNINGS ignores that one message, no other.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing flowmem[dev] into $(VENV): a few minutes the first time"
	@$(call pip,install --quiet --upgrade pip)
	@PYTHONWARNINGS="ignore:Editable installation:UserWarning" $(call pip,install --quiet -e '.[dev]')
	touch $(STAMP)

demo: setup
	$(BIN)/flowmem demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo

typecheck: setup
	$(BIN)/mypy --strict flowmem

pytest: setup
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

# The performance figures at quick sizes, side by side (docs/performance.md); memharness too
# when FLOWMEM_BENCH_PY313 names a Python >= 3.13 that has it. Writes bench/results/latest.json.
bench: setup
	$(BIN)/flowmem bench --quick

# The figures README.md and docs/ quote, regenerated and compared (bench/docs_check.py; needs ../shared/data).
docs-check: setup
	$(BIN)/python bench/docs_check.py

clean:
	rm -rf $(VENV) .flowmem .mypy_cache .pytest_cache .ruff_cache
