"""`rqa train experiment=fcrr|convrr|fcrr_convrr`: base embeddings of the SQuAD paragraph
task (cached), a residual refiner trained on the train file, tested on the dev file; one
JSON report with the test ``r@1`` and ``ap``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, OmegaConf

from ..data.paragraphs import load_paragraph_task
from ..data.vector_datamodule import ParagraphVectorDataModule, VectorSplit
from ..embeddings.base import task_embeddings
from ..models.residual import ResidualRefinementModule


def vector_split(cfg: DictConfig, pool: str) -> tuple[VectorSplit, dict]:
    task = load_paragraph_task(pool, cfg.data_dir)
    q, p, meta = task_embeddings(task, cfg.embedding, cfg.idf, cfg.idf_corpus)
    return VectorSplit(q, p, torch.tensor(task.gold)), {
        "pool": pool, "questions": len(task.questions), "paragraphs": len(task.paragraphs),
        "cache": meta["cache"], "sources": meta["source_files"]}


def build_data(cfg: DictConfig) -> ParagraphVectorDataModule:
    d = cfg.data
    train, train_notes = vector_split(d, d.train_pool)
    test, test_notes = vector_split(d, d.test_pool)
    return ParagraphVectorDataModule(
        train, test, d.val_questions, d.batch_size, d.eval_batch_size, d.max_train_pairs,
        d.split_seed, notes={"embedding": d.embedding, "idf": d.idf,
                             "idf_corpus": d.idf_corpus if d.idf else None,
                             "train_source": train_notes, "test_source": test_notes})


def build_residual_module(cfg: DictConfig, dim: int) -> ResidualRefinementModule:
    m = OmegaConf.to_container(cfg.model, resolve=True)
    m.pop("name")
    return ResidualRefinementModule(dim=dim, **m)


def train_residual(cfg: DictConfig) -> dict:
    from .run import _number, _resume_path, build_trainer

    start = time.perf_counter()
    pl.seed_everything(cfg.seed, workers=True)
    run_dir = Path(cfg.output_dir) / cfg.experiment / f"{cfg.profile}-seed{cfg.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    data = build_data(cfg)
    embed_seconds = time.perf_counter() - start
    module = build_residual_module(cfg, data.train_split.questions.shape[1])
    trainer = build_trainer(cfg, run_dir)
    resume = _resume_path(cfg, run_dir)
    trainer.fit(module, datamodule=data, ckpt_path=resume)
    best = trainer.checkpoint_callback.best_model_path or None
    if best:
        module.load_state_dict(torch.load(best, map_location="cpu",
                                          weights_only=False)["state_dict"])
    report = {
        "experiment": cfg.experiment, "profile": cfg.profile, "description": cfg.description,
        "seed": cfg.seed, "best_training_checkpoint": best, "resumed_from": resume,
        "monitor": cfg.trainer.monitor,
        "best_val_score": _number(trainer.checkpoint_callback.best_model_score),
        "last_val": {k: round(float(v), 4) for k, v in trainer.callback_metrics.items()
                     if k.startswith("val/")},
        "global_steps": trainer.global_step, "epochs": trainer.current_epoch,
        "trainable_parameters": sum(p.numel() for p in module.parameters()),
        "model": OmegaConf.to_container(cfg.model), "data": data.describe(),
        "embed_seconds": round(embed_seconds, 1),
        "train_seconds": round(time.perf_counter() - start, 1),
    }
    if cfg.test_after_fit:
        trainer.test(module, datamodule=data, verbose=False)
        report["test"] = {**module.test_result, "dataset": "squad_paragraphs",
                          "pool": cfg.data.test_pool}
    report["seconds"] = round(time.perf_counter() - start, 1)
    (run_dir / "result.json").write_text(json.dumps(report, indent=2))
    return report
