# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export LANCEDB_LOG := error
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120

.PHONY: setup demo test lint typecheck pytest clean

setup: $(STAMP)

# Reinstall only when the project's metadata changed: otherwise `make setup` is a no-op.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

clean:
	rm -rf $(VENV) .flowmem .mypy_cache .pytest_cache .ruff_cache
