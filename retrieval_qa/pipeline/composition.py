"""Pipelines composed as experiments are (:mod:`retrieval_qa.config.pipeline` composes
them, as :mod:`retrieval_qa.config.experiment` composes experiments), their stages built here:
``conf/pipeline/<name>.yaml`` (or a YAML file given by its path) with the files it
``extends:`` (``conf/pipeline/<parent>.yaml``), merged over ``conf/pipeline.yaml`` key by key
(a key that file does not have is an error naming the file, the key and the keys it may have
meant), then ``key=value`` settings (:func:`~retrieval_qa.config.apply_overrides`), then each
stage block over the settings of its kind (``conf/pipeline/stages/<kind>.yaml``); the values
are checked against ``conf/ranges.yaml`` and each is known with the file it came from
(``rqa evaluate --pipeline NAME --cfg``).

The stages are built by the registry from their blocks (:mod:`.retrievers`,
:mod:`.rerankers`); a block names its class by ``_target_`` or by ``kind``. Layout (every key
is documented in ``conf/pipeline/hybrid_convex.yaml``)::

    name: hybrid_convex
    top_k: 100                       # each retriever's list per question
    retrievers:                      # name -> stage; names key the weights and the run files
      bm25: {kind: bm25}             #   settings: keys of conf/model/bm25.yaml
      bm25_context: {kind: bm25, settings: {with_context: true}}
      minilm: {kind: dual_encoder, checkpoint: runs/off_the_shelf}
    fusion: {method: convex, normalization: minmax, weights: tune, rrf_k: 60}
    tuning: {dataset: reqa_squad, pool: train, val_fraction: 0.1, split_seed: 0, ...}
    reranker: null                   # or {checkpoint: DIR, top_k: 20, batch_size: 64}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

from ..config import (
    PipelineConfigError,
    annotated_yaml,
    compose_pipeline,
    model_defaults,
    pipeline_file,
    plain,
    reading,
)
from ..config.pipeline import BASE, RERANKER_KIND, TUNED
from ..errors import UsageError, did_you_mean
from ..registry import instantiate, target_of

#: BASE, RERANKER_KIND, TUNED and PipelineConfigError: the composition's
#: (:mod:`retrieval_qa.config.pipeline`), named here too
__all__ = ["BASE", "RERANKER_KIND", "TUNED", "Fusion", "Pipeline", "PipelineConfigError",
           "Tuning", "load_pipeline", "parse_pipeline"]

FUSION_METHODS = ("none", "rrf", "convex")
NORMALIZATIONS = ("minmax", "zscore")


@dataclass(frozen=True)
class Fusion:
    """How the retrievers' lists are combined (the ``fusion`` block, checked).

    Attributes:
        method: ``none`` (one retriever), ``rrf`` or ``convex``.
        rrf_k: the RRF constant (``rrf``), or ``"tune"``: the best of ``tuning.rrf_k_grid``.
        normalization: how ``convex`` scales each list's scores: ``minmax`` or ``zscore``.
        weights: ``convex``'s weight per retriever name (every retriever, floats, not all 0),
            or ``"tune"``: the best on the simplex grid; None: not ``convex``.
    """

    method: str                      # none | rrf | convex
    rrf_k: float | str               # rrf: a number, or "tune"
    normalization: str               # convex: minmax | zscore
    weights: dict | str | None       # convex: {retriever: weight}, or "tune"


@dataclass(frozen=True)
class Tuning:
    """Where and how what says ``tune`` is tuned (the ``tuning`` block): on the validation
    side of a training pool, never a test pool.

    Attributes:
        dataset: the dataset whose pool is split (e.g. ``reqa_squad``).
        pool: the pool that is split; always ``train``.
        val_fraction: the share of its QA inputs held out for validation, in (0, 1).
        split_seed: the seed of that split and of the question cap.
        max_questions: the validation questions kept (their paragraphs' sentences the
            candidates); None: all.
        grid_step: the step of the weight grids (fusion's simplex, the reranker's weight).
        rrf_k_grid: the RRF constants tried when ``fusion.rrf_k`` is ``"tune"``.
    """

    dataset: str
    pool: str
    val_fraction: float
    split_seed: int
    max_questions: int | None
    grid_step: float
    rrf_k_grid: tuple


@dataclass(frozen=True)
class Pipeline:
    """A composed pipeline: its stages built, its settings checked.

    Attributes:
        name: the pipeline's name (``name:``; null: its file's stem).
        top_k: the length of each retriever's list per question.
        retrievers: the first stages (:mod:`.retrievers`), each with its ``name``.
        fusion: the checked :class:`Fusion`.
        tuning: the :class:`Tuning` settings.
        reranker: the reranking stage (:mod:`.rerankers`); None: none.
        source: the pipeline's file (or the name given to :func:`parse_pipeline`).
        cfg: the composed config.
        sources: each dotted key of ``cfg`` -> the layer that set it (a file, the command line).
    """

    name: str
    top_k: int
    retrievers: tuple            # first stages (:mod:`.retrievers`), each with its ``name``
    fusion: Fusion
    tuning: Tuning
    reranker: object | None      # :mod:`.rerankers`
    source: str
    cfg: DictConfig = field(repr=False, compare=False)
    sources: dict = field(repr=False, compare=False)

    @property
    def needs_tuning(self) -> bool:
        return (self.fusion.method == "convex" and self.fusion.weights == "tune") or \
            (self.fusion.method == "rrf" and self.fusion.rrf_k == "tune") or \
            (self.reranker is not None and "tune" in (self.reranker.weight, self.reranker.top_k,
                                                  self.reranker.gate))

    def to_dict(self) -> dict:
        """The composed settings, as a plain dict (what a run reports)."""
        return plain(self.cfg)

    def annotated(self) -> str:
        """The composed settings as YAML, each value followed by ``# <where it came from>``."""
        return annotated_yaml(self.cfg, self.sources)


def _pipeline(cfg: DictConfig, sources: dict, top: str) -> Pipeline:
    """The pipeline of a composed config: what its ranges cannot say checked, its stages
    built."""
    def _source(key: str) -> str:
        return next((s for k, s in sources.items() if k == key or k.startswith(key + ".")), top)

    def error(key: str, problem: str, fix: str) -> PipelineConfigError:
        where = _source(key)  # a default's: the pipeline's file is where to set it
        if where == f"conf/{BASE}" or where.startswith("conf/pipeline/stages/"):
            where = top
        return PipelineConfigError(where, key, problem, fix)

    for section in ("fusion", "tuning"):
        if not isinstance(cfg.get(section), DictConfig):
            raise error(section, "not a mapping", f"give its keys (conf/{BASE})")
    values = plain(cfg)
    names = list(values["retrievers"])
    fusion = Fusion(**values["fusion"])
    for key, value, allowed in (("method", fusion.method, FUSION_METHODS),
                                ("normalization", fusion.normalization, NORMALIZATIONS)):
        if value not in allowed:
            raise error(f"fusion.{key}", f"{value!r} is not one of {list(allowed)}",
                        f"use one of {list(allowed)}")
    if fusion.method == "none" and len(names) > 1:
        raise error("fusion.method", f"none with {len(names)} retrievers",
                    "use rrf or convex, or keep one retriever")
    weights = fusion.weights
    if isinstance(weights, dict):
        extra = [n for n in weights if n not in names]
        if extra:
            raise error(f"fusion.weights.{extra[0]}", "not a retriever of the pipeline; "
                        f"{did_you_mean(extra[0], names)}".rstrip(), f"use one of {names}")
        missing = [n for n in names if n not in weights]
        if missing:
            raise error(f"fusion.weights.{missing[0]}", "missing",
                        f"give a weight for every retriever {names}, or weights: tune")
        if sum(weights.values()) <= 0:
            raise error("fusion.weights", "all weights are 0", "give at least one positive "
                        "weight")
        weights = {n: float(weights[n]) for n in names}
    if fusion.method == "convex" and weights is None:
        raise error("fusion.weights", "missing for convex fusion",
                    "give {retriever: weight} or tune")
    tuning = Tuning(**{**values["tuning"], "rrf_k_grid": tuple(values["tuning"]["rrf_k_grid"])})
    if tuning.pool != "train":
        raise error("tuning.pool", f"{tuning.pool!r}: weights are tuned on the validation "
                    "side of the training file only", "use pool: train (never a test pool)")
    retrievers = tuple(_build(cfg.retrievers[n], f"retrievers.{n}", "retriever", _source,
                              name=n) for n in names)
    reranker = None if cfg.reranker is None else \
        _build(cfg.reranker, "reranker", "reranker", _source)
    return Pipeline(str(cfg.name), int(cfg.top_k), retrievers,
                    Fusion(fusion.method, fusion.rrf_k, fusion.normalization, weights),
                    tuning, reranker, top, cfg, sources)


def _build(block: DictConfig, slot: str, kind: str, source_of, **context):
    """The stage of ``block`` (the registry's :func:`~retrieval_qa.registry.instantiate`);
    a value its class refuses is an error naming the file and the block. A class that names
    a model's file (``defaults_from = "bm25"``: its settings are over conf/model/bm25.yaml's)
    is given that file's settings as ``defaults``."""
    where = f"{source_of(slot)}: {slot}"
    try:
        model = getattr(target_of(block, where, kind), "defaults_from", None)
        if model:
            context["defaults"] = model_defaults(model)
        return instantiate(block, where, kind, **context)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from e


def load_pipeline(name: str, overrides: Sequence[str] = ()) -> Pipeline:
    """``conf/pipeline/<name>.yaml``, or the YAML file ``name`` (which may ``extends:`` one of
    conf/pipeline/), composed with ``key=value`` ``overrides`` (e.g. ``reranker=null``,
    ``reranker.top_k=10``) and checked.

    Args:
        name: a file of conf/pipeline/ (without ``.yaml``) or the path of a YAML file.
        overrides: ``key=value`` settings over the file's.

    Returns:
        The :class:`Pipeline`, its stages built (nothing loaded or encoded yet).

    Raises:
        UsageError: no such pipeline, or a value its stage refuses.
        PipelineConfigError: a key or value of the file is wrong (named with the file).

    Example:

        >>> p = load_pipeline("hybrid_rrf", ["top_k=50"])
        >>> p.top_k, [r.name for r in p.retrievers], p.fusion.method, p.reranker
        (50, ['bm25', 'bm25_context', 'minilm'], 'rrf', None)
    """
    with reading():  # each file read once, the pipeline's own included
        top, node = pipeline_file(name)
        return _compose(top, node, overrides)


def parse_pipeline(raw: dict, source: str, overrides: Sequence[str] = ()) -> Pipeline:
    """A pipeline given as a mapping (the layout of the module docstring), composed as the
    file ``source`` holding it would be.

    Args:
        raw: the pipeline's mapping (it may ``extends:`` a file of conf/pipeline/).
        source: the name its errors and value sources give it.
        overrides: ``key=value`` settings over it.

    Example:

        >>> p = parse_pipeline({"name": "bm25_only", "top_k": 10,
        ...                     "retrievers": {"bm25": {"kind": "bm25"}},
        ...                     "fusion": {"method": "none"}, "reranker": None}, "my pipeline")
        >>> p.name, p.top_k, type(p.retrievers[0]).__name__, p.needs_tuning
        ('bm25_only', 10, 'BM25Retriever', False)
    """
    if not isinstance(raw, dict):
        raise PipelineConfigError(source, "(top level)", f"{raw!r} is not a mapping",
                                  "write it as key: value lines")
    return _compose(source, OmegaConf.create(raw), overrides)


def _compose(top: str, node: DictConfig, overrides: Sequence[str]) -> Pipeline:
    """The pipeline of the file ``top`` (read as ``node``): its settings composed
    (:func:`~retrieval_qa.config.compose_pipeline`), its stages built."""
    with reading():
        cfg, sources = compose_pipeline(top, node, overrides)
        return _pipeline(cfg, sources, top)
