"""Configuration: YAML files under ``conf/`` are the single source of every setting;
``key=value`` overrides from the command line must name existing keys.

Code that needs a default reads it from ``conf/`` (:func:`model_defaults`) instead of keeping
a Python copy, so each setting is written in exactly one place."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError


def conf_dir() -> Path:
    return Path(os.environ.get("RQA_CONF_DIR") or Path(__file__).resolve().parents[1] / "conf")


def conf_dirs() -> list[Path]:
    """Where configs are looked up, first match wins: the folders of ``$RQA_CONF_PATH``
    (``os.pathsep``-separated; a project's own methods and experiments), then :func:`conf_dir`."""
    extra = [Path(d) for d in os.environ.get("RQA_CONF_PATH", "").split(os.pathsep) if d]
    return [*extra, conf_dir()]


def conf_names(group: str) -> list[str]:
    """The config names of a group (``experiment``, ``model``, ...) across :func:`conf_dirs`."""
    return sorted({p.stem for d in conf_dirs() for p in (d / group).glob("*.yaml")})


def load_yaml(relative: str) -> DictConfig:
    path = next((d / relative for d in conf_dirs() if (d / relative).is_file()), None)
    if path is None:
        group = Path(relative).parent.as_posix()
        raise FileNotFoundError(f"config {relative} not found in {[str(d) for d in conf_dirs()]}; "
                                f"available in {group}/: {conf_names(group)}")
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    return cfg


def load_group(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml; a file with ``extends: OTHER`` is merged over OTHER's (of the
    same group)."""
    cfg = load_yaml(f"{group}/{name}.yaml")
    parent = cfg.pop("extends", None)
    return OmegaConf.merge(load_group(group, parent), cfg) if parent else cfg


@functools.lru_cache(maxsize=32)
def _model_defaults(folders: tuple[str, ...], name: str) -> dict[str, Any]:
    del folders  # the cache key only: a later RQA_CONF_PATH or RQA_CONF_DIR is another search
    return OmegaConf.to_container(load_group("model", name), resolve=False)  # type: ignore[return-value]


def model_defaults(name: str) -> dict[str, Any]:
    """The settings of ``conf/model/<name>.yaml`` (with its ``extends:``) as a plain dict, the
    defaults of the builders that take a section of it, e.g.
    ``model_defaults("dual_encoder")["towers"]``. Interpolations (``${model...}``) are left as
    written; read only sections that have none. A fresh copy on every call."""
    return copy.deepcopy(_model_defaults(tuple(str(d) for d in conf_dirs()), name))


def plain(cfg: Any) -> dict[str, Any]:
    """A plain dict from a dict, an OmegaConf DictConfig (interpolations resolved) or None."""
    if cfg is None:
        return {}
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise TypeError(f"expected a dict or DictConfig, got {type(cfg).__name__}")


def apply_overrides(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """Apply ``a.b=value`` overrides (values parsed as YAML); a key that does not exist in the
    config is an error naming it, so a misspelt setting never passes silently."""
    OmegaConf.set_struct(cfg, True)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value")
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([item]))
        except ConfigKeyError as e:
            raise KeyError(f"unknown config key {item.split('=', 1)[0]!r} in override "
                           f"{item!r}: {e.msg.splitlines()[0]}") from e
    return cfg
