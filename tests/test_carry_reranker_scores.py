"""experiments/carry_reranker_scores.py: an earlier run's format-1 reranker scores carried into a
new pipeline folder as format 2, checked against their heads, then read back pair by pair."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import carry_reranker_scores as C
from retrieval_qa.errors import DataFormatError, InputFileError
from retrieval_qa.pipeline import reranking
from retrieval_qa.pipeline.fused_ranks import ordered
from retrieval_qa.pipeline.reranker_scores import RerankerScores
from retrieval_qa.pipeline.reranking import head_scores
from tests.pipeline.pools import tiny_pool
from tests.pipeline.test_reranker_scores import DIGEST, Scorer, _fused, _pairs, _same


def _earlier_run(folder, pool, fused):
    """What a pipeline run before format 2 left: format-1 shards of depth 2, the fused run."""
    head_scores(pool, fused, Scorer(), 2, cache=RerankerScores(folder, DIGEST))
    for path in RerankerScores(folder, DIGEST).folder.iterdir():
        shard = json.loads(path.read_text())
        del shard["questions"], shard["candidates"]
        path.write_text(json.dumps({**shard, "format": 1}), encoding="utf-8")
    with open(folder / "fused.run.jsonl", "w", encoding="utf-8") as f:
        for q, (ids, scores) in enumerate(fused):
            top = np.asarray(ids)[ordered(np.asarray(ids), np.asarray(scores))]
            f.write(json.dumps({"question": pool.questions[q],
                                "top_ids": [pool.candidates[c].id for c in top]}) + "\n")


def test_carried_shards_are_read_back_pair_by_pair_and_mismatches_left_behind(tmp_path,
                                                                              monkeypatch):
    pool = tiny_pool()
    monkeypatch.setattr(reranking, "SHARD_QUESTIONS", 2)
    fused = _fused(pool)
    _earlier_run(tmp_path / "a", pool, fused)
    shards = sorted(RerankerScores(tmp_path / "a", DIGEST).folder.iterdir())
    damaged = json.loads(shards[-1].read_text())
    shards[-1].write_text(json.dumps({**damaged, "heads": "0" * 64}), encoding="utf-8")
    counts = C.carry(tmp_path / "a", tmp_path / "b", pool)
    assert counts == {DIGEST[:16]: {"carried": len(shards) - 1, "left_behind": 1,
                                    "already_there": 0}}
    other = _fused(pool, {"bm25": 0.9, "ctx": 0.1})
    cache, scorer = RerankerScores(tmp_path / "b", DIGEST), Scorer()
    _same(head_scores(pool, other, scorer, 3, cache=cache), head_scores(pool, other, Scorer(), 3))
    last = set(range(2 * (len(shards) - 1), len(pool.questions)))
    held = {(q, c) for q, c in _pairs(fused, 2) if q not in last}
    assert cache.pairs_reused == len(_pairs(other, 3) & held) > 0
    assert scorer.pairs == len(_pairs(other, 3) - held)
    assert C.carry(tmp_path / "a", tmp_path / "b", pool)[DIGEST[:16]]["already_there"] > 0


def test_a_run_of_other_questions_is_refused(tmp_path):
    pool = tiny_pool()
    _earlier_run(tmp_path / "a", pool, _fused(pool))
    lines = (tmp_path / "a/fused.run.jsonl").read_text().splitlines()
    (tmp_path / "a/fused.run.jsonl").write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(InputFileError, match="does not rank the questions"):
        C.carry(tmp_path / "a", tmp_path / "b", pool)


def test_a_damaged_fused_run_names_its_line(tmp_path):
    pool = tiny_pool()
    _earlier_run(tmp_path / "a", pool, _fused(pool))
    with open(tmp_path / "a/fused.run.jsonl", "a", encoding="utf-8") as f:
        f.write("{not json\n")
    with pytest.raises(DataFormatError, match="line"):
        C.carry(tmp_path / "a", tmp_path / "b", pool)
