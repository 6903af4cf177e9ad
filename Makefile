# Two entry points (see README, Quick start):
#   make quickstart   set up .venv and run the main job (hardmax reproduce --quick)
#   make test         set up .venv with dev extras and run ruff + pytest
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARDMAX_IMDB ?= $(firstword $(wildcard ../shared/data/aclImdb-labeled.tar.gz))
export HARDMAX_IMDB

.PHONY: setup quickstart test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'

quickstart: setup
	$(BIN)/hardmax reproduce --quick

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2 -q
