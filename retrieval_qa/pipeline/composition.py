"""Pipelines composed as experiments are (:mod:`retrieval_qa.training.compose`):
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

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..config import apply_overrides, conf_dirs, conf_names, load_yaml, load_yaml_file, plain
from ..errors import UsageError, did_you_mean
from ..registry import SHORT_NAMES, instantiate, takes, target_of
from ..training.compose import check_ranges, merge_strict
from ..training.provenance import (
    COMMAND_LINE,
    annotated_yaml,
    layer_keys,
    override_keys,
    resolve_sources,
)

__all__ = ["Fusion", "Pipeline", "PipelineConfigError", "Tuning",
           "load_pipeline", "parse_pipeline"]

BASE = "pipeline.yaml"
#: the kind of a ``reranker:`` block that names neither ``kind`` nor ``_target_`` (the
#: configs written before rerankers had kinds)
RERANKER_KIND = "cross_encoder"
FUSION_METHODS = ("none", "rrf", "convex")
NORMALIZATIONS = ("minmax", "zscore")
_FIX = "check the spelling against conf/pipeline.yaml"
#: the settings that take ``tune`` (chosen on the validation side) besides their own type,
#: also on the command line (``reranker.top_k=tune`` over a pipeline's ``top_k: 10``)
TUNED = {key: ("tune",) for key in ("fusion.weights", "fusion.rrf_k", "reranker.top_k",
                                     "reranker.weight", "reranker.gate")}


class PipelineConfigError(UsageError):
    """A bad pipeline config: names the file, the key and the fix."""

    def __init__(self, source: str, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{source}: {key}: {problem} (fix: {fix})")


@dataclass(frozen=True)
class Fusion:
    method: str                      # none | rrf | convex
    rrf_k: float | str               # rrf: a number, or "tune"
    normalization: str               # convex: minmax | zscore
    weights: dict | str | None       # convex: {retriever: weight}, or "tune"


@dataclass(frozen=True)
class Tuning:
    dataset: str
    pool: str
    val_fraction: float
    split_seed: int
    max_questions: int | None
    grid_step: float
    rrf_k_grid: tuple


@dataclass(frozen=True)
class Pipeline:
    """A composed pipeline: its stages built, its settings checked. ``cfg``: the composed
    config; ``sources``: where each of its values came from."""

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


def _chain(top: str, node: DictConfig) -> list[tuple[str, DictConfig]]:
    """The file ``top`` (read as ``node``) and the files it ``extends:``, the root parent
    first, each with its label (a parent's says which file extends it)."""
    files, seen, label = [], set(), top
    while True:
        files.append((label, node))
        parent = node.pop("extends", None)
        if parent is None:
            return files[::-1]
        if parent not in conf_names("pipeline") or parent in seen:
            raise PipelineConfigError(label, "extends", f"no conf/pipeline/{parent}.yaml" if
                                      parent not in seen else f"{parent} extends itself",
                                      f"extend one of {conf_names('pipeline')}")
        seen.add(parent)
        label = f"conf/pipeline/{parent}.yaml (extended by {top})"
        node = load_yaml(f"pipeline/{parent}.yaml")


def _open(cfg: DictConfig, paths: Sequence[str]) -> DictConfig:
    """``cfg`` with the mappings at ``paths`` (those that are empty or null in
    conf/pipeline.yaml: the retrievers, the fusion weights, the reranker) taking any keys;
    the stage blocks are checked against their kind's settings instead."""
    for path in paths:
        node = OmegaConf.select(cfg, path)
        if isinstance(node, DictConfig):
            OmegaConf.set_struct(node, False)
    return cfg


def _where(key: str, layers: Sequence[tuple[str, Sequence[str]]], default: str) -> str:
    """The last layer that set ``key`` (or something under it)."""
    return next((where for where, keys in reversed(layers)
                 if any(k == key or k.startswith(key + ".") for k in keys)), default)


def _stage_defaults(kind: str | None) -> tuple[str, DictConfig] | None:
    relative = f"pipeline/stages/{kind}.yaml"
    if kind is None or not any((d / relative).is_file() for d in conf_dirs()):
        return None
    return f"conf/{relative}", load_yaml(relative)


def _arguments(target) -> list[str]:
    """The keyword arguments ``target`` names."""
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _stage(cfg: DictConfig, slot: str, registry_kind: str, layers, source: str,
           stage_layers: list) -> None:
    """The block at ``slot`` merged over the settings of its kind, its keys checked: those
    of its kind's file, or the arguments its ``_target_`` takes."""
    block = OmegaConf.select(cfg, slot)
    if not isinstance(block, DictConfig):
        raise PipelineConfigError(_where(slot, layers, source), slot, f"{block!r} is not a "
                                  "mapping", "write the stage as key: value lines")
    key, names = SHORT_NAMES[registry_kind]
    if registry_kind == "reranker" and not any(
            _where(f"{slot}.{k}", layers, "") for k in ("_target_", key)):
        block[key] = RERANKER_KIND
        stage_layers.append((f"conf/pipeline/stages/{RERANKER_KIND}.yaml (the kind of a "
                             "reranker that names none)", [f"{slot}.{key}"]))
    if "_target_" not in block and block.get(key) not in names:
        given = block.get(key)
        raise PipelineConfigError(_where(f"{slot}.{key}", layers, source), f"{slot}.{key}",
                                  f"{given!r} is not a {registry_kind} kind; "
                                  f"{did_you_mean(given, names)}".rstrip(),
                                  f"use one of {list(names)}, or a _target_ naming the class "
                                  "(package.module.Name)")
    try:
        target = target_of(block, f"{source}: {slot}", registry_kind)
    except ImportError as e:
        raise UsageError(f"{_where(f'{slot}._target_', layers, source)}: {slot}: {e}") from e
    found = _stage_defaults(getattr(target, "kind", None))
    defaults = found[1] if found else OmegaConf.create()
    allowed = {*defaults.keys(), "_target_" if "_target_" in block else key}
    if "_target_" in block:  # and the arguments of the class it names (its **kwargs too)
        allowed |= {n for n in (*_arguments(target), *block) if n != "name" and takes(target, n)}
    for name in block:
        if name in allowed:
            continue
        allowed = sorted(allowed)
        raise PipelineConfigError(_where(f"{slot}.{name}", layers, source), f"{slot}.{name}",
                                  f"unknown key; {did_you_mean(name, allowed)}".rstrip(),
                                  f"use one of {allowed}" + (f" ({found[0]})" if found else ""))
    if found:
        stage_layers.append((found[0], layer_keys(defaults, f"{slot}.")))
        named = OmegaConf.create({k: block[k] for k in ("_target_", key) if k in block})
        block = OmegaConf.merge(named, defaults, block)  # the class first, then its settings
        OmegaConf.update(cfg, slot, block, merge=False)
    missing = sorted(OmegaConf.missing_keys(block))
    if missing:
        raise PipelineConfigError(_where(slot, layers, source), f"{slot}.{missing[0]}",
                                  "missing", f"give it ({found[0]} says what it holds)"
                                  if found else "give it")


def _compose(top: str, node: DictConfig, overrides: Sequence[str]) -> Pipeline:
    base = load_yaml(BASE)
    open_paths = [k for k in layer_keys(base) if OmegaConf.select(base, k) in (None, {})]
    OmegaConf.set_struct(base, True)
    files = _chain(top, node)
    cfg = _open(base, open_paths)
    for label, file in files:
        cfg = _open(merge_strict(cfg, file, label, _FIX), open_paths)
    layers = [(label, layer_keys(file)) for label, file in files]
    before = _stages(cfg, layers, top, [])  # so the command line's values are typed by them
    cfg = _open(apply_overrides(before, overrides, TUNED), open_paths)
    layers.append((COMMAND_LINE, override_keys(overrides)))
    stage_layers: list = []
    cfg = _stages(cfg, layers, top, stage_layers)
    if cfg["name"] is None:
        cfg["name"] = Path(top).stem
        layers.append((top, ["name"]))
    # a stage's defaults are the source of the keys of its block that no file sets
    given = {k for _, keys in layers for k in keys}
    stage_layers = [(where, [k for k in keys if not any(
        g == k or g.startswith(k + ".") for g in given)]) for where, keys in stage_layers]
    sources = resolve_sources(cfg, [(f"conf/{BASE}", layer_keys(base)), *layers,
                                    *stage_layers])
    check_ranges(cfg, before, sources)
    return _pipeline(cfg, sources, top)


def _stages(cfg: DictConfig, layers, top: str, stage_layers: list) -> DictConfig:
    """``cfg`` with each stage block merged over its kind's settings (:func:`_stage`)."""
    if not isinstance(cfg.get("retrievers"), DictConfig) or not cfg.retrievers:
        raise PipelineConfigError(_where("retrievers", layers, top), "retrievers", "empty",
                                  "name at least one retriever")
    for name in list(cfg.retrievers):
        _stage(cfg, f"retrievers.{name}", "retriever", layers, top, stage_layers)
    if cfg.reranker is not None:
        _stage(cfg, "reranker", "reranker", layers, top, stage_layers)
    return cfg


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
    a value its class refuses is an error naming the file and the block."""
    try:
        return instantiate(block, f"{source_of(slot)}: {slot}", kind, **context)
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
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return _compose(str(path), load_yaml_file(path, "pipeline config"), overrides)
    if name not in conf_names("pipeline"):
        raise UsageError(f"--pipeline {name}: no conf/pipeline/{name}.yaml (fix: "
                         f"{did_you_mean(name, conf_names('pipeline'))}use one of "
                         f"{conf_names('pipeline')}, or a path to a .yaml file)")
    return _compose(f"conf/pipeline/{name}.yaml", load_yaml(f"pipeline/{name}.yaml"),
                    overrides)


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
