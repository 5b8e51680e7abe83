"""Two processes (DDP over gloo, CPU) train the same model as one process on the same
global batches: the sampler shards each duplicate-free global batch, the in-batch softmax
gathers candidates across processes, DDP averages the gradients, and validation / test
gather the candidate embeddings. Final weights agree within a tolerance, and both tests
rank as the one-process model's scores do, up to near-ties."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import (
    assert_ranks_fit_scores,
    from_conf,
    make_dirs,
    pool_scores,
    rank_bounds,
    synthetic_squad,
    tiny_overrides,
)

from retrieval_qa.data import load_pool
from retrieval_qa.evaluation.per_question import RUN_DIR_NAME, read_per_question

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def setup_dirs(tmp_path_factory):
    """The training tests' data, with every number of the synthetic file in the vocabulary and
    a synthetic dev file, so that no two candidates of the validation or the test pool are
    the same encoder input. With TINY_SQUAD and digits only, distinct sentences became the
    same ids ([UNK] for every unknown word): their scores tie exactly only when encoded in one
    batch, so a question's rank among them depended on the sharding, not on the model."""
    return make_dirs(tmp_path_factory.mktemp("ddp"), synthetic_squad(n_paragraphs=8),
                     numbers=400)


def _train(setup_dirs, out: Path, *extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
           "RQA_THREADS": "1", "PL_DISABLE_FORK": "1"}
    cmd = [sys.executable, "-m", "retrieval_qa.cli", "train",
           *tiny_overrides(setup_dirs, out, "trainer.max_epochs=1", "trainer.max_steps=4",
                           "trainer.accelerator=cpu", "model.optimizer.lr=0.01",
                           "trainer.num_sanity_val_steps=0", *extra)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == 1, done.stdout  # process 0 alone reports (and exports)
    return json.loads(results[0])


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed missing")
def test_two_processes_train_the_same_model_as_one(setup_dirs, tmp_path):
    one = _train(setup_dirs, tmp_path / "one", "data.batch_size=8", "trainer.devices=1")
    two = _train(setup_dirs, tmp_path / "two", "data.batch_size=4", "trainer.devices=2",
                 "trainer.strategy=ddp")
    assert one["global_steps"] == two["global_steps"] == 4
    assert two["data"]["global_batch_size"] == one["data"]["global_batch_size"] == 8
    w1 = torch.load(Path(one["checkpoint"]) / "towers.pt")
    w2 = torch.load(Path(two["checkpoint"]) / "towers.pt")
    assert w1.keys() == w2.keys()
    for k in w1:  # two processes sum the gradients in another order: float32 rounding
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-5, msg=k)
    # the test gathered every candidate from both processes: both rank as the one-process
    # model's scores do, up to near-ties (the two models differ in float rounding, so their
    # ranks and metrics may differ where two candidates score within 1e-4). Two processes
    # write no per-question record: their MRR lies within what the scores' ranks give.
    assert two["test"]["questions"] == one["test"]["questions"] == 36
    assert two["test"]["candidates"] == one["test"]["candidates"]
    assert set(two["last_val"]) == set(one["last_val"])
    pool, _ = load_pool("reqa_squad", "dev", setup_dirs[0] / "data", use_cache=False)
    scores = pool_scores(one["checkpoint"], pool)
    assert_ranks_fit_scores(read_per_question(Path(one["checkpoint"]).parent / RUN_DIR_NAME),
                            pool, scores, atol=1e-4)
    low, high = rank_bounds(pool, scores, atol=1e-4)["rank"]
    mrr = two["test"]["metrics"]["mrr"]  # rounded to 4 decimals
    assert 100 * (1 / high).mean() - 1e-4 <= mrr <= 100 * (1 / low).mean() + 1e-4


def test_no_two_candidates_of_the_evaluation_pools_are_the_same_input(setup_dirs):
    from transformers import AutoTokenizer

    root, _ = setup_dirs
    tokenizer = AutoTokenizer.from_pretrained(root / "tokenizer")
    data = from_conf("data", "reqa_squad", tokenizer=tokenizer, data_dir=root / "data",
                     max_train_pairs=None, max_val_questions=None)
    data.setup("fit")
    for pool, size in ((data.val_pool, 52), (data.test_pool, 32)):
        inputs = {tuple(tokenizer(c.text)["input_ids"]) for c in pool.candidates}
        assert len(inputs) == len(pool.candidates) == size
