"""The command line on a collection of the user's own (`--dataset collection:PATH` or a folder
PATH) and with TREC files: `rqa data stats / export`, `rqa evaluate` with BM25, an exported
model and a pipeline, `rqa train` on a collection's training split, `--trec-run` /
`--trec-qrels`, and `rqa metrics` / `rqa compare` reading TREC runs; bad input one line, exit
status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import TINY_SQUAD, save_dual_encoder, towers_conf, word_tokenizer, write_json_gz

from retrieval_qa.cli import main
from retrieval_qa.evaluation import ledger
from retrieval_qa.evaluation.per_question import beside_run_file, read_per_question


def _run(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's errors
        code = e.code
    out, err = capsys.readouterr()
    return code, (json.loads(out.strip().splitlines()[-1]) if out.strip() else None), err


def rqa(capsys, *argv) -> dict:
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    return out


@pytest.fixture
def tiny(tmp_path, capsys) -> tuple[Path, Path]:
    """(the data folder of TINY_SQUAD, its dev pool written as a collection)."""
    data = tmp_path / "data"
    write_json_gz(data / "squad" / "dev-v1.1.json.gz", TINY_SQUAD)
    rqa(capsys, "data", "export", "--dataset", "reqa_squad", "--pool", "dev", "--data-dir",
        data, "--output", tmp_path / "tiny-dev", "--quiet")
    return data, tmp_path / "tiny-dev"


def test_stats_and_bm25_read_a_collection_as_the_pool_it_was_written_from(tiny, tmp_path,
                                                                          capsys, monkeypatch):
    data, folder = tiny
    monkeypatch.setenv(ledger.ENV, str(tmp_path / "ledger.jsonl"))
    stats = rqa(capsys, "data", "stats", "--dataset", folder, "--quiet")  # a plain folder
    assert (stats["dataset"], stats["pool"], stats["questions"], stats["candidates"]) == \
        ("collection:tiny-dev", "dev", 4, 5)  # dev: the only split
    assert stats["queries_not_in_split"] == 0 and stats["question_unit"] == "question_id"
    runs = {}
    for name, dataset in (("squad", ["--dataset", "reqa_squad", "--data-dir", data]),
                          ("collection", ["--dataset", f"collection:{folder}"])):
        out = rqa(capsys, "evaluate", "--model", "bm25", *dataset, "--pool", "dev",
                  "--run-file", tmp_path / f"{name}.jsonl", "--quiet")
        runs[name] = read_per_question(beside_run_file(tmp_path / f"{name}.jsonl"))
        assert out["questions"] == 4
    assert np.array_equal(runs["squad"].ranks, runs["collection"].ranks)
    assert runs["collection"].ids == ["q1", "q2", "q3", "q5"]  # the query ids
    # a collection's dev split is no test pool; its test split is (ledger.is_test_pool)
    looks = [e["dataset"] for e in ledger.read(tmp_path / "ledger.jsonl")]
    assert looks == ["reqa_squad"]
    (folder / "qrels" / "dev.tsv").rename(folder / "qrels" / "test.tsv")
    rqa(capsys, "evaluate", "--model", "bm25", "--dataset", f"collection:{folder}", "--quiet")
    looks = [(e["dataset"], e["pool"]) for e in ledger.read(tmp_path / "ledger.jsonl")]
    assert looks[-1] == ("collection:tiny-dev", "test")


def test_an_exported_model_and_a_pipeline_evaluate_a_collection(tiny, tmp_path, capsys,
                                                                one_thread):
    data, folder = tiny
    words = "paris is the capital of france it has eiffel tower berlin in germany munich " \
            "bavaria what where which state tower".split()
    cfg = towers_conf(encoder={"type": "gru", "vocab_size": len(words) + 5, "embedding_dim": 8,
                               "hidden_size": 8, "dropout": 0.0},
                      pooler={"type": "mean"}, projection={"dim": None}, sharing="sde")
    model = save_dual_encoder(tmp_path / "m", word_tokenizer(words), cfg, "cosine")
    ranks = []
    for name, dataset in (("squad", ["--dataset", "reqa_squad", "--data-dir", data]),
                          ("collection", ["--dataset", f"collection:{folder}"])):
        rqa(capsys, "evaluate", "--checkpoint", model, *dataset, "--pool", "dev", "--run-file",
            tmp_path / f"{name}.jsonl", "--quiet")
        ranks.append(read_per_question(beside_run_file(tmp_path / f"{name}.jsonl")).ranks)
    assert np.array_equal(*ranks)
    pipeline = tmp_path / "two_bm25.yaml"
    pipeline.write_text("retrievers:\n  bm25: {kind: bm25}\n  ctx: {kind: bm25, settings: "
                        "{with_context: true}}\nfusion: {method: rrf, rrf_k: 5}\ntop_k: 3\n")
    out = rqa(capsys, "evaluate", "--pipeline", pipeline, "--dataset", f"collection:{folder}",
              "--pipeline-dir", tmp_path / "pd", "--trec-run", tmp_path / "fused.trec",
              "--quiet")
    assert out["dataset"] == "collection:tiny-dev" and out["trec"]["depth"] >= 3  # fused
    assert out["trec"]["tag"] == "rqa-two_bm25"
    assert {line.split()[0] for line in (tmp_path / "fused.trec").read_text().splitlines()} \
        == {"q1", "q2", "q3", "q5"}


def test_train_takes_a_collections_training_split(tmp_path, capsys, setup_dirs, one_thread):
    from helpers import tiny_overrides

    root, _ = setup_dirs
    for pool, name in (("train", "synthetic"), ("dev", "tiny")):
        rqa(capsys, "data", "export", "--dataset", "reqa_squad", "--pool", pool, "--data-dir",
            root / "data", "--output", tmp_path / name, "--quiet")
    report = rqa(capsys, "train", "--quiet", *tiny_overrides(
        setup_dirs, tmp_path / "run", f"data.train_dataset=collection:{tmp_path / 'synthetic'}",
        "data.train_pool=train", f"data.test_dataset=collection:{tmp_path / 'tiny'}",
        "data.test_pool=dev", "trainer.max_epochs=1"))
    assert report["test"]["dataset"] == f"collection:{tmp_path / 'tiny'}"
    assert report["test"]["questions"] == 4 and report["test"]["question_unit"] == "question_id"
    train = report["data"]["train"]  # the training split's judgements, less the validation side
    assert (train["dataset"], train["pool"]) == ("collection:synthetic", "train")
    judged = len((tmp_path / "synthetic" / "qrels" / "train.tsv").read_text().splitlines()) - 1
    assert train["pool_pairs"] == judged and 0 < train["split_pairs"] < judged
    assert report["data"]["val"]["question_unit"] == "question_id"


def test_trec_files_out_and_back_in(tiny, tmp_path, capsys):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    data, _ = tiny
    base = ["--dataset", "reqa_squad", "--pool", "dev", "--data-dir", data, "--quiet"]
    out = rqa(capsys, "evaluate", "--model", "bm25", *base, "--trec-run", tmp_path / "a.trec",
              "--trec-qrels", tmp_path / "dev.qrels")
    assert out["run_file"] is None and out["per_question"] is None  # none kept, none asked
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["a.trec", "dev.qrels"]
    rqa(capsys, "evaluate", "--model", "bm25", *base, "k1=0.5", "b=0.2", "--trec-run",
        tmp_path / "b.trec", "--run-file", tmp_path / "b.jsonl")
    assert (tmp_path / "b.jsonl").is_file()
    metrics = rqa(capsys, "metrics", "--run-file", tmp_path / "a.trec", "--trec-qrels",
                  tmp_path / "dev.qrels")
    assert metrics["kind"] == "TREC run" and metrics["depth"] == 5  # the pool's 5 candidates
    run, qrels = {}, {}
    for line in (tmp_path / "a.trec").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    for line in (tmp_path / "dev.qrels").read_text().splitlines():
        q, _, d, rel = line.split()
        qrels.setdefault(q, {})[d] = int(rel)
    found = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "success"}).evaluate(run)
    assert metrics["metrics"]["mrr@5"] == round(100 * np.mean(
        [v["recip_rank"] for v in found.values()]), 4)
    assert metrics["metrics"]["r@1"] == round(100 * np.mean(
        [v["success_1"] for v in found.values()]), 4)
    compared = rqa(capsys, "compare", tmp_path / "a.trec", tmp_path / "b.trec", "--trec-qrels",
                   tmp_path / "dev.qrels", "--samples", "50", "--permutations", "50")
    assert compared["trec_depth"] == 5 and "trec_eval" in compared["protocol"]
    assert compared["comparisons"][0]["metrics"]["mrr"]["a"] == pytest.approx(
        metrics["metrics"]["mrr@5"], abs=1e-4)


@pytest.mark.parametrize("argv,words", [
    (["data", "stats", "--dataset", "my_data"], ["--dataset", "invalid choice", "'my_data'",
                                                 "collection:PATH"]),
    (["data", "stats", "--dataset", "collection:{tmp}/none"], ["collection", "none",
                                                               "does not exist", "fix:"]),
    (["data", "stats", "--dataset", "collection:{col}", "--pool", "test"],
     ["no qrels/test.tsv", "its splits: dev"]),
    (["data", "export", "--dataset", "collection:{col}", "--output", "{col}"],
     ["--output", "--overwrite"]),
    (["metrics", "--run-file", "{tmp}/r.trec"], ["is a TREC run", "--trec-qrels"]),
    (["metrics", "--run-file", "{tmp}/r.jsonl", "--trec-qrels", "{tmp}/r.trec"],
     ["no TREC run", "drop --trec-qrels"]),
    (["compare", "{tmp}/r.trec", "{tmp}/r.jsonl", "--trec-qrels", "{tmp}/q.qrels"],
     ["r.jsonl and TREC runs do not compare"]),
    (["compare", "{tmp}/r.trec", "{tmp}/r.trec"], ["is a TREC run", "--trec-qrels"]),
    (["compare", "A={tmp}/r.jsonl", "B={tmp}/r.jsonl", "--trec-qrels", "{tmp}/q.qrels"],
     ["no input is a TREC run", "drop it"]),
    (["compare", "{tmp}/r.trec", "{tmp}/r.trec", "--trec-qrels", "{tmp}/none"],
     ["--trec-qrels", "does not exist"]),
    (["evaluate", "--model", "bm25", "--run-file", "{tmp}/x.jsonl", "--trec-run",
      "{tmp}/x.jsonl"], ["the same file twice"]),
    (["evaluate", "--model", "static:glove50", "--dataset", "squad_paragraphs", "--trec-run",
      "{tmp}/x.trec"], ["--trec-run", "writes no run file"]),
])
def test_bad_input_is_one_line_exit_2(argv, words, tiny, tmp_path, capsys):
    _, folder = tiny
    (tmp_path / "r.trec").write_text("0 Q0 p0s0 1 2.5 t\n")
    (tmp_path / "q.qrels").write_text("0 0 p0s0 1\n")
    (tmp_path / "r.jsonl").write_text('{"gold_rank": 1}\n')
    argv = [a.format(tmp=tmp_path, col=folder) for a in argv]
    code, out, err = _run(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and out is None and len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])
