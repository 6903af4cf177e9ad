# Two entry points (see README, Quick start):
#   make quickstart   set up .venv and run the main job (hardmax reproduce --quick, into runs/quick/)
#   make test         set up .venv with dev extras and run ruff + pytest
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARDMAX_IMDB ?= $(firstword $(wildcard ../shared/data/aclImdb-labeled.tar.gz))
export HARDMAX_IMDB
# Where hardmax caches data; the archive found here is linked into it, so later commands find it too.
CACHE := $(or $(HARDMAX_CACHE),$(HOME)/.cache/hardmax)

.PHONY: setup data quickstart test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'

# Remember the reviews for every later command (hardmax train, evaluate, ... without HARDMAX_IMDB): link
# the archive at the place hardmax looks after --data and $HARDMAX_IMDB. Without one, hardmax downloads it.
data:
	@if [ -n "$(HARDMAX_IMDB)" ] && [ ! -e "$(CACHE)/aclImdb_v1.tar.gz" ]; then \
		mkdir -p "$(CACHE)" && ln -s "$(abspath $(HARDMAX_IMDB))" "$(CACHE)/aclImdb_v1.tar.gz" && \
		echo "linked $(HARDMAX_IMDB) into $(CACHE)/: later hardmax commands read the reviews from there"; fi

quickstart: setup data
	$(BIN)/hardmax reproduce --quick
	@echo "Next: source $(VENV)/bin/activate (or call $(BIN)/hardmax), then e.g."
	@echo "  hardmax explain \"Awful, the worst film ever: boring, stupid and a waste of time.\" --run runs/quick/d2"

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2 -q
