"""Compose a training config from conf/: groups, experiment, profile, overrides."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

from ..config import apply_overrides, conf_names, load_yaml


def _merge_strict(base: DictConfig, extra, where: str) -> DictConfig:
    try:
        return OmegaConf.merge(base, extra)
    except ConfigKeyError as e:
        raise KeyError(f"{where}: {e.msg.splitlines()[0]} (check the spelling against "
                       f"conf/train.yaml and its groups)") from e


def load_group(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml; a file with ``extends: OTHER`` is merged over OTHER's."""
    cfg = load_yaml(f"{group}/{name}.yaml")
    parent = cfg.pop("extends", None)
    return OmegaConf.merge(load_group(group, parent), cfg) if parent else cfg


def compose(overrides: Sequence[str]) -> DictConfig:
    """``overrides`` as on the command line: ``experiment=NAME``, ``profile=cpu``, and
    ``key=value`` settings; group choices as ``data=NAME`` / ``model=NAME``. An experiment's
    ``defaults`` may set a group to null and give that group's settings itself."""
    picks = {k: v for k, v in (o.split("=", 1) for o in overrides if "=" in o)}
    base = load_yaml("train.yaml")
    groups = dict(base.pop("defaults"))
    experiment_name = picks.get("experiment")
    if not experiment_name:
        names = conf_names("experiment")
        raise ValueError(f"say which experiment: experiment=NAME, one of {names}")
    experiment = load_group("experiment", experiment_name)
    groups.update(experiment.pop("defaults", {}))
    groups.update({g: picks[g] for g in groups if g in picks})
    # a group set to null is given whole by the experiment file (e.g. a new method's model
    # settings next to its experiment: one config file)
    inline = {g: experiment.pop(g, None) for g, name in groups.items() if name is None}
    missing = [g for g, node in inline.items() if node is None]
    if missing:
        raise ValueError(f"conf/experiment/{experiment_name}.yaml sets the groups {missing} to "
                         "null but does not give them: add them to the file or name a group file")
    cfg = OmegaConf.merge(base, {g: load_group(g, name) for g, name in groups.items()
                                 if name is not None}, inline)
    OmegaConf.set_struct(cfg, True)
    profiles = experiment.pop("profiles", {})
    cfg = _merge_strict(cfg, experiment, f"conf/experiment/{experiment_name}.yaml")
    profile = picks.get("profile", cfg.profile)
    if profile != "paper":
        if profile not in profiles:
            raise ValueError(f"experiment {experiment_name!r} has no profile {profile!r}; "
                             f"profiles: ['paper', {', '.join(map(repr, profiles))}]")
        cfg = _merge_strict(cfg, profiles[profile], f"profile {profile!r} of {experiment_name}")
    rest = [o for o in overrides if o.split("=", 1)[0] not in (*groups, "experiment")]
    cfg = apply_overrides(cfg, rest)
    cfg.experiment = experiment_name
    cfg.profile = profile
    return cfg
