"""The round trip on the real ReQA SQuAD dev pool: `rqa data export` writes it as a collection
(one query per distinct question text, every gold copy judged), `--dataset collection:DIR`
reads it back with the same counts, and BM25 and an exported encoder give the same ranks, so
the same metrics to every digit, on both. Needs the real data (skips without it)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from helpers import save_dual_encoder, towers_conf, word_tokenizer

from retrieval_qa.cli import main
from retrieval_qa.data import load_pool
from retrieval_qa.evaluation.per_question import beside_run_file, read_per_question

pytestmark = pytest.mark.integration


def rqa(capsys, *argv) -> dict:
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return tmp_path_factory.mktemp("collection") / "reqa_squad-dev"


def test_reqa_dev_round_trips_with_the_same_counts_and_bm25(shared_data, exported, tmp_path,
                                                            capsys):
    written = rqa(capsys, "data", "export", "--dataset", "reqa_squad", "--pool", "dev",
                  "--output", exported, "--quiet")
    assert (written["candidates"], written["questions"]) == (10250, 10539)
    stats = rqa(capsys, "data", "stats", "--dataset", f"collection:{exported}", "--pool", "dev",
                "--quiet")
    assert (stats["candidates"], stats["questions"], stats["question_unit"]) == \
        (10250, 10539, "question_id")
    assert (stats["questions_without_gold"], stats["queries_not_in_split"]) == (0, 0)
    pool, _ = load_pool("reqa_squad", "dev")
    back, _ = load_pool(f"collection:{exported}", "dev")
    assert back.candidates == pool.candidates and back.questions == pool.questions
    assert back.gold == pool.gold
    records = []
    for name, dataset in (("reqa", "reqa_squad"), ("collection", f"collection:{exported}")):
        out = rqa(capsys, "evaluate", "--model", "bm25", "--dataset", dataset, "--pool", "dev",
                  "--run-file", tmp_path / f"{name}.jsonl", "--quiet")
        assert out["questions"] == 10539 and out["candidates"] == 10250
        records.append(read_per_question(beside_run_file(tmp_path / f"{name}.jsonl")))
    assert np.array_equal(records[0].ranks, records[1].ranks)
    assert np.array_equal(records[0].doc_ranks, records[1].doc_ranks)
    assert records[0].metrics() == records[1].metrics()  # the same ranks: every digit
    print("BM25 MRR", records[0].metrics()["mrr"], records[1].metrics()["mrr"])


@pytest.mark.slow  # ~30 s: 20,789 texts encoded twice (tests/cli/test_collections_trec.py: tiny)
def test_an_exported_encoder_gives_the_same_mrr_on_both(shared_data, exported, tmp_path,
                                                        capsys, one_thread):
    if not (exported / "corpus.jsonl").is_file():
        rqa(capsys, "data", "export", "--dataset", "reqa_squad", "--pool", "dev", "--output",
            exported, "--quiet")
    pool, _ = load_pool("reqa_squad", "dev")
    words = sorted({w for t in pool.questions + [c.text for c in pool.candidates]
                    for w in re.findall(r"\w+", t.lower())})
    cfg = towers_conf(encoder={"type": "gru", "vocab_size": len(words) + 5, "embedding_dim": 8,
                               "hidden_size": 8, "dropout": 0.0},
                      pooler={"type": "mean"}, projection={"dim": None}, sharing="sde")
    folder = save_dual_encoder(tmp_path / "model", word_tokenizer(words), cfg, "cosine")
    records = []
    for name, dataset in (("reqa", "reqa_squad"), ("collection", f"collection:{exported}")):
        rqa(capsys, "evaluate", "--checkpoint", folder, "--dataset", dataset, "--pool", "dev",
            "--run-file", tmp_path / f"{name}.jsonl", "--quiet")
        records.append(read_per_question(beside_run_file(tmp_path / f"{name}.jsonl")))
    assert np.array_equal(records[0].ranks, records[1].ranks)
    assert records[0].metrics() == records[1].metrics()
    print("encoder MRR", records[0].metrics()["mrr"], records[1].metrics()["mrr"])
