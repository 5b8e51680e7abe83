"""`rqa evaluate --model static:glove50|static:spacy_md [--idf] --dataset squad_paragraphs|reqa_squad`:
frozen base embeddings on the paragraph task (recall@1/2/5/10/20/50, AP, optionally the P-R
curve as a PNG) or on ReQA SQuAD sentence retrieval (the shared ReQA evaluator; IDF on the
candidate sentences, the corpus being indexed there)."""

from __future__ import annotations

import time

from ..data.paragraphs import DATASET as PARAGRAPHS
from .static import STATIC_MODELS, load_static, static_package  # numpy only

EMBEDDING_MODELS = (*(f"static:{name}" for name in STATIC_MODELS), "contextual:minilm")


def evaluate_paragraph_task(model: str, idf: bool, pool: str, data_dir=None,
                            idf_corpus: str = "paragraphs", pr_curve: str | None = None,
                            use_cache: bool = True,
                            layer_weights: list[float] | None = None) -> dict:
    """Frozen base embeddings on the paragraph task (``rqa evaluate --dataset
    squad_paragraphs``): recall@k and AP of every question against the pool's paragraphs.

    Args:
        model: one of :data:`EMBEDDING_MODELS`.
        idf: IDF-weighted pooling.
        pool: ``"dev"`` or ``"train"`` (the SQuAD file).
        data_dir: the data folder; None: $RQA_DATA_DIR, then ``../shared/data``.
        idf_corpus: ``"paragraphs"`` or ``"paragraphs+questions"``.
        pr_curve: write the precision-recall curve there (a PNG); None: none.
        use_cache: read and write the embedding cache.
        layer_weights: a contextual model's layer weights; None: its token-embedding layer.

    Returns:
        The report: ``metrics``, the settings, ``embedding`` (the cache's meta) and timings.
    """
    from ..data.paragraphs import load_paragraph_task
    from ..evaluation.paragraph_retrieval import (
        evaluate_paragraphs,
        plot_pr_curves,
        precision_recall_points,
    )
    from .base import task_embeddings

    start = time.perf_counter()
    task = load_paragraph_task(pool, data_dir)
    q, p, meta = task_embeddings(task, model, idf, idf_corpus, use_cache=use_cache,
                                 layer_weights=layer_weights)
    embed = time.perf_counter() - start
    out = {"metrics": evaluate_paragraphs(q, p, task.gold), "dataset": PARAGRAPHS,
           "pool": pool, "model": model, "idf": idf,
           "idf_corpus": idf_corpus if idf else None,
           "layer_weights": meta.get("layer_weights"), "embedding": meta,
           "embed_seconds": round(embed, 3)}
    if pr_curve:
        precision, recall = precision_recall_points(q, p, task.gold)
        label = f"{model}{' w/ IDF' if idf else ''}"
        plot_pr_curves({label: (precision, recall, out["metrics"]["ap"])}, pr_curve,
                       f"P-R, SQuAD {pool} paragraphs")
        out["pr_curve"] = pr_curve
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def evaluate_reqa(model: str, *, idf: bool, dataset: str, pool_name: str | None, data_dir,
                  strict: bool, use_cache: bool, refiner, run_file, progress: bool,
                  evaluation) -> dict:
    """Sentence retrieval: questions and candidate sentences pooled the same way, frozen
    embeddings ``model`` (``static:*``; ``idf``: IDF-weighted, over the candidates) on the
    pool ``pool_name`` of ``dataset``, through the refiner exported in ``refiner`` when given.

    Args:
        model: ``static:<name>``.
        idf: IDF-weighted pooling, IDF over the candidate sentences.
        dataset: the dataset (:func:`~retrieval_qa.data.load_pool`).
        pool_name: its pool; None: the dataset's evaluation pool.
        data_dir: the data folder (``--data-dir``); None: the default lookup.
        strict: a malformed record is an error; False: it is skipped and counted in the
            report's ``skipped_records``.
        use_cache: read and write the pool and embedding caches.
        refiner: the folder of an exported refiner (:func:`refine`); None or empty: none.
        run_file: where to write the run file; None: none.
        progress: show a progress bar.
        evaluation: the ``eval`` group's settings (conf/eval/default.yaml: ``top_k``,
            ``memory_mb``, ``ks``, ``doc_level``).

    Returns:
        The evaluation's summary with the settings, the embedding's cache notes and timings.
    """
    from ..data import load_pool
    from ..evaluation import evaluate
    from ..evaluation.search import DenseScorer
    from .base import embed_texts, parse_model
    from .cache import cached, source_sha256  # torch: imported on use, not by `rqa --help`

    start = time.perf_counter()
    _, name = parse_model(model)
    pool, notes = load_pool(dataset, pool_name, data_dir, strict=strict, use_cache=use_cache)
    vectors = load_static(name)
    sources = {**{f"pool:{s}": source_sha256(s) for s in pool.source.split(", ")},
               **{f"vectors:{p.name}": source_sha256(p) for p in vectors.files}}
    settings = {"model": model, "idf": idf, "idf_corpus": "candidates",
                "dataset": pool.dataset, "pool": pool.pool, "questions": len(pool.questions),
                "candidates": len(pool.candidates)}
    texts = [c.text for c in pool.candidates]
    def compute():
        tensors, notes = embed_texts(pool.questions, texts, vectors, idf)
        return tensors, {**notes, "package": static_package(name), "dim": vectors.dim}

    tensors, meta = cached(settings, sources, compute, use_cache=use_cache)
    questions, candidates = tensors["questions"], tensors["paragraphs"]
    refined = None
    if refiner:
        questions, candidates, refined = refine(refiner, model, idf, questions, candidates)
    embed = time.perf_counter() - start
    scorer = DenseScorer(questions, candidates)
    result = evaluate(pool, scorer, top_k=evaluation.top_k, memory_mb=evaluation.memory_mb,
                      ks=tuple(evaluation.ks), doc_level=evaluation.doc_level,
                      run_file=run_file, progress=progress)
    return {**result.summary(), "dataset": pool.dataset, "pool": pool.pool,
            "model": model, "idf": idf,
            "idf_corpus": "candidate sentences" if idf else None, "refiner": refined,
            "embedding": {k: meta.get(k) for k in ("cache", "cache_folder", "sources", "package",
                                                   "dim", "questions", "paragraphs")},
            "embed_seconds": round(embed, 3), "seconds": round(time.perf_counter() - start, 3),
            "skipped_records": notes.get("skipped_records")}


def refine(folder, model: str, idf: bool, questions, candidates):
    """``questions`` and ``candidates`` through the refiner exported in ``folder``, which must
    refine this base embedding; returns them with a description of the refiner.

    Args:
        folder: the refiner's export folder
            (:class:`~retrieval_qa.models.residual.RefinerArtifact`).
        model: the base embedding's name; must be the one the refiner was trained on.
        idf: whether the base embedding is IDF-weighted; must match the refiner's.
        questions: the questions' base vectors ``[Q, D]``.
        candidates: the candidates' base vectors ``[C, D]``.
    """
    from ..models.artifact import refusing_damage
    from ..models.residual import RefinerArtifact

    with refusing_damage():
        art = RefinerArtifact.load(folder)
    base = art.meta["base_embedding"]
    if base.get("embedding") != model or bool(base.get("idf")) != idf:
        raise ValueError(f"--refiner {folder} refines {base.get('embedding')} "
                         f"{'with' if base.get('idf') else 'without'} IDF, not {model} "
                         f"{'with' if idf else 'without'} IDF: pass --model "
                         f"{base.get('embedding')}{' --idf' if base.get('idf') else ''}")
    hp = art.meta["hparams"]
    return (art.refine_questions(questions), art.refine_paragraphs(candidates),
            {"folder": str(folder), "refiner": hp.get("refiner"), "sides": hp.get("sides"),
             "base_embedding": base})
