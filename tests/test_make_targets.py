"""`make -n reproduce-<paper>` lists each paper's steps (nothing runs), and PROFILE=gpu picks
Table 2's GPU rows with mixed precision."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_experiment

REPO = Path(__file__).resolve().parents[1]


def make_n(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = Path(sys.prefix)
    # --no-print-directory: under `make test` this make is a sub-make, which would print
    # "Entering directory" lines around the commands
    proc = subprocess.run(["make", "-n", "--no-print-directory", "-o",
                           str(venv / ".installed-stamp"), f"VENV={venv}", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("target, expected", [
    ("reproduce-table2", ["experiments/reproduce_table2.py --profile cpu", '--rows "quick"',
                          '--out "runs/table2"']),
    ("reproduce-endx", ["experiments/endx_analyses.py --profile cpu", "--seeds 42,43,44",
                        "--results-dir runs/endx"]),
    ("reproduce-vaes", ["experiments/vae_study.py --profile cpu"]),
    ("reproduce-mining", ["--output runs/mining/retriever_off_the_shelf experiment=mining_dual",
                          "experiment=mining_classifier profile=cpu", "retrieval_qa.cli mine --classifier",
                          "experiment=mining_dual_augmented profile=cpu", "--dataset multireqa_squad --pool test"]),
    ("reproduce-sde-ade", ["experiments/sde_ade_study.py"]),
    ("reproduce-residual", ["experiments/residual_tables.py --profile cpu"]),
    ("device-check", ["experiments/device_check.py --device cuda --deadline 600"]),
    ("device-check-status", ["experiments/device_check.py --device cuda --status"]),
    ("device-pack", ["experiments/device_pack.py pack"]),
    ("notebook-inputs", ["retrieval_qa.cli export --output runs/notebooks/off_the_shelf/",
                         "train experiment=$e profile=cpu seed=1 trainer.max_steps=40"]),
    ("notebooks", ["retrieval_qa.cli export --output runs/notebooks/off_the_shelf/",
                   "papermill --cwd . --no-progress-bar tower_tsne.ipynb tower_tsne.ipynb\n",
                   "endx_similarity.ipynb endx_similarity.ipynb\n",
                   "compare_methods.ipynb compare_methods.ipynb\n",
                   "results_overview.ipynb results_overview.ipynb\n"]),
])
def test_make_n_lists_the_steps(target, expected):
    out = make_n(target)
    for text in expected:
        assert text in out, out


def test_the_distillation_recipe_pairs_seed_42_with_the_pipelines_reranker():
    """SEED=42 trains the pipeline's reranker (seed 0) and distils from hybrid_ft_rerank10; any
    other seed trains a reranker of its own seed and reads its seed's teacher pipeline."""
    out = make_n("reproduce-distill")
    assert "--config conf/pipeline/training/reranker_listwise.yaml\n" in out  # its seed 0
    assert "experiment=distill profile=cpu  seed=42" in out and "data.teacher" not in out
    out = make_n("reproduce-distill", "SEED=2")
    assert "seed=2 output=runs/reranker/listwise-seed2" in out
    assert out.count("data.teacher.pipeline=conf/pipeline/seeds/hybrid_ft_rerank10_seed2.yaml "
                     "data.teacher.output=runs/distill/teacher-cpu-seed2 seed=2") == 2
    assert "--checkpoint runs/ft/dual_bert/cpu-seed2/model" in out


def test_the_one_hour_distillation_recipe_times_every_step_and_reads_its_own_teacher():
    """reproduce-distill-hour: reproduce-distill's steps, the reranker on 4,000 questions into a
    folder of its own that the teacher reads, each step's time logged per seed."""
    flat = " ".join(make_n("reproduce-distill-hour", "SEED=2").replace("\\\n", " ").split())
    timed = "bash experiments/timed.sh runs/distill_hour/times-seed2.tsv"
    for step in ("fine-tuning", "reranker", "teacher", "distillation"):
        assert f"{timed} {step} " in flat
    assert "questions=4000 output=runs/reranker/listwise-hour-seed2 seed=2" in flat
    assert flat.count("experiment=distill_hour profile=cpu data.teacher.reranker="
                      "runs/reranker/listwise-hour-seed2 data.teacher.pipeline=") == 2
    flat = " ".join(make_n("reproduce-distill-hour").replace("\\\n", " ").split())
    assert "output=runs/reranker/listwise-hour " in flat and "seed=0" not in flat
    assert "data.teacher.reranker=runs/reranker/listwise-hour seed=42" in flat


def test_the_distill_plus_recipe_shares_the_hour_steps_and_tests_on_its_pool():
    """reproduce-distill-plus: the one-hour recipe's first steps, its own teacher folder per
    seed, the student of conf/experiment/distill_plus.yaml, then MultiReQA SQuAD test on the
    ledger as family distill_plus; every step timed."""
    flat = " ".join(make_n("reproduce-distill-plus", "SEED=2").replace("\\\n", " ").split())
    timed = "bash experiments/timed.sh runs/distill_plus/times-seed2.tsv"
    for step in ("fine-tuning", "reranker", "teacher", "distillation", "multireqa-squad"):
        assert f"{timed} {step} " in flat
    assert "questions=4000 output=runs/reranker/listwise-hour-seed2 seed=2" in flat
    assert flat.count("experiment=distill_plus profile=cpu data.teacher.reranker="
                      "runs/reranker/listwise-hour-seed2 data.teacher.pipeline="
                      "conf/pipeline/seeds/hybrid_ft_rerank10_seed2.yaml "
                      "data.teacher.output=runs/distill/teacher-cpu-plus-seed2 seed=2") == 2
    assert ("--checkpoint runs/distill_plus/cpu-seed2/model --dataset multireqa_squad --pool "
            "test --family distill_plus") in flat
    # candidate 4 (PLUS=distill_plus6): its own experiment, folders and times, the same family
    flat = " ".join(make_n("reproduce-distill-plus", "SEED=2", "PLUS=distill_plus6")
                    .replace("\\\n", " ").split())
    assert "bash experiments/timed.sh runs/distill_plus6/times-seed2.tsv distillation env " \
        "RQA_LEDGER_FAMILY=distill_plus" in flat
    assert flat.count("experiment=distill_plus6 profile=cpu ") == 2
    assert "data.teacher.output=runs/distill/teacher-cpu-plus6-seed2 seed=2" in flat
    assert ("--checkpoint runs/distill_plus6/cpu-seed2/model --dataset multireqa_squad --pool "
            "test --family distill_plus") in flat


def test_the_pipeline_plus_recipe_trains_its_reader_and_reads_its_seeds_checkpoints():
    """reproduce-pipeline-plus: distill_plus's training steps without its test look, the
    12,000-question paragraph reader of the seed, then hybrid_plus_reader with that seed's
    checkpoints on the dev pool and RelationExtraction test, the looks as family
    pipeline_plus, each look's JSON kept; every step timed."""
    flat = " ".join(make_n("reproduce-pipeline-plus", "SEED=2").replace("\\\n", " ").split())
    timed = "bash experiments/timed.sh runs/pipeline_plus/times-seed2.tsv"
    for step in ("fine-tuning", "reranker", "teacher", "distillation", "reader", "dev",
                 "relationextraction"):
        assert f"{timed} {step} " in flat
    assert "--dataset multireqa_squad" not in flat
    assert ("--config conf/pipeline/training/reader_q12k.yaml seed=2 "
            "output=runs/reranker/reader-q12k-seed2") in flat
    keys = ("retrievers.minilm_ft.checkpoint=runs/ft/dual_bert/cpu-seed2/model "
            "retrievers.minilm_distill.checkpoint=runs/distill_plus/cpu-seed2/model "
            "reranker.checkpoint=runs/reranker/reader-q12k-seed2")
    options = ("--pipeline hybrid_plus_reader --pipeline-dir runs/pipeline_plus/seed2 "
               "--family pipeline_plus")
    for dataset, pool in (("reqa_squad", "dev"), ("multireqa_relationextraction", "test")):
        assert (f"{options} --dataset {dataset} --pool {pool} --result "
                f"runs/pipeline_plus/seed2/{dataset}-{pool}.json {keys}") in flat
    flat = " ".join(make_n("reproduce-pipeline-plus").replace("\\\n", " ").split())
    assert "seed=42 output=runs/reranker/reader-q12k " in flat


def test_attempt_2_of_the_pipeline_runs_into_its_own_folder_and_its_looks_run_alone():
    """PLUS=distill_plus6: candidate 4's student, runs/pipeline_plus6/ and its times, the
    looks' family unchanged; pipeline-plus-eval: the two looks alone, STUDENT's checkpoint."""
    flat = " ".join(make_n("reproduce-pipeline-plus", "PLUS=distill_plus6", "SEED=2")
                    .replace("\\\n", " ").split())
    assert "bash experiments/timed.sh runs/pipeline_plus6/times-seed2.tsv dev " in flat
    assert ("--pipeline hybrid_plus_reader --pipeline-dir runs/pipeline_plus6/seed2 "
            "--family pipeline_plus") in flat
    assert "retrievers.minilm_distill.checkpoint=runs/distill_plus6/cpu-seed2/model" in flat
    looks = make_n("pipeline-plus-eval", "PLUS=distill_plus6", "STUDENT=S/model")
    assert looks.count("evaluate --pipeline hybrid_plus_reader") == 2
    assert "train" not in looks and "prepare" not in looks
    assert looks.count("retrievers.minilm_distill.checkpoint=S/model ") == 2
    assert "runs/pipeline_plus6/seed42/reqa_squad-dev.json" in looks


def test_the_device_checklists_recipe_targets_time_into_TIMES_and_pass_RERANKER_ARGS():
    """distill-plus-train (distill_plus's training steps, no test look) and
    pipeline-plus-reader (the reader alone): each step timed into TIMES, RERANKER_ARGS on
    every reranker training, the recipes themselves unchanged without them."""
    args = ("SEED=1", "TIMES=T.tsv", "RERANKER_ARGS=model.training.accelerator=auto")
    train = " ".join(make_n("distill-plus-train", *args).replace("\\\n", " ").split())
    for step in ("fine-tuning", "reranker", "teacher", "distillation"):
        assert f"bash experiments/timed.sh T.tsv {step} " in train
    assert "--pool test" not in train and "evaluate" not in train
    assert "output=runs/reranker/listwise-hour-seed1 seed=1 model.training.accelerator=auto" \
        in train
    reader = " ".join(make_n("pipeline-plus-reader", *args).replace("\\\n", " ").split())
    assert reader.startswith("bash experiments/timed.sh T.tsv reader ")
    assert reader.endswith("output=runs/reranker/reader-q12k-seed1 "
                           "model.training.accelerator=auto")
    assert "accelerator" not in make_n("reproduce-pipeline-plus", "SEED=1")


def test_timed_steps_append_their_time_and_keep_the_exit_status(tmp_path):
    log = tmp_path / "times.tsv"
    def timed(step, command):
        return subprocess.run(["bash", "experiments/timed.sh", str(log), step, "bash", "-c",
                               command], cwd=REPO).returncode

    assert (timed("ok", "true"), timed("bad", "false")) == (0, 1)
    # a step whose sitting is stopped by a signal (here the step signals its timer, then
    # exits 3, as a training saves its checkpoint and exits) still leaves its row
    stop = "import os, signal; os.kill(os.getppid(), signal.SIGTERM); raise SystemExit(3)"
    assert timed("stopped", f"{sys.executable} -c '{stop}'") == 3
    header, *rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert header == ["start", "step", "seconds", "status", "threads"]
    assert [(r[1], r[3]) for r in rows] == [("ok", "0"), ("bad", "1"), ("stopped", "3")]
    assert all(r[2].isdigit() and r[0].endswith("Z") for r in rows)


def test_device_check_rehearsal_detached_and_collect():
    out = make_n("device-check", "DEVICE=cpu", "DEADLINE=60", "DETACH=1")
    assert "device_check.py --device cpu --deadline 60 --detach" in out
    assert "--unbundle \"t.tar.gz\"" in make_n("device-collect", "BUNDLE=t.tar.gz")
    assert "--no-download" in make_n("device-pack", "NO_DOWNLOAD=1")


def test_profile_gpu_runs_the_gpu_rows_with_the_trainers_precision():
    """Precision is the trainer's ``auto`` (bf16-mixed on a GPU) unless GPU_PRECISION says."""
    out = make_n("reproduce-table2", "PROFILE=gpu")
    assert "--profile gpu" in out and '--rows "all"' in out and '--out "runs/table2-gpu"' in out
    assert "precision" not in out
    out = make_n("reproduce-table2", "PROFILE=gpu", "GPU_PRECISION=32", "ROWS=Dual-GRUs",
                 "TRAIN_OVERRIDES=trainer.max_steps=5")
    assert '--train-overrides "trainer.precision=32 trainer.max_steps=5"' in out
    assert "precision" not in make_n("reproduce-table2")


def test_profile_gpu_selects_the_rows_that_have_one():

    from retrieval_qa.config import load_yaml

    module = load_experiment("reproduce_table2")
    table = load_yaml("tables/endx_table2.yaml")
    wanted, selection = module.select_rows(table, "all", "gpu")
    trained = {r.name for r in table.rows if r.kind == "train"} & wanted
    # every trained row of Table 2 has a gpu profile
    assert trained == {r.name for r in table.rows if r.kind == "train"} >= {"Dual-RNNs"}
    assert "BM25" in wanted and selection == "all"
    reduced = module.reductions(table, wanted, "gpu")
    assert set(reduced) == trained and all("GPU profile (REDUCED)" in d for d in reduced.values())
    wanted, selection = module.select_rows(table, "all", "tpu")   # a profile no row has
    assert "BM25" in wanted and not wanted & trained and "tpu profile" in selection
    with pytest.raises(SystemExit, match="no `tpu` profile"):
        module.select_rows(table, "Dual-RNNs", "tpu")
    assert module.select_rows(table, "all", "cpu")[0] >= trained
