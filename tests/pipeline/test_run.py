"""Pipelines end to end on a tiny pool with BM25 retrievers: from run files equals in memory."""

import dataclasses
import json

import pytest
from helpers import eval_conf

from retrieval_qa.errors import DataFormatError, SettingsMismatchError
from retrieval_qa.evaluation.per_question import beside_run_file, read_per_question
from retrieval_qa.pipeline.composition import parse_pipeline
from retrieval_qa.pipeline.run import run_pipeline
from retrieval_qa.pipeline.stages import StageRun
from tests.pipeline.pools import tiny_pool


def _cfg(method: str, top_k: int, **fusion):
    return parse_pipeline({"name": method, "top_k": top_k,
                           "retrievers": {"bm25": {"kind": "bm25"},
                                          "ctx": {"kind": "bm25",
                                                  "settings": {"with_context": True}}},
                           "fusion": {"method": method, **fusion}}, "test.yaml")


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


EVAL = eval_conf()


@pytest.mark.parametrize("method,fusion", [("rrf", {"rrf_k": 5}),
                                           ("convex", {"weights": {"bm25": 0.4, "ctx": 0.6}}),
                                           ("convex", {"weights": {"bm25": 0.5, "ctx": 0.5},
                                                       "normalization": "zscore"})])
def test_from_run_files_equals_in_memory(tmp_path, method, fusion):
    pool = tiny_pool()
    cfg = _cfg(method, 3, **fusion)
    first = run_pipeline(cfg, pool, tmp_path / "a", evaluation=EVAL)
    again = run_pipeline(cfg, pool, tmp_path / "b", from_run_files=tmp_path / "a",
                         evaluation=EVAL)
    # exact: run files keep each score's float, and the fusion is the same code on them
    assert first["metrics"] == again["metrics"]
    fused = "tiny-dev/fused.run.jsonl"
    assert _lines(tmp_path / "a" / fused) == _lines(tmp_path / "b" / fused)
    stage = _lines(tmp_path / "a" / "tiny-dev/bm25.run.jsonl")
    assert len(stage) == len(pool.questions) and all(len(r["top_ids"]) == 3 for r in stage)


def test_run_files_of_other_settings_are_refused_and_older_ones_named(tmp_path, capsys):
    """A run file is read back only under the stage settings it records (beside it); one of
    an earlier version, recording none, is read with a note that it cannot be checked."""
    pool = tiny_pool()
    run_pipeline(_cfg("rrf", 3, rrf_k=5), pool, tmp_path / "a", evaluation=EVAL)
    recorded = json.loads((tmp_path / "a" / "tiny-dev/ctx.run.settings.json").read_text())
    assert recorded["top_k"] == 3 and recorded["bm25"]["with_context"] is True
    with pytest.raises(SettingsMismatchError, match=r"bm25.run.jsonl.*top_k: 3 -> 2") as e:
        run_pipeline(_cfg("rrf", 2, rrf_k=5), pool, tmp_path / "b",
                     from_run_files=tmp_path / "a", evaluation=EVAL)
    assert "without --from-run-files" in str(e.value)
    other = parse_pipeline({"name": "x", "top_k": 3, "fusion": {"method": "rrf", "rrf_k": 5},
                            "retrievers": {"bm25": {"kind": "bm25"},
                                           "ctx": {"kind": "bm25", "settings": {"k1": 2.0}}}},
                           "other.yaml")
    with pytest.raises(SettingsMismatchError, match="bm25.k1: 1.2 -> 2.0"):
        run_pipeline(other, pool, tmp_path / "b", from_run_files=tmp_path / "a", evaluation=EVAL)
    (tmp_path / "a" / "tiny-dev/ctx.run.settings.json").unlink()  # an earlier version's files
    run_pipeline(_cfg("rrf", 3, rrf_k=5), pool, tmp_path / "b", from_run_files=tmp_path / "a",
                 evaluation=EVAL)
    assert "ctx.run.jsonl are not checked" in capsys.readouterr().err


def test_every_run_file_has_its_per_question_records_beside_it(tmp_path):
    pool = tiny_pool()
    pool = dataclasses.replace(pool, gold=pool.gold[1:] + pool.gold[:1])  # wrong golds: ranks vary
    out = run_pipeline(_cfg("rrf", 2, rrf_k=5), pool, tmp_path, evaluation=EVAL)
    assert len(out["stages"]) == 3  # bm25, ctx, fused
    for stage in out["stages"]:
        records = read_per_question(beside_run_file(stage["run_file"]))
        assert records.header["metrics"]["mrr"] == pytest.approx(stage["metrics"]["mrr"])
        assert list(records.ranks) == [r["gold_rank"] for r in _lines(stage["run_file"])]
    assert len({r for s in out["stages"]
                for r in read_per_question(beside_run_file(s["run_file"])).ranks}) > 2


def test_one_retriever_over_the_whole_pool_keeps_the_full_ranking(tmp_path):
    pool = tiny_pool()
    cfg = parse_pipeline({"top_k": len(pool.candidates),
                          "retrievers": {"bm25": {"kind": "bm25"}}}, "one.yaml")
    full, listed = run_pipeline(cfg, pool, tmp_path, evaluation=EVAL)["stages"]
    assert full["metrics"] == listed["metrics"]  # exact: the same BM25 scores, ranked


def test_a_run_file_of_another_pool_is_an_error_naming_the_record(tmp_path):
    pool = tiny_pool()
    run_pipeline(_cfg("rrf", 2, rrf_k=60), pool, tmp_path, evaluation=EVAL)
    path = tmp_path / "tiny-dev/bm25.run.jsonl"
    records = _lines(path)
    records[1]["question"] = "another question?"  # pool question 2 is missing now
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(DataFormatError, match="no record of question 'Where is the Eiffel"):
        StageRun.from_file("bm25", pool, path, EVAL["ks"])


def test_run_files_of_the_pool_serve_a_subset_of_its_questions(tmp_path):
    from retrieval_qa.pipeline.tuning import question_subset

    pool = tiny_pool()
    cfg = _cfg("rrf", 3, rrf_k=2)
    run_pipeline(cfg, pool, tmp_path / "all", evaluation=EVAL)
    subset = question_subset(pool, 3, seed=0)
    assert len(subset.questions) == 3 and subset.candidates == pool.candidates
    direct = run_pipeline(cfg, subset, tmp_path / "direct", evaluation=EVAL)
    from_files = run_pipeline(cfg, subset, tmp_path / "files", from_run_files=tmp_path / "all",
                              evaluation=EVAL)
    # exact: a question's BM25 scores do not depend on the other questions
    assert [s["metrics"] for s in direct["stages"]] == \
        [s["metrics"] for s in from_files["stages"]]


def test_reranker_examples_follow_the_negative_rules():
    from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
    from retrieval_qa.classifiers.reranker_data import bm25_top, rerank_examples
    from retrieval_qa.config import load_yaml

    pool = tiny_pool()
    scorer = BM25Scorer(pool, BM25Settings.from_config(load_yaml("model/bm25.yaml")))
    top = bm25_top(pool, scorer, 4)
    examples, counts = rerank_examples(pool, top, hard=2, same_paragraph=1, seed=0,
                                       hard_source="bm25")
    gold_texts = {q: {pool.candidates[c].text for c in g}
                  for q, g in zip(pool.questions, pool.gold, strict=True)}
    for q in pool.questions:
        mine = [e for e in examples if e.question == q]
        negatives = [e.sentence for e in mine if e.label == 0]
        assert sum(e.label for e in mine) == 1
        assert not set(negatives) & gold_texts[q]  # gold copies never negatives
        assert len(negatives) == len(set(negatives))
    # "Paris is the capital of France." is gold twice (a copy in paragraph 3): never negative
    assert counts["gold"] == 5 and counts["bm25"] + counts["shortfall_bm25"] == 10


def test_paragraph_vectors_mix_each_candidate_with_its_paragraph_mean():
    import torch

    from retrieval_qa.pipeline.retrievers import paragraph_vectors

    c = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    doc_of = torch.tensor([0, 0, 1])
    assert torch.equal(paragraph_vectors(c, doc_of, 0.0), c)
    assert torch.equal(paragraph_vectors(c, doc_of, 1.0),
                       torch.tensor([[0.5, 0.5], [0.5, 0.5], [1.0, 1.0]]))
    q = torch.tensor([[2.0, 1.0]])
    mixed = q @ paragraph_vectors(c, doc_of, 0.25).T  # (1 - w) q.c + w q.p
    torch.testing.assert_close(mixed, 0.75 * (q @ c.T) + 0.25 * torch.tensor([[1.5, 1.5, 3.0]]))


def test_two_stages_over_one_model_encode_the_pool_once(tmp_path, monkeypatch):
    import os

    import torch

    from retrieval_qa.data.pool_index import doc_index
    from retrieval_qa.models import artifact
    from retrieval_qa.pipeline import retrievers
    from retrieval_qa.pipeline.retrievers import DenseRetriever
    from tests.helpers import save_dual_encoder, towers_conf, word_tokenizer

    pool = tiny_pool()
    words = sorted({w.strip("?.").lower() for t in pool.questions + [c.text for c in
                                                                     pool.candidates]
                    for w in t.split()})
    cfg = towers_conf(encoder={"type": "gru", "vocab_size": len(words) + 5, "embedding_dim": 8,
                               "hidden_size": 8, "dropout": 0.0},
                      pooler={"type": "mean"}, projection={"dim": None}, sharing="sde")
    folder = save_dual_encoder(tmp_path / "m", word_tokenizer(words), cfg, "cosine")
    loads = []
    real = artifact.load_artifact
    monkeypatch.setattr(artifact, "load_artifact", lambda f: loads.append(f) or real(f))
    def stage(name, weight=0.0):
        return DenseRetriever(name=name, checkpoint=str(folder), batch_size=128,
                              paragraph_weight=weight)

    sentence = stage("s").scorer(pool)
    paragraph = stage("p", 1.0).scorer(pool)
    assert len(loads) == 1
    rows = range(len(pool.questions))
    expected = sentence.questions @ retrievers.paragraph_vectors(
        sentence.candidates, doc_index(pool)[0], 1.0).T
    torch.testing.assert_close(paragraph.score(rows), expected)
    save_dual_encoder(folder, word_tokenizer(words), cfg, "cosine")  # exported again, later
    later = (folder / "towers.pt").stat().st_mtime_ns + 10**9  # (whatever the clock's tick)
    os.utime(folder / "towers.pt", ns=(later, later))
    stage("s").scorer(pool)
    assert len(loads) == 2  # a new export is encoded again, never served from the memo


@pytest.mark.parametrize("how", ["last_line_lost", "cut_mid_line", "empty"])
def test_a_damaged_stage_run_file_is_refused_naming_it(tmp_path, how):
    from retrieval_qa.errors import InputFileError

    pool = tiny_pool()
    cfg = _cfg("rrf", 3, rrf_k=5)
    run_pipeline(cfg, pool, tmp_path / "a", evaluation=EVAL)
    path = tmp_path / "a" / "tiny-dev" / "bm25.run.jsonl"
    text = path.read_text()
    path.write_text({"last_line_lost": "".join(text.splitlines(keepends=True)[:-1]),
                     "cut_mid_line": text[:-20], "empty": ""}[how])
    with pytest.raises((InputFileError, DataFormatError)) as e:
        run_pipeline(cfg, pool, tmp_path / "b", from_run_files=tmp_path / "a", evaluation=EVAL)
    assert str(path) in str(e.value) and "write it again" in str(e.value)
    assert not (tmp_path / "b" / "tiny-dev" / "fused.run.jsonl").exists()
