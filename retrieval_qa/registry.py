"""Objects by configuration: a config node's ``_target_`` names the callable
(``package.module.Name``) and the other keys are its keyword arguments.

A method is a LightningModule class with the contract of :class:`~.models.method.Method`;
``rqa train`` reads ``model._target_`` and never names a concrete method, so a new method is
a module file plus a config file (``conf/model/NAME.yaml`` with its ``_target_``). The parts
of a method and of a run are built the same way, each from its own block: token encoders
(``model.towers.encoder``), poolers (``model.towers.pooler``), optimisers
(``model.optimizer``), the Trainer's callbacks (``trainer.callbacks.*``) and the experiment
logger (``logger``). A new one is a module file and a block that names it in ``_target_``;
nothing lists it. Modules outside the package are found on ``sys.path`` (e.g. ``PYTHONPATH``).

Blocks written before ``_target_`` name their class by a short name (``type: gru``,
``name: adamw``), as the configs and the exported towers (``model.json``) do:
:data:`SHORT_NAMES` is the one table that turns those into targets."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Collection
from typing import Any

from omegaconf import DictConfig, OmegaConf

_ENCODERS = "retrieval_qa.encoders"

#: kind -> (the key that holds a block's short name, {short name: the block it stands for:
#: its ``_target_`` and fixed arguments}). Only the names that configs and saved exports use;
#: a new class is named by its ``_target_``, not added here.
SHORT_NAMES: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    "encoder": ("type", {
        "pretrained": {"_target_": f"{_ENCODERS}.pretrained_encoder.PretrainedTokenEncoder"},
        **{kind: {"_target_": f"{_ENCODERS}.recurrent_encoder.RecurrentTokenEncoder",
                  "kind": kind} for kind in ("gru", "lstm", "rnn")},
        "transformer": {"_target_": f"{_ENCODERS}.transformer_encoder.TransformerTokenEncoder"},
    }),
    "pooler": ("type", {
        "multihop_attention": {"_target_": f"{_ENCODERS}.poolers.MultiHopSelfAttentionPooler"},
        "mean": {"_target_": f"{_ENCODERS}.poolers.MeanPooler"},
        "cls": {"_target_": f"{_ENCODERS}.poolers.ClsPooler"},
    }),
    "optimizer": ("name", {  # fused kernels: one pass over all parameters (CPU and CUDA)
        "adamw": {"_target_": "torch.optim.AdamW", "fused": True},
        "adam": {"_target_": "torch.optim.Adam", "fused": True},
        "adafactor": {"_target_": "torch.optim.Adafactor"},
        "sgd": {"_target_": "torch.optim.SGD", "momentum": 0.9},
    }),
    "logger": ("name", {
        "csv": {"_target_": "retrieval_qa.training.loggers.csv_logger"},
        "wandb": {"_target_": "retrieval_qa.training.loggers.wandb_logger"},
        "none": {"_target_": "retrieval_qa.training.loggers.no_logger"},
    }),
    "retriever": ("kind", {  # a pipeline's first stages (conf/pipeline)
        "bm25": {"_target_": "retrieval_qa.pipeline.retrievers.BM25Retriever"},
        "dual_encoder": {"_target_": "retrieval_qa.pipeline.retrievers.DenseRetriever"},
    }),
    "reranker": ("kind", {
        "cross_encoder": {"_target_": "retrieval_qa.pipeline.rerankers.CrossEncoderStage"},
    }),
}


def locate(target: str) -> Any:
    """The object named ``package.module.attr``, with an error that says what is missing."""
    module_name, _, attr = target.rpartition(".")
    if not module_name:
        raise ValueError(f"_target_={target!r}: expected a dotted path package.module.Name")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ImportError(f"_target_={target!r}: cannot import {module_name!r} ({e}); is its "
                          "folder on PYTHONPATH?") from e
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise ImportError(f"_target_={target!r}: {module_name} has no {attr!r}") from e


def config_values(cfg: DictConfig | dict) -> dict:
    """A config node as a plain dict, interpolations resolved, ``_target_`` removed."""
    values = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) \
        else dict(cfg)
    values.pop("_target_", None)
    return values


def _short_name(cfg: DictConfig | dict, where: str, kind: str) -> tuple[str, dict[str, Any]]:
    """(the short-name key, the block the short name stands for) of a block without
    ``_target_``."""
    key, names = SHORT_NAMES[kind]
    name = cfg.get(key)
    if name not in names:
        raise ValueError(f"{where}.{key}={name!r}; expected one of {list(names)}, or a "
                         f"_target_ naming the {kind} (package.module.Name)")
    return key, names[name]


def target_of(cfg: DictConfig | dict, where: str, kind: str | None = None) -> Any:
    """What ``cfg`` builds: its ``_target_``, else (with ``kind``) its short name's target."""
    target = cfg.get("_target_")
    if not target and kind is not None:
        target = _short_name(cfg, where, kind)[1]["_target_"]
    if not target:
        raise KeyError(f"{where} has no _target_ (the class to build, package.module.Name)")
    return locate(target)


def takes(target: Any, name: str) -> bool:
    """Whether ``target`` has a keyword parameter ``name`` (or ``**kwargs``)."""
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == name and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) for p in parameters)


def instantiate(cfg: DictConfig | dict, where: str, kind: str | None = None, *,
                shared: Collection[str] = (), **context) -> Any:
    """The object a config block describes: ``target(**keys, **context)``.

    The target is the block's ``_target_``; a block without one names it by the short name
    of ``kind`` (:data:`SHORT_NAMES`). Every key of a ``_target_`` block is an argument (a key
    the target does not take is an error naming the block), except the ``shared`` keys: the
    settings a block holds for other classes too (a towers section's defaults), passed only
    to a target that takes them. A short-named block is such a shared block as a whole (its
    keys are the settings of every short name of its kind; ``hops`` means nothing to a mean
    pooler), plus the fixed arguments of its short name. ``context``: what the caller
    supplies (a pooler's ``hidden_size``, an optimiser's ``params``, the run's folder), given
    to the targets that take it."""
    values, fixed = config_values(cfg), {}
    target = target_of(cfg, where, kind)
    if not cfg.get("_target_"):  # a short name
        key, block = _short_name(cfg, where, kind)
        fixed = {k: v for k, v in block.items() if k != "_target_"}
        values.pop(key)
        shared = values
    kwargs = {**fixed, **{k: v for k, v in values.items() if k not in shared or takes(target, k)},
              **{k: v for k, v in context.items() if takes(target, k)}}
    try:
        return target(**kwargs)
    except (TypeError, ValueError) as e:  # a wrong key or value: say which block holds it
        if type(e) not in (TypeError, ValueError):
            raise
        name = f"{target.__module__}.{getattr(target, '__qualname__', repr(target))}"
        keys = f"; keys given: {sorted(kwargs)}" if isinstance(e, TypeError) else ""
        raise type(e)(f"{where} (_target_ {name}): {e}{keys}") from e
