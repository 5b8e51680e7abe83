"""Compose a pipeline config as experiments are composed (:mod:`.experiment`): a pipeline's
file (``conf/pipeline/<name>.yaml``, a YAML file given by its path, or a mapping) with the
files it ``extends:`` (``conf/pipeline/<parent>.yaml``), merged over ``conf/pipeline.yaml``
key by key (a key that file does not have is an error naming the file, the key and the keys it
may have meant), then ``key=value`` settings (:func:`~.overrides.apply_overrides`), then each
stage block over the settings of its kind (``conf/pipeline/stages/<kind>.yaml``); the values
are checked against ``conf/ranges.yaml`` and each is known with the file it came from, each
layer recorded as it is merged (:class:`~.merge.Composition`). Building the stages is
:mod:`retrieval_qa.pipeline.composition`'s."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import UsageError, did_you_mean
from ..registry import SHORT_NAMES, takes, target_of
from .files import conf_dirs, conf_names, load_yaml, load_yaml_file, reading
from .merge import Composition, check_ranges
from .provenance import layer_keys

__all__ = ["BASE", "RERANKER_KIND", "TUNED", "PipelineConfigError", "compose_pipeline",
           "pipeline_file"]

BASE = "pipeline.yaml"
#: the kind of a ``reranker:`` block that names neither ``kind`` nor ``_target_`` (the
#: configs written before rerankers had kinds)
RERANKER_KIND = "cross_encoder"
_FIX = "check the spelling against conf/pipeline.yaml"
#: the settings that take ``tune`` (chosen on the validation side) besides their own type,
#: also on the command line (``reranker.top_k=tune`` over a pipeline's ``top_k: 10``)
TUNED = {key: ("tune",) for key in ("fusion.weights", "fusion.rrf_k", "reranker.top_k",
                                     "reranker.weight", "reranker.gate")}


class PipelineConfigError(UsageError):
    """A bad pipeline config: names the file, the key and the fix.

    Args:
        source: the file (or the layer) that set the key.
        key: the dotted key.
        problem: what is wrong with it.
        fix: what to write instead.
    """

    def __init__(self, source: str, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{source}: {key}: {problem} (fix: {fix})")


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


def pipeline_file(name: str) -> tuple[str, DictConfig]:
    """A pipeline's file: ``conf/pipeline/<name>.yaml``, or the YAML file ``name``; with the
    name its errors and value sources give it.

    Args:
        name: a file of conf/pipeline/ (without ``.yaml``) or the path of a YAML file.

    Raises:
        UsageError: no such pipeline.
    """
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return str(path), load_yaml_file(path, "pipeline config")
    if name not in conf_names("pipeline"):
        raise UsageError(f"--pipeline {name}: no conf/pipeline/{name}.yaml (fix: "
                         f"{did_you_mean(name, conf_names('pipeline'))}use one of "
                         f"{conf_names('pipeline')}, or a path to a .yaml file)")
    return f"conf/pipeline/{name}.yaml", load_yaml(f"pipeline/{name}.yaml")


def compose_pipeline(top: str, node: DictConfig, overrides: Sequence[str] = ()
                     ) -> tuple[DictConfig, dict[str, str]]:
    """A pipeline's settings composed (see the module docstring) and checked, in its one
    order: conf/pipeline.yaml, the files ``node`` extends (the root parent first), ``node``,
    the command line, each stage block's kind settings under it. Call it (and read ``node``)
    inside :func:`~.files.reading` so each file is read once.

    Args:
        top: the pipeline's file (or the name its errors give a mapping).
        node: its settings.
        overrides: ``key=value`` settings over them.

    Returns:
        The composed config, and each of its dotted keys with the layer that set it.

    Raises:
        PipelineConfigError: a key or value is wrong (named with its file).
    """
    with reading():
        base = load_yaml(BASE)
        open_paths = [k for k in layer_keys(base) if OmegaConf.select(base, k) in (None, {})]
        OmegaConf.set_struct(base, True)
        files = _chain(top, node)
        composition = Composition(_open(base, open_paths), f"conf/{BASE}")
        for label, file in files:
            composition.merge(file, label, _FIX)
            composition.cfg = _open(composition.cfg, open_paths)
        # the stages first, so the command line's values are typed by them
        before = _stages(composition.cfg, composition.layers[1:], top, [])
        composition.command_line(overrides, words=TUNED)
        composition.cfg = _open(composition.cfg, open_paths)
        stage_layers: list = []
        cfg = _stages(composition.cfg, composition.layers[1:], top, stage_layers)
        if cfg["name"] is None:
            cfg["name"] = Path(top).stem
            composition.record((top, ["name"]))
        # a stage's defaults are the source of the keys of its block that no file sets
        given = {k for _, keys in composition.layers[1:] for k in keys}
        composition.record(*[(where, [k for k in keys if not any(
            g == k or g.startswith(k + ".") for g in given)]) for where, keys in stage_layers])
        sources = composition.sources(cfg)
        check_ranges(cfg, before, sources)
        return cfg, sources


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
