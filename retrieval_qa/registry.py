"""Methods and data modules by configuration: a config node's ``_target_`` names the class
(``package.module.Class``) and the other keys are its constructor's keyword arguments.

A method is a LightningModule class with the contract of :class:`~.models.method.Method`;
``rqa train`` reads ``model._target_`` and never names a concrete method, so a new method is
a module file plus a config file (``conf/model/NAME.yaml`` with its ``_target_``). Modules
outside the package are found on ``sys.path`` (e.g. ``PYTHONPATH``)."""

from __future__ import annotations

import importlib
from typing import Any

from omegaconf import DictConfig, OmegaConf


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


def target_of(cfg: DictConfig | dict, where: str) -> Any:
    target = cfg.get("_target_")
    if not target:
        raise KeyError(f"{where} has no _target_ (the class to build, package.module.Name)")
    return locate(target)


def instantiate(cfg: DictConfig | dict, where: str, **extra) -> Any:
    """``target(**values, **extra)``; a wrong keyword is an error naming the config node."""
    cls = target_of(cfg, where)
    values = {**config_values(cfg), **extra}
    try:
        return cls(**values)
    except TypeError as e:
        raise TypeError(f"{where} (_target_ {cls.__module__}.{cls.__qualname__}): {e}; "
                        f"keys given: {sorted(values)}") from e
