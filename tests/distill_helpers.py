"""A tiny distillation world for tests: a reranker trained by the suite's own command on the
synthetic training file (so its training.json records its question draw), a tiny dense
retriever and a pipeline config whose first stage fuses BM25, BM25 with context and that
retriever (weights tuned on the validation side) and whose reranker is the teacher."""

from __future__ import annotations

from pathlib import Path

from helpers import save_dual_encoder, save_tiny_bert_model, towers_conf

#: the reranker's training questions in the tiny world (of the synthetic training side's ~40)
TEACHER_QUESTIONS = 10


def make_teacher_world(root: Path, data_dir: Path, tokenizer) -> dict:
    """``root``/bert (a tiny BERT), ``root``/reranker (the teacher), ``root``/dense (a
    tiny dual encoder export) and ``root``/pipeline.yaml over them; returns their paths."""
    import json

    from retrieval_qa.classifiers.train_reranker import train_reranker
    from retrieval_qa.config import load_yaml, plain

    bert = root / "bert"
    save_tiny_bert_model(bert, tokenizer, hidden=16)
    cfg = plain(load_yaml("pipeline/training/reranker.yaml"))
    cfg.update(questions=TEACHER_QUESTIONS, loss="listwise", max_minutes=None,
               output=str(root / "reranker"),
               model={**cfg["model"], "pretrained": str(bert), "fallback": None,
                      "max_length": 32, "training": {"batch_size": 8, "accelerator": "cpu"}})
    out = train_reranker(cfg, data_dir, progress=False)
    (root / "reranker" / "training.json").write_text(json.dumps(out, default=str))
    words = towers_conf(encoder={"type": "gru", "vocab_size": len(tokenizer.vocab),
                                 "embedding_dim": 8, "hidden_size": 8, "dropout": 0.0},
                        pooler={"type": "mean"}, projection={"dim": None}, sharing="sde")
    dense = save_dual_encoder(root / "dense", tokenizer, words, "cosine", lengths=(16, 24))
    pipeline = root / "pipeline.yaml"
    pipeline.write_text(
        "name: tiny_hybrid\ntop_k: 20\n"
        "retrievers:\n  bm25: {kind: bm25}\n"
        "  ctx: {kind: bm25, settings: {with_context: true}}\n"
        f"  dense: {{kind: dual_encoder, checkpoint: '{dense}', batch_size: 16}}\n"
        "fusion: {method: convex, normalization: minmax, weights: tune}\n"
        "tuning: {dataset: reqa_squad, pool: train, max_questions: null, grid_step: 0.5}\n"
        f"reranker: {{checkpoint: '{root / 'reranker'}', top_k: 5, weight: tune}}\n")
    return {"bert": bert, "reranker": root / "reranker", "dense": dense, "pipeline": pipeline}


def teacher_overrides(world: dict, output: Path, **settings) -> list[str]:
    """``data.teacher.*`` overrides of the tiny world (small lists and shards)."""
    values = {"pipeline": world["pipeline"], "questions": 20, "list_size": 4,
              "shard_questions": 6, "batch_size": 8, "device": "cpu", "output": output,
              **settings}
    return [f"data.teacher.{k}={v}" for k, v in values.items()]
