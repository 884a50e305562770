# Two commands set up a fresh machine: `make run` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml changes.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.pitboss-installed
# Override with e.g. `make test PYTHON=/opt/python3.12/bin/python3`.
PYTHON ?=
PY_CANDIDATES := python3 python3.13 python3.12 python3.11

.PHONY: help run test lint db-stop clean

help:
	@echo "make run      serve the API and the projection worker on 127.0.0.1:$${PORT:-8000}"
	@echo "              (embedded PostgreSQL by default; a demo table on first run, new"
	@echo "              demo keys each run)"
	@echo "make test     lint, type-check, check import directions, run all tests"
	@echo "make lint     ruff, mypy and import-linter only"
	@echo "make db-stop  stop the embedded PostgreSQL kept running in var/pgdata"
	@echo "make clean    stop the embedded database, remove .venv and caches (keeps var/)"

$(BIN)/python:
	@py="$(PYTHON)"; \
	if [ -n "$$py" ]; then \
	  if ! "$$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
	    echo "error: PYTHON=$$py is not Python 3.11 or newer." >&2; exit 1; \
	  fi; \
	else \
	  for candidate in $(PY_CANDIDATES); do \
	    if command -v "$$candidate" >/dev/null 2>&1 && \
	       "$$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
	      py="$$(command -v "$$candidate")"; break; \
	    fi; \
	  done; \
	  if [ -z "$$py" ]; then \
	    echo "error: pitboss needs Python 3.11 or newer; none of '$(PY_CANDIDATES)' on PATH is." >&2; \
	    echo "       Install one, or point to it: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11" >&2; \
	    exit 1; \
	  fi; \
	fi; \
	echo "creating $(VENV) with $$py ($$("$$py" -V 2>&1))"; \
	"$$py" -m venv $(VENV) || { rm -rf $(VENV); echo "error: '$$py -m venv' failed (on Debian/Ubuntu: install python3-venv)" >&2; exit 1; }

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --editable '.[dev]'
	@touch $@

# The API (gunicorn) and the projection worker on the embedded PostgreSQL; on an empty
# database a demo table with a few simulated rounds. Prints the docs URL and demo keys.
run: $(STAMP)
	$(BIN)/pitboss demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

test: lint
	$(BIN)/pytest

db-stop: $(STAMP)
	$(BIN)/pitboss db stop

# The embedded PostgreSQL runs from binaries inside the virtualenv: stopped first, or removing
# them would leave it running with nothing to stop it but a reinstall.
clean:
	-if [ -x $(BIN)/pitboss ]; then $(BIN)/pitboss db stop; fi
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache *.egg-info build dist
	find . -path ./var -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
