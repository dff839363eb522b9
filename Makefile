# Two commands do all set-up on a fresh machine:
#   make run   - create .venv, install memstream, start the embedded memory service
#   make test  - create .venv, install memstream with its test extras, lint (ruff), type-check (mypy),
#                check the import layers (lint-imports), pass the suite; its summary lists every
#                skipped test with the reason (-rs: e.g. no prometheus binary, which .ci/run installs)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install bench fuzz clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/memstream up

test: $(STAMP)
	$(BIN)/ruff check memstream tests examples
	$(BIN)/ruff format --check memstream tests examples
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -rs

# the property-based tests at 50x their CI examples (MEMSTREAM_FUZZ_SCALE), minutes not seconds
fuzz: $(STAMP)
	MEMSTREAM_FUZZ_SCALE=$${MEMSTREAM_FUZZ_SCALE:-50} $(BIN)/python -m pytest -q -m property

bench: $(STAMP)
	$(BIN)/memstream bench hotpath

clean:
	rm -rf $(VENV) build *.egg-info
