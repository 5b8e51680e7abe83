"""Configuration: YAML files under ``conf/`` are the single source of every setting;
``key=value`` overrides from the command line must name existing keys."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError


def conf_dir() -> Path:
    return Path(os.environ.get("RQA_CONF_DIR") or Path(__file__).resolve().parents[1] / "conf")


def load_yaml(relative: str) -> DictConfig:
    path = conf_dir() / relative
    if not path.is_file():
        options = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
        raise FileNotFoundError(f"config {path} not found; available in {path.parent}: {options}")
    cfg = OmegaConf.load(path)
    assert isinstance(cfg, DictConfig)
    return cfg


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
