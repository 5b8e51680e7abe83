"""The reranker's hard negatives from the pipeline's first stage (retrieval_qa/distill/negatives.py)."""

from __future__ import annotations

import numpy as np
from helpers import eval_conf


def _cfg(world, tmp_path, **over):
    from retrieval_qa.config import load_yaml, plain

    cfg = plain(load_yaml("pipeline/training/reranker.yaml"))
    cfg.update(questions=8, loss="listwise", max_minutes=None, epochs=1,
               output=str(tmp_path / "reranker"),
               model={**cfg["model"], "pretrained": str(world["bert"]), "fallback": None,
                      "max_length": 32, "training": {"batch_size": 8, "accelerator": "cpu"}},
               **over)
    return cfg


def test_the_lists_are_the_fused_first_stage_head_best_first(world, tmp_path):
    from retrieval_qa.classifiers.reranker_data import training_side
    from retrieval_qa.data import load_pool
    from retrieval_qa.distill.lists import first_stage
    from retrieval_qa.distill.negatives import FirstStageNegatives
    from retrieval_qa.pipeline.composition import load_pipeline

    full, _ = load_pool("reqa_squad", "train", world["data"])
    side, _ = training_side(full, 0.1, 0)
    source = FirstStageNegatives(pipeline=str(world["pipeline"]), top_k=3,
                                 folder=str(tmp_path / "fs"), evaluation=eval_conf())
    top = source(side, data_dir=world["data"], progress=False)
    fused, info = first_stage(load_pipeline(str(world["pipeline"])), side, tmp_path / "fs",
                              data_dir=world["data"], evaluation=eval_conf(), progress=False)
    assert len(top) == len(side.questions)
    assert source.info["fusion"]["weights"] == info["fusion"]["weights"]  # tuned as the pipeline
    assert info["fusion"]["method"] == "convex" and "weights" in info["fusion"]
    for (ids, scores), head in zip(fused, top, strict=True):
        by_id = dict(zip(np.asarray(ids).tolist(), np.asarray(scores).tolist(), strict=True))
        got = [by_id[c] for c in head.tolist()]  # the same values read back: no arithmetic
        assert len(head) == min(3, len(ids)) and len(set(head.tolist())) == len(head)
        assert got == sorted(by_id.values(), reverse=True)[:len(head)]  # the best, best first


def test_a_reranker_trains_on_first_stage_negatives_named_by_its_block(world, tmp_path):
    from retrieval_qa.classifiers.train_reranker import train_reranker

    block = {"_target_": "retrieval_qa.distill.negatives.FirstStageNegatives",
             "pipeline": str(world["pipeline"]), "top_k": 4, "folder": str(tmp_path / "fs")}
    out = train_reranker(_cfg(world, tmp_path, first_stage=block), world["data"],
                         progress=False)
    counts = out["example_counts"]
    assert counts["first_stage"] > 0 and "bm25" not in counts
    assert counts["first_stage"] + counts["shortfall_first_stage"] == 8 * 2  # 2 a question
    assert out["first_stage"]["pipeline"] == "tiny_hybrid" and out["steps_done"] > 0
    bm25 = train_reranker(_cfg(world, tmp_path / "b"), world["data"], progress=False)
    assert bm25["first_stage"] is None and bm25["example_counts"]["bm25"] > 0
