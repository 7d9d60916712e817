# Set-up is part of every target: a fresh clone needs only Python 3.11+ (and root or sudo for Chromium).
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
# test workers: one per core, and at least 3 (many tests wait on servers, browsers and subprocesses)
JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 3 ] && n=3; echo $$n)

.PHONY: dashboard test lint unit quick browser-deps bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

## the dashboard on the bundled demo study (built on first use), on 127.0.0.1:$(PORT)
PORT ?= 8501
dashboard: $(BIN)/.installed
	$(BIN)/mcqaudit dashboard --port $(PORT)

## Debian's Chromium for the end-to-end browser test (never `playwright install`)
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq || echo "apt-get update failed; installing from the package lists already here" >&2; \
		$$SUDO apt-get install -y -qq chromium >/dev/null; }

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

## every test, on every core (pytest-xdist; a worker steals tests when it runs dry)
unit: $(BIN)/.installed
	$(BIN)/pytest -n $(JOBS) --dist worksteal

## the tests without the end-to-end ones (marked slow or browser)
quick: $(BIN)/.installed
	$(BIN)/pytest -m "not slow and not browser"

## everything CI runs: install, lint, type-check, all tests
test: $(BIN)/.installed browser-deps lint unit

bench: $(BIN)/.installed browser-deps
	$(BIN)/python benchmarks/run_all.py --results benchmarks/RESULTS.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache sample_runs/*.duckdb sample_runs/*.duckdb.info.json sample_runs/*.duckdb.report.json
