"""Pipeline configs: ``conf/pipeline/<name>.yaml`` (or a path to a YAML file, which may
``extends:`` one of them), checked before anything runs; a wrong key or value is a
:class:`~retrieval_qa.errors.UsageError` naming the file, the key and the fix.

Layout (every key is documented in ``conf/pipeline/hybrid_convex.yaml``)::

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import conf_names, load_group, load_yaml, load_yaml_file, merge_extends, plain
from ..errors import UsageError, did_you_mean

RETRIEVER_KINDS = ("bm25", "dual_encoder")
FUSION_METHODS = ("none", "rrf", "convex")
NORMALIZATIONS = ("minmax", "zscore")
TOP_KEYS = {"name", "top_k", "retrievers", "fusion", "tuning", "reranker"}
RETRIEVER_KEYS = {"bm25": {"kind", "settings"},
                  "dual_encoder": {"kind", "checkpoint", "batch_size", "paragraph_weight"}}
FUSION_KEYS = {"method", "rrf_k", "normalization", "weights"}
TUNING_KEYS = {"dataset", "pool", "val_fraction", "split_seed", "max_questions", "grid_step",
               "rrf_k_grid"}
RERANKER_KEYS = {"checkpoint", "top_k", "batch_size", "weight"}


class PipelineConfigError(UsageError):
    """A bad pipeline config: names the file, the key and the fix."""

    def __init__(self, source: str, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{source}: {key}: {problem} (fix: {fix})")


@dataclass(frozen=True)
class RetrieverSpec:
    name: str
    kind: str
    settings: dict = field(default_factory=dict)  # bm25: over conf/model/bm25.yaml
    checkpoint: str | None = None                 # dual_encoder: an exported model folder
    batch_size: int = 128
    paragraph_weight: float = 0.0                 # dual_encoder: 0 the sentence alone, 1 its paragraph


@dataclass(frozen=True)
class FusionSpec:
    method: str
    rrf_k: float | str = 60          # a number, or "tune"
    normalization: str = "minmax"
    weights: dict | str | None = None  # {retriever: weight}, or "tune"


@dataclass(frozen=True)
class TuningSpec:
    dataset: str = "reqa_squad"
    pool: str = "train"
    val_fraction: float = 0.1
    split_seed: int = 0
    max_questions: int | None = 1000
    grid_step: float = 0.1
    rrf_k_grid: tuple = (1, 2, 5, 10, 20, 30, 60, 100)


@dataclass(frozen=True)
class RerankerSpec:
    checkpoint: str
    top_k: int = 20
    batch_size: int = 64
    weight: float | str = 1.0  # the reranker's share of the head's score, or "tune"


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    top_k: int
    retrievers: tuple[RetrieverSpec, ...]
    fusion: FusionSpec
    tuning: TuningSpec
    reranker: RerankerSpec | None
    source: str = ""

    @property
    def needs_tuning(self) -> bool:
        return (self.fusion.method == "convex" and self.fusion.weights == "tune") or \
            (self.fusion.method == "rrf" and self.fusion.rrf_k == "tune") or \
            (self.reranker is not None and self.reranker.weight == "tune")

    def to_dict(self) -> dict:
        from dataclasses import asdict

        out = asdict(self)
        out.pop("source")
        return out


def _unknown(source: str, where: str, given, allowed: set) -> None:
    extra = sorted(set(given) - allowed)
    if extra:
        raise PipelineConfigError(source, f"{where}{extra[0]}", "unknown key",
                                  f"use one of {sorted(allowed)}")


def _mapping(source: str, key: str, value) -> dict:
    if not isinstance(value, dict):
        raise PipelineConfigError(source, key, f"{value!r} is not a mapping",
                                  "write it as key: value lines")
    return value


def _positive_int(source: str, key: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PipelineConfigError(source, key, f"{value!r} is not a whole number >= 1",
                                  "give a positive integer")
    return value


def _choice(source: str, key: str, value, allowed) -> str:
    if value not in allowed:
        raise PipelineConfigError(source, key, f"{value!r} is not one of {list(allowed)}",
                                  f"use one of {list(allowed)}")
    return value


def _retriever(source: str, name: str, raw) -> RetrieverSpec:
    raw = _mapping(source, f"retrievers.{name}", raw)
    kind = _choice(source, f"retrievers.{name}.kind", raw.get("kind"), RETRIEVER_KINDS)
    _unknown(source, f"retrievers.{name}.", raw, RETRIEVER_KEYS[kind])
    if kind == "bm25":
        settings = _mapping(source, f"retrievers.{name}.settings", raw.get("settings") or {})
        allowed = set(plain(load_yaml("model/bm25.yaml"))) - {"name"}
        _unknown(source, f"retrievers.{name}.settings.", settings, allowed)
        return RetrieverSpec(name, kind, settings=dict(settings))
    checkpoint = raw.get("checkpoint")
    if not isinstance(checkpoint, str) or not checkpoint:
        raise PipelineConfigError(source, f"retrievers.{name}.checkpoint",
                                  f"{checkpoint!r} is not a folder",
                                  "give the folder of an exported model (rqa export --output, "
                                  "or the `checkpoint` printed by rqa train)")
    weight = raw.get("paragraph_weight", 0.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise PipelineConfigError(source, f"retrievers.{name}.paragraph_weight",
                                  f"{weight!r} is not a number in [0, 1]",
                                  "0: the sentence's vector alone, 1: its paragraph's mean vector")
    return RetrieverSpec(name, kind, checkpoint=checkpoint,
                         batch_size=_positive_int(source, f"retrievers.{name}.batch_size",
                                                  raw.get("batch_size", 128)),
                         paragraph_weight=float(weight))


def _weights(source: str, raw, names: list[str]):
    if raw == "tune" or raw is None:
        return raw
    raw = _mapping(source, "fusion.weights", raw)
    _unknown(source, "fusion.weights.", raw, set(names))
    missing = [n for n in names if n not in raw]
    if missing:
        raise PipelineConfigError(source, f"fusion.weights.{missing[0]}", "missing",
                                  f"give a weight for every retriever {names}, or weights: tune")
    for n, w in raw.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise PipelineConfigError(source, f"fusion.weights.{n}", f"{w!r} is not a weight "
                                      ">= 0", "give a number >= 0")
    if sum(raw.values()) <= 0:
        raise PipelineConfigError(source, "fusion.weights", "all weights are 0",
                                  "give at least one positive weight")
    return {n: float(raw[n]) for n in names}


def parse_pipeline(raw: dict, source: str) -> PipelineConfig:
    """Check a pipeline mapping (see the module docstring) and return its config."""
    raw = _mapping(source, "(top level)", raw)
    _unknown(source, "", raw, TOP_KEYS)
    retrievers_raw = _mapping(source, "retrievers", raw.get("retrievers"))
    if not retrievers_raw:
        raise PipelineConfigError(source, "retrievers", "empty", "name at least one retriever")
    retrievers = tuple(_retriever(source, str(n), r) for n, r in retrievers_raw.items())
    names = [r.name for r in retrievers]
    fusion_raw = _mapping(source, "fusion", raw.get("fusion") or {"method": "none"})
    _unknown(source, "fusion.", fusion_raw, FUSION_KEYS)
    method = _choice(source, "fusion.method", fusion_raw.get("method", "none"), FUSION_METHODS)
    if method == "none" and len(names) > 1:
        raise PipelineConfigError(source, "fusion.method", f"none with {len(names)} retrievers",
                                  "use rrf or convex, or keep one retriever")
    rrf_k = fusion_raw.get("rrf_k", 60)
    if rrf_k != "tune" and (isinstance(rrf_k, bool) or not isinstance(rrf_k, (int, float))
                            or rrf_k < 0):
        raise PipelineConfigError(source, "fusion.rrf_k", f"{rrf_k!r} is not a number >= 0",
                                  "give a number >= 0 (60 is the usual) or tune")
    weights = _weights(source, fusion_raw.get("weights"), names)
    if method == "convex" and weights is None:
        raise PipelineConfigError(source, "fusion.weights", "missing for convex fusion",
                                  "give {retriever: weight} or tune")
    fusion = FusionSpec(method, rrf_k,
                        _choice(source, "fusion.normalization",
                                fusion_raw.get("normalization", "minmax"), NORMALIZATIONS),
                        weights)
    tuning_raw = _mapping(source, "tuning", raw.get("tuning") or {})
    _unknown(source, "tuning.", tuning_raw, TUNING_KEYS)
    tuning = TuningSpec(**{k: tuple(v) if k == "rrf_k_grid" else v
                           for k, v in tuning_raw.items()})
    if not 0 < tuning.grid_step <= 1:
        raise PipelineConfigError(source, "tuning.grid_step", f"{tuning.grid_step!r} is not in "
                                  "(0, 1]", "give e.g. 0.1")
    if tuning.pool not in ("train",):
        raise PipelineConfigError(source, "tuning.pool", f"{tuning.pool!r}: weights are tuned "
                                  "on the validation side of the training file only",
                                  "use pool: train (never a test pool)")
    reranker = None
    if raw.get("reranker") is not None:
        rr = _mapping(source, "reranker", raw["reranker"])
        _unknown(source, "reranker.", rr, RERANKER_KEYS)
        if not isinstance(rr.get("checkpoint"), str):
            raise PipelineConfigError(source, "reranker.checkpoint", "missing",
                                      "give the folder of an exported cross-encoder")
        weight = rr.get("weight", 1.0)
        if weight != "tune" and (isinstance(weight, bool) or not isinstance(weight, int | float)
                                 or not 0 <= weight <= 1):
            raise PipelineConfigError(source, "reranker.weight", f"{weight!r} is neither a "
                                      "number in [0, 1] nor tune",
                                      "1: the reranker's order alone, 0: the fused order, "
                                      "tune: chosen on the validation side")
        reranker = RerankerSpec(rr["checkpoint"],
                                _positive_int(source, "reranker.top_k", rr.get("top_k", 20)),
                                _positive_int(source, "reranker.batch_size",
                                              rr.get("batch_size", 64)),
                                weight if weight == "tune" else float(weight))
    return PipelineConfig(str(raw.get("name", Path(source).stem)),
                          _positive_int(source, "top_k", raw.get("top_k", 100)),
                          retrievers, fusion, tuning, reranker, source)


def load_pipeline(name: str, overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """``conf/pipeline/<name>.yaml`` (or the YAML file ``name``), with ``overrides`` merged
    over its top-level keys (e.g. ``{"reranker": None}``), checked."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        cfg, source = load_yaml_file(path, "pipeline config"), str(path)
        parent = cfg.get("extends")
        if parent is not None and parent not in conf_names("pipeline"):
            raise PipelineConfigError(source, "extends", f"no conf/pipeline/{parent}.yaml",
                                      f"extend one of {conf_names('pipeline')}")
        cfg = merge_extends("pipeline", cfg)
    else:
        if name not in conf_names("pipeline"):
            raise UsageError(f"--pipeline {name}: no conf/pipeline/{name}.yaml (fix: "
                             f"{did_you_mean(name, conf_names('pipeline'))}use one of "
                             f"{conf_names('pipeline')}, or a path to a .yaml file)")
        cfg, source = load_group("pipeline", name), f"conf/pipeline/{name}.yaml"
    raw = plain(cfg)
    raw.update(overrides or {})
    return parse_pipeline(raw, source)
