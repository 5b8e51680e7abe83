"""The reranker's head scores kept in shards: read back, resumed after a crash, rebuilt when
damaged, never read for other heads."""

import json
import logging

import numpy as np
import pytest

from retrieval_qa.pipeline import reranking
from retrieval_qa.pipeline.fused_ranks import ordered
from retrieval_qa.pipeline.reranker_scores import RerankerScores
from retrieval_qa.pipeline.reranking import head_scores
from retrieval_qa.pipeline.run import fuse
from retrieval_qa.pipeline.stages import run_retriever
from tests.pipeline.pools import tiny_pool
from tests.pipeline.test_run import _cfg

DIGEST = "ab" * 32


def _fused(pool, weights=None):
    weights = weights or {"bm25": 0.5, "ctx": 0.5}
    cfg = _cfg("convex", 4, weights=weights)
    runs = [run_retriever(spec, pool, 4, ks=(1,), doc_level=False, memory_mb=1)
            for spec in cfg.retrievers]
    return fuse(cfg, runs, weights)


class Scorer:
    """Scores a pair by its sentence's length; counts the calls and pairs; ``fail_at``: the
    call that raises (a crash)."""

    def __init__(self, fail_at=None):
        self.calls, self.pairs, self.fail_at = 0, 0, fail_at

    def __call__(self, questions, sentences):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt("crash")
        self.pairs += len(sentences)
        return [len(s) / 10 - len(q) / 100 for q, s in zip(questions, sentences, strict=True)]


def _same(a, b):
    for (head_a, values_a), (head_b, values_b) in zip(a, b, strict=True):
        assert head_a.tolist() == head_b.tolist()
        assert values_a.tolist() == values_b.tolist()


def test_one_call_per_shard_and_the_scores_of_a_call_per_question(monkeypatch):
    pool = tiny_pool()
    fused = _fused(pool)
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    scorer = Scorer()
    heads = head_scores(pool, fused, scorer, 3)
    assert scorer.calls == -(-len(pool.questions) // 2)
    assert scorer.pairs == sum(len(h) for h, _ in heads)
    for q, (head, values) in enumerate(heads):  # each score is its own pair's
        ids = np.asarray(fused[q][0])[head]
        assert values.tolist() == Scorer()([pool.questions[q]] * len(ids),
                                           [pool.candidates[c].text for c in ids])


def test_a_crash_loses_one_shard_and_a_rerun_reads_back_what_was_scored(tmp_path,
                                                                         monkeypatch):
    pool = tiny_pool()
    fused = _fused(pool)
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    plain = head_scores(pool, fused, Scorer(), 3)
    with pytest.raises(KeyboardInterrupt):
        head_scores(pool, fused, Scorer(fail_at=3), 3, cache=RerankerScores(tmp_path, DIGEST))
    cache = RerankerScores(tmp_path, DIGEST)
    assert sorted(p.name for p in cache.folder.iterdir()) == ["0000000.json", "0000002.json"]
    again = Scorer()
    resumed = head_scores(pool, fused, again, 3, cache=cache)
    _same(resumed, plain)
    assert cache.reused == 4 and again.pairs == sum(len(h) for h, _ in plain[4:])
    assert cache.seconds > 0
    nothing = Scorer()
    _same(head_scores(pool, fused, nothing, 3, cache=RerankerScores(tmp_path, DIGEST)), plain)
    assert nothing.calls == 0


def test_other_heads_another_reranker_and_damage_are_scored_again(tmp_path, monkeypatch,
                                                                  caplog):
    pool = tiny_pool()
    fused = _fused(pool)
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    head_scores(pool, fused, Scorer(), 3, cache=RerankerScores(tmp_path, DIGEST))
    deeper = Scorer()  # depth 4: other heads
    head_scores(pool, fused, deeper, 4, cache=RerankerScores(tmp_path, DIGEST))
    assert deeper.calls == -(-len(pool.questions) // 2)
    other = Scorer()  # another export: its own folder
    head_scores(pool, fused, other, 4, cache=RerankerScores(tmp_path, "cd" * 32))
    assert other.calls == deeper.calls
    cache = RerankerScores(tmp_path, DIGEST)
    cache.path(2).write_text('{"format": 1, "reranker": "', encoding="utf-8")  # cut short
    scores = json.loads(cache.path(0).read_text())
    scores["scores"][0][0] = None
    cache.path(0).write_text(json.dumps(scores), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        rebuilt = Scorer()
        _same(head_scores(pool, fused, rebuilt, 4, cache=cache),
              head_scores(pool, fused, Scorer(), 4))
    assert rebuilt.calls == 2 and cache.reused == len(pool.questions) - 4
    assert "0000002.json (not JSON" in caplog.text and "0000000.json (the scores of " \
        "question 0 are not" in caplog.text


def test_a_pipeline_keeps_its_rerankers_scores_and_a_rerun_reads_them_back(tmp_path):
    import torch
    from helpers import eval_conf

    from retrieval_qa.classifiers.reranker import CrossEncoderReranker
    from retrieval_qa.pipeline.composition import parse_pipeline
    from retrieval_qa.pipeline.run import run_pipeline
    from tests.helpers import WORDS, save_tiny_bert_model, word_tokenizer

    save_tiny_bert_model(tmp_path / "bert", word_tokenizer(WORDS), hidden=16)
    torch.manual_seed(0)
    export = CrossEncoderReranker(**CrossEncoderReranker.settings(
        {"pretrained": str(tmp_path / "bert"), "fallback": None, "max_length": 24})
    ).eval().export(tmp_path / "export")
    cfg = parse_pipeline({"name": "rr", "top_k": 4,
                          "retrievers": {"bm25": {"kind": "bm25"}}, "fusion": {"method": "none"},
                          "reranker": {"checkpoint": str(export), "top_k": 3, "weight": 0.5}},
                         "test.yaml")
    pool = tiny_pool()
    first = run_pipeline(cfg, pool, tmp_path / "a", evaluation=eval_conf())
    kept = first["stages"][-1]["rerank_scores"]
    assert kept["questions_read_back"] == 0 and kept["scoring_seconds"] > 0
    again = run_pipeline(cfg, pool, tmp_path / "a", from_run_files=tmp_path / "a",
                         evaluation=eval_conf())
    assert again["stages"][-1]["rerank_scores"] == {**kept,
                                                   "questions_read_back": len(pool.questions)}
    assert again["metrics"] == first["metrics"]


def test_a_scorer_that_reads_paragraphs_is_given_them():
    pool = tiny_pool()
    fused = _fused(pool)
    seen = []

    def scorer(questions, texts):
        seen.extend(texts)
        return [0.0] * len(texts)

    scorer.text_of = lambda c: f"{c.text} | {c.context}"
    heads = head_scores(pool, fused, scorer, 2)
    expected = [f"{pool.candidates[c].text} | {pool.candidates[c].context}"
                for q, (head, _) in enumerate(heads) for c in np.asarray(fused[q][0])[head]]
    assert seen == expected and seen


def _pairs(fused, top_k):
    """The (question, candidate) pairs of the heads of depth ``top_k``."""
    return {(q, int(c)) for q, (ids, scores) in enumerate(fused)
            for c in np.asarray(ids)[ordered(np.asarray(ids), np.asarray(scores))[:top_k]]}


@pytest.mark.parametrize("change", ["deeper", "another fusion"])
def test_other_heads_of_the_same_questions_score_only_the_pairs_no_shard_holds(
        change, tmp_path, monkeypatch):
    """Another depth, or another fusion (another first stage) of the same questions: the pairs
    scored before are read back, only the new ones go to the reranker, and the scores are
    those of scoring every pair afresh."""
    pool = tiny_pool()
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    fused = _fused(pool)
    head_scores(pool, fused, Scorer(), 2, cache=RerankerScores(tmp_path, DIGEST))
    other = _fused(pool, {"bm25": 0.9, "ctx": 0.1}) if change == "another fusion" else fused
    before, wanted = _pairs(fused, 2), _pairs(other, 3)
    cache, scorer = RerankerScores(tmp_path, DIGEST), Scorer()
    _same(head_scores(pool, other, scorer, 3, cache=cache),
          head_scores(pool, other, Scorer(), 3))
    assert 0 < scorer.pairs == len(wanted - before) < len(wanted)
    assert cache.pairs_reused == len(wanted & before) > 0 and cache.reused == 0


def test_a_shard_whose_candidates_are_damaged_is_rebuilt(tmp_path, monkeypatch, caplog):
    pool = tiny_pool()
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    fused = _fused(pool)
    head_scores(pool, fused, Scorer(), 2, cache=RerankerScores(tmp_path, DIGEST))
    cache = RerankerScores(tmp_path, DIGEST)
    shard = json.loads(cache.path(0).read_text())
    shard["candidates"][0][0] = "p0s1"
    cache.path(0).write_text(json.dumps(shard), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        deeper = Scorer()
        _same(head_scores(pool, fused, deeper, 3, cache=cache),
              head_scores(pool, fused, Scorer(), 3))
    assert "0000000.json (no list of candidate indices per question" in caplog.text
    assert deeper.pairs == len(_pairs(fused, 3)) - cache.pairs_reused


def test_a_shard_of_format_1_is_read_back_whole_or_scored_again(tmp_path, monkeypatch):
    """Shards written before candidates were kept: the same heads are read back; other heads
    are scored whole (the shard cannot say which pairs it holds)."""
    pool = tiny_pool()
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    fused = _fused(pool)
    head_scores(pool, fused, Scorer(), 2, cache=RerankerScores(tmp_path, DIGEST))
    for path in RerankerScores(tmp_path, DIGEST).folder.iterdir():
        shard = json.loads(path.read_text())
        del shard["questions"], shard["candidates"]
        path.write_text(json.dumps({**shard, "format": 1}), encoding="utf-8")
    same = Scorer()
    head_scores(pool, fused, same, 2, cache=RerankerScores(tmp_path, DIGEST))
    assert same.calls == 0
    deeper, cache = Scorer(), RerankerScores(tmp_path, DIGEST)
    head_scores(pool, fused, deeper, 3, cache=cache)
    assert deeper.pairs == len(_pairs(fused, 3)) and cache.pairs_reused == 0
