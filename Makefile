# Two commands do all set-up on a fresh machine:
#   make run   - create .venv, install memstream (without the test extras), start the embedded memory service
#   make test  - create .venv, install memstream with its test extras, lint (ruff, ruff format), type-check (mypy),
#                check the import layers (lint-imports), find dead code (vulture), build the docs site strictly (mkdocs),
#                pass the suite on two workers a CPU (pytest-xdist; each module's tests on one worker, the slowest modules
#                first, in a random order whose seed the last line names); its summary lists every skipped test
#                with the reason (-rs: e.g. no prometheus binary, which .ci/run installs)
#   make docs  - regenerate the reference pages of docs/ from the code (the CLI's parser, the settings, the
#                metric families: docs/gen/reference.py) and build the documentation site into build/site
#   make test-fast - the inner loop: the same checks, then the tests not marked slow (no Valkey, Hermes,
#                browser or Prometheus; tests/conftest.py says which), the same way
# WORKERS=N sets the number of workers (twice the CPUs: many tests wait on child processes and servers, see
# BENCHMARKS.md); `make test PARALLEL=` runs the suite in one process
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# two stamps: running needs memstream alone, the checks need its test extras too
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint docs install bench fuzz clean

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/memstream up

lint: $(STAMP)
	$(BIN)/ruff check memstream tests examples docs/gen
	$(BIN)/ruff format --check memstream tests examples docs/gen
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/vulture
	$(MKDOCS) build --strict

# the documentation site: mkdocs (not --quiet: strict mode counts only the warnings it logs) fails on a
# broken link, a page missing from the nav, or a generated page out of date (docs/gen/hooks.py)
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

docs: $(STAMP)
	$(BIN)/python docs/gen/reference.py
	$(MKDOCS) build --strict

# loadfile: a module's tests go to one worker, so a module-scoped fixture (a server, a Hermes agent) is built
# once; no-loadscope-reorder: in tests/conftest.py's order, the slowest modules first (xdist would put the
# modules with the most tests first)
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')
PARALLEL := -n $(WORKERS) --dist loadfile --no-loadscope-reorder

# The suite writes bytecode whatever the shell says (PYTHONDONTWRITEBYTECODE unset for pytest and every process it
# starts): with it set, each worker compiled memstream and rewrote the asserts of every test module anew (13.5 s of
# CPU a worker against 3.6 s), and each child (a command, a service, a Hermes run) compiled what it imported. One
# collection first writes them (its errors are the suite's to report), so the workers read what it wrote instead of
# all compiling the same at once (see BENCHMARKS.md)
SUITE := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest
COMPILED := $(SUITE) -q --collect-only -p no:randomly >/dev/null || true

test: lint
	$(COMPILED)
	$(SUITE) -q -rs $(PARALLEL)

test-fast: lint
	$(COMPILED)
	$(SUITE) -q -rs -m "not slow" $(PARALLEL)

# the property-based tests at 50x their CI examples (MEMSTREAM_FUZZ_SCALE), minutes not seconds
fuzz: $(STAMP)
	MEMSTREAM_FUZZ_SCALE=$${MEMSTREAM_FUZZ_SCALE:-50} $(BIN)/python -m pytest -q -m property

bench: $(STAMP)
	$(BIN)/memstream bench hotpath

clean:
	rm -rf $(VENV) build *.egg-info
