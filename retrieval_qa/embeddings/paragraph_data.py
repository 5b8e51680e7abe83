"""The ``data`` group ``squad_paragraphs``: the paragraph task's pools embedded with a base
embedding (computed once, then cached), as the vector DataModule of
:mod:`retrieval_qa.data.vector_datamodule`. It lives here, above data/, because it needs the
embeddings: data/ itself imports nothing of embeddings/."""

from __future__ import annotations

from pathlib import Path

import torch

from ..data.paragraphs import load_paragraph_task
from ..data.vector_datamodule import ParagraphVectorDataModule, VectorSplit
from .base import task_embeddings


def vector_split(pool: str, data_dir: str | Path | None, embedding: str, idf: bool,
                 idf_corpus: str, layer_weights: list[float] | None = None
                 ) -> tuple[VectorSplit, dict]:
    """One pool of the paragraph task as base vectors (computed once, then cached).

    Args:
        pool: ``"train"`` or ``"dev"``.
        data_dir: the data folder; None: $RQA_DATA_DIR, then ``../shared/data``.
        embedding: the base embedding (``static:<name>`` or ``contextual:minilm``).
        idf: IDF-weighted pooling.
        idf_corpus: ``"paragraphs"`` or ``"paragraphs+questions"``.
        layer_weights: a contextual embedding's layer weights; None: its token-embedding
            layer.

    Returns:
        The split (questions, paragraphs, gold paragraph of each question) and notes.
    """
    task = load_paragraph_task(pool, data_dir)
    q, p, meta = task_embeddings(task, embedding, idf, idf_corpus, layer_weights=layer_weights)
    return VectorSplit(q, p, torch.tensor(task.gold)), {
        "pool": pool, "questions": len(task.questions), "paragraphs": len(task.paragraphs),
        "cache": meta["cache"], "sources": meta["source_files"]}


def paragraph_vector_data(*, train_pool: str, test_pool: str, data_dir: str | Path | None,
                          embedding: str, idf: bool, idf_corpus: str, val_questions: int,
                          max_train_pairs: int | None, split_seed: int, batch_size: int,
                          eval_batch_size: int, layer_weights: list[float] | None
                          ) -> ParagraphVectorDataModule:
    """The ``data`` group ``squad_paragraphs``: both pools embedded (cached), then the
    DataModule; its arguments are the keys of ``conf/data/squad_paragraphs.yaml``.

    Args:
        train_pool: the pool trained on (and validated on, ``val_questions`` held out).
        test_pool: the pool tested on.
        data_dir: the data folder; None: $RQA_DATA_DIR, then ``../shared/data``.
        embedding: the base embedding (``static:<name>`` or ``contextual:minilm``).
        idf: IDF-weighted pooling.
        idf_corpus: ``"paragraphs"`` or ``"paragraphs+questions"``.
        val_questions: training questions held out for validation.
        max_train_pairs: a cap on the training pairs; None: all.
        split_seed: the seed of the validation split and of the shuffling.
        batch_size: training pairs per batch.
        eval_batch_size: questions per evaluation batch.
        layer_weights: a ``contextual:`` embedding's layer weights; None: its token-embedding
            layer (any other embedding must leave it None).
    """
    if layer_weights is not None:
        if not embedding.startswith("contextual:"):
            raise ValueError(f"data.layer_weights={list(layer_weights)} combines the layers of a "
                             f"contextual:NAME embedding, not of {embedding!r}: set it to null")
        layer_weights = [float(w) for w in layer_weights]
    train, train_notes = vector_split(train_pool, data_dir, embedding, idf, idf_corpus,
                                      layer_weights)
    test, test_notes = vector_split(test_pool, data_dir, embedding, idf, idf_corpus,
                                    layer_weights)
    return ParagraphVectorDataModule(
        train, test, val_questions=val_questions, batch_size=batch_size,
        eval_batch_size=eval_batch_size, max_train_pairs=max_train_pairs, seed=split_seed,
        notes={"embedding": embedding, "idf": idf, "idf_corpus": idf_corpus if idf else None,
               **({"layer_weights": layer_weights} if layer_weights is not None else {}),
               "train_source": train_notes, "test_source": test_notes,
               "test": {"dataset": "squad_paragraphs", "pool": test_pool}})
