"""Compose a training config from conf/: groups, experiment, profile, overrides.

Experiment files inherit: ``extends: OTHER`` merges the file over conf/experiment/OTHER.yaml
(profiles included), so a file holds only what differs from its parent. A profile block may
start from shared reductions of the ``profile`` group: ``extends: NAME`` (or a list, merged
in order) in ``profiles.<profile>`` puts conf/profile/NAME.yaml under that block, e.g. the
CPU reductions that many experiments share (conf/profile/cpu.yaml)."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

from .. import config
from ..config import apply_overrides, conf_names, load_yaml

__all__ = ["compose", "load_experiment", "load_group"]


def _merge_strict(base: DictConfig, extra, where: str) -> DictConfig:
    try:
        return OmegaConf.merge(base, extra)
    except ConfigKeyError as e:
        raise KeyError(f"{where}: {e.msg.splitlines()[0]} (check the spelling against "
                       f"conf/train.yaml and its groups)") from e


def load_group(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml with its ``extends:`` chain; an experiment as
    :func:`load_experiment` gives it (profile blocks with their shared reductions)."""
    return load_experiment(name) if group == "experiment" else config.load_group(group, name)


def _profile_block(block: DictConfig, where: str) -> DictConfig:
    """A profile block with its ``extends:`` (conf/profile/NAME.yaml, or a list of names)
    merged under it."""
    parents = block.pop("extends", None)
    if parents is None:
        return block
    names = [parents] if isinstance(parents, str) else list(parents)
    try:
        shared = [load_group("profile", str(n)) for n in names]
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{where}: {e}") from e
    # the block first, so its keys keep their order (what the run reports lists), then the
    # shared settings under it, then the block's values over them
    return OmegaConf.merge(block, *shared, block)


def load_experiment(name: str) -> DictConfig:
    """conf/experiment/<name>.yaml with its ``extends:`` chain merged (the file over its
    parent's) and the ``extends:`` of its profile blocks resolved, file by file, before the
    merge, so a child's profile adds to its parent's."""
    cfg = load_yaml(f"experiment/{name}.yaml")
    parent = cfg.pop("extends", None)
    for profile, block in list(cfg.get("profiles", {}).items()):
        cfg.profiles[profile] = _profile_block(block, f"conf/experiment/{name}.yaml, "
                                                      f"profile {profile!r}")
    return OmegaConf.merge(load_experiment(parent), cfg) if parent else cfg


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
    experiment = load_experiment(experiment_name)
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
