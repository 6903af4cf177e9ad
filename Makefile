# Two entry points (see README, Quick start):
#   make quickstart   set up .venv and run the main job (hardmax reproduce --quick, into runs/quick/)
#   make test         set up .venv with dev and docs extras, run ruff + pytest, and build the docs
# and `make docs`: the documentation site alone, into docs/_build/html/ (warnings are errors);
# `make test-fast`: the edit loop, ruff + the tests not marked slow on two workers, no docs (under 3 minutes on
# two cores; `make test`, what CI runs, before a commit).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HARDMAX_IMDB ?= $(abspath $(firstword $(wildcard ../shared/data/aclImdb-labeled.tar.gz)))
export HARDMAX_IMDB
# Where hardmax caches data; the archive found here is linked into it, so later commands find it too.
CACHE := $(or $(HARDMAX_CACHE),$(HOME)/.cache/hardmax)

.PHONY: setup data quickstart test test-fast lint docs build-docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,docs,minilm]'

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
	$(BIN)/ruff check src tests benchmarks scripts examples docs

test: setup
	$(BIN)/ruff check src tests benchmarks scripts examples docs
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2 -q
	$(MAKE) --no-print-directory build-docs

# The edit loop: what `make test` runs minus the tests marked slow (pytest.mark.slow: over ~3 s each, the browser,
# the wheel, the README's commands) and the docs. Sets .venv up only when it has no pytest yet.
test-fast: $(BIN)/pytest
	$(BIN)/ruff check src tests benchmarks scripts examples docs
	OMP_NUM_THREADS=1 $(BIN)/pytest -n 2 -q -m "not slow"

$(BIN)/pytest:
	$(MAKE) --no-print-directory setup

docs: setup build-docs

# The site, rebuilt whole (-E: every page's warnings, every example run) with warnings as errors (a broken
# link, an undocumented public name, a failing gallery example),
# then the docstrings' examples (>>>) run as doctests.
build-docs:
	rm -rf docs/_build/html  # a page an older build left behind is neither served nor checked
	MPLBACKEND=Agg $(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python docs/_ext/check_offline.py docs/_build/html  # nothing loaded from another host
	$(BIN)/pytest -q -p no:cacheprovider --doctest-modules src/hardmax
	@echo "documentation: open docs/_build/html/index.html"
