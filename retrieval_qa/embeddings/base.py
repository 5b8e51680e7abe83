"""Base embeddings of a paragraph task: questions and paragraphs pooled with one model,
cached. ``model``: ``static:<name>`` (see :mod:`.static`); ``idf``: weight tokens by IDF
computed on ``idf_corpus``: ``paragraphs`` (the corpus being indexed, default) or
``paragraphs+questions`` (every text of the task, as the paper's 12,637 "documents")."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..data.paragraphs import ParagraphTask
from .cache import cached, source_sha256
from .idf import IDF, word_tokens
from .pooling import mean_pool
from .static import StaticVectors, load_static

IDF_CORPORA = ("paragraphs", "paragraphs+questions")


def parse_model(model: str) -> tuple[str, str]:
    kind, _, name = model.partition(":")
    if kind != "static" or not name:
        raise ValueError(f"embedding model {model!r}; expected static:<name>, e.g. "
                         f"static:glove50")
    return kind, name


def embed_texts(questions: list[str], paragraphs: list[str], vectors: StaticVectors,
                idf: bool, idf_corpus: str = "paragraphs") -> tuple[dict, dict]:
    if idf_corpus not in IDF_CORPORA:
        raise ValueError(f"idf_corpus={idf_corpus!r}; expected one of {list(IDF_CORPORA)}")
    start = time.perf_counter()
    q_tok = [word_tokens(t) for t in questions]
    p_tok = [word_tokens(t) for t in paragraphs]
    weights = None
    if idf:
        weights = IDF(p_tok if idf_corpus == "paragraphs" else [*p_tok, *q_tok])
    q, q_notes = mean_pool(q_tok, vectors.vocab, vectors.matrix, weights)
    p, p_notes = mean_pool(p_tok, vectors.vocab, vectors.matrix, weights)
    return {"questions": q, "paragraphs": p}, {
        "questions": q_notes, "paragraphs": p_notes,
        "compute_seconds": round(time.perf_counter() - start, 2)}


def task_embeddings(task: ParagraphTask, model: str = "static:glove50", idf: bool = False,
                    idf_corpus: str = "paragraphs", vectors: StaticVectors | None = None,
                    cache_dir: str | Path | None = None, use_cache: bool = True
                    ) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(questions [Q, D], paragraphs [P, D], meta) for ``task``, l2-normalised."""
    _, name = parse_model(model)
    vectors = vectors or load_static(name)
    sources = {"task": task.source_sha256 or "unknown",
               **{f"vectors:{p.name}": source_sha256(p) for p in vectors.files}}
    settings = {"model": model, "idf": idf, "idf_corpus": idf_corpus if idf else None,
                "pool": task.pool, "questions": len(task.questions),
                "paragraphs": len(task.paragraphs)}
    tensors, meta = cached(settings, sources,
                           lambda: embed_texts(task.questions, task.paragraphs, vectors, idf,
                                               idf_corpus),
                           cache_dir, use_cache)
    meta["source_files"] = {"task": task.source, "vectors": [str(p) for p in vectors.files]}
    return tensors["questions"], tensors["paragraphs"], meta
