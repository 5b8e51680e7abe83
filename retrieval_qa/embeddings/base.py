"""Base embeddings of a paragraph task: questions and paragraphs pooled with one model,
cached. ``model``: ``static:<name>`` (see :mod:`.static`) or ``contextual:minilm`` (see
:mod:`.contextual`; ``layer_weights`` combine its 7 layers, default the token-embedding
layer); ``idf``: weight tokens by IDF computed on ``idf_corpus``: ``paragraphs`` (the corpus
being indexed, default) or ``paragraphs+questions`` (every text of the task, as the paper's
12,637 "documents"; static models only)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..data.paragraphs import ParagraphTask
from .cache import cached, source_sha256
from .idf import IDF, IDF_CORPORA, word_tokens
from .pooling import mean_pool
from .static import StaticVectors, load_static, static_package

CONTEXTUAL_MODELS = ("minilm",)


def parse_model(model: str) -> tuple[str, str]:
    """``(kind, name)`` of an embedding model's name; ``ValueError`` for any other form.

    Args:
        model: ``static:<name>`` or ``contextual:minilm``.

    Example:

        >>> parse_model("static:glove50")
        ('static', 'glove50')
    """
    kind, _, name = model.partition(":")
    if not name or kind not in ("static", "contextual") or \
            (kind == "contextual" and name not in CONTEXTUAL_MODELS):
        raise ValueError(f"embedding model {model!r}; expected static:<name>, e.g. "
                         f"static:glove50 or static:spacy_md, or contextual:minilm")
    return kind, name


def embed_texts(questions: list[str], paragraphs: list[str], vectors: StaticVectors,
                idf: bool, idf_corpus: str = "paragraphs") -> tuple[dict, dict]:
    """Questions and paragraphs mean-pooled over their word tokens (:func:`.pooling.mean_pool`,
    l2-normalised): ``({"questions": [Q, D], "paragraphs": [P, D]}, notes)``.

    Args:
        questions: the question texts.
        paragraphs: the paragraph (or candidate) texts.
        vectors: the static word vectors.
        idf: weight tokens by IDF.
        idf_corpus: what the IDF is computed on: ``"paragraphs"`` or
            ``"paragraphs+questions"`` (:data:`~.idf.IDF_CORPORA`).

    Returns:
        The tensors and the notes (each side's token counts and ``compute_seconds``).
    """
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


def contextual_task_layers(task: ParagraphTask, name: str = "minilm",
                           cache_dir: str | Path | None = None, use_cache: bool = True,
                           window: int = 254, progress: bool = False) -> tuple[dict, dict]:
    """Per-layer pooled means (plain and IDF-weighted, IDF on the paragraphs' word pieces) of
    questions and paragraphs: ``{q_plain, q_idf, p_plain, p_idf}`` each [N, layers, D].

    Args:
        task: the paragraph task.
        name: the contextual model (``minilm``: the packaged all-MiniLM-L6-v2).
        cache_dir: the cache's root; None: the default (:mod:`.cache`).
        use_cache: read and write the cache.
        window: the most word pieces encoded in one window (:func:`.contextual.encode_layers`).
        progress: print the encoding's progress.

    Returns:
        The tensors and the meta (:func:`.cache.cached`).
    """
    from ..pretrained import load_model, load_tokenizer, resolve_pretrained
    from .contextual import encode_layers

    checkpoint = resolve_pretrained("sentence-transformers/all-MiniLM-L6-v2")
    folder = Path(checkpoint.path_or_name)
    files = [folder / f for f in ("config.json", "model.safetensors", "tokenizer.json")
             if (folder / f).is_file()]
    sources = {"task": task.source_sha256 or "unknown",
               **{f"model:{p.name}": source_sha256(p) for p in files}}
    settings = {"model": f"contextual:{name}", "checkpoint": checkpoint.label,
                "pool": task.pool, "window": window, "idf_corpus": "paragraphs",
                "questions": len(task.questions), "paragraphs": len(task.paragraphs)}

    def compute():
        device = "cuda" if torch.cuda.is_available() else "cpu"
        tok, net = load_tokenizer(checkpoint), load_model(checkpoint).eval().to(device)
        idf = IDF(tok(task.paragraphs, add_special_tokens=False)["input_ids"])
        p_plain, p_idf, p_notes = encode_layers(task.paragraphs, tok, net, idf, window,
                                                progress=progress)
        q_plain, q_idf, q_notes = encode_layers(task.questions, tok, net, idf, window,
                                                progress=progress)
        return ({"q_plain": q_plain, "q_idf": q_idf, "p_plain": p_plain, "p_idf": p_idf},
                {"questions": q_notes, "paragraphs": p_notes, "checkpoint": checkpoint.label,
                 "device": device, "stands_in_for": "ELMo (not available offline)"})

    return cached(settings, sources, compute, cache_dir, use_cache)


def task_embeddings(task: ParagraphTask, model: str = "static:glove50", idf: bool = False,
                    idf_corpus: str = "paragraphs", vectors: StaticVectors | None = None,
                    cache_dir: str | Path | None = None, use_cache: bool = True,
                    layer_weights: list[float] | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(questions [Q, D], paragraphs [P, D], meta) for ``task``, l2-normalised.

    Args:
        task: the paragraph task.
        model: ``static:<name>`` or ``contextual:minilm`` (:func:`parse_model`).
        idf: IDF-weighted pooling.
        idf_corpus: ``"paragraphs"`` or ``"paragraphs+questions"`` (contextual models: the
            paragraphs only).
        vectors: static vectors already loaded; None: :func:`.static.load_static`. Unused by
            contextual models.
        cache_dir: the cache's root; None: the default (:mod:`.cache`).
        use_cache: read and write the cache.
        layer_weights: a contextual model's layer weights (:func:`.contextual.combine_layers`);
            None: the token-embedding layer alone. Unused by static models.
    """
    kind, name = parse_model(model)
    if kind == "contextual":
        from .contextual import combine_layers, one_layer

        if idf and idf_corpus != "paragraphs":
            raise ValueError(f"{model}: IDF is computed on the paragraphs only")
        layers, meta = contextual_task_layers(task, name, cache_dir, use_cache)
        side = "idf" if idf else "plain"
        weights = layer_weights or one_layer(layers["q_plain"].shape[1], 0)
        meta = {**meta, "layer_weights": list(weights),
                "source_files": {"task": task.source}}
        return (combine_layers(layers[f"q_{side}"], weights),
                combine_layers(layers[f"p_{side}"], weights), meta)
    vectors = vectors or load_static(name)
    sources = {"task": task.source_sha256 or "unknown",
               **{f"vectors:{p.name}": source_sha256(p) for p in vectors.files}}
    settings = {"model": model, "idf": idf, "idf_corpus": idf_corpus if idf else None,
                "pool": task.pool, "questions": len(task.questions),
                "paragraphs": len(task.paragraphs)}
    def compute():
        tensors, notes = embed_texts(task.questions, task.paragraphs, vectors, idf, idf_corpus)
        return tensors, {**notes, "package": static_package(name), "dim": vectors.dim}

    tensors, meta = cached(settings, sources, compute, cache_dir, use_cache)
    meta["source_files"] = {"task": task.source, "vectors": [str(p) for p in vectors.files]}
    return tensors["questions"], tensors["paragraphs"], meta
