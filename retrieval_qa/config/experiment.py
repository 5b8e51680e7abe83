"""Compose a training config from conf/: groups, experiment, profile, overrides.

Experiment files inherit: ``extends: OTHER`` merges the file over conf/experiment/OTHER.yaml
(profiles included), so a file holds only what differs from its parent. A profile block may
start from shared reductions of the ``profile`` group: ``extends: NAME`` (or a list, merged
in order) in ``profiles.<profile>`` puts conf/profile/NAME.yaml under that block, e.g. the
CPU reductions that many experiments share (conf/profile/cpu.yaml).

An experiment or profile block that names a class (``_target_``) other than the block it
lands on (a pooler of its own over ``model.towers.pooler``, a new ``trainer.callbacks`` entry)
is set whole instead of merged key by key: its keys are that class's settings.

Last, the blocks named by a short name (``type: gru``, ``name: adamw``) are resolved to their
``_target_`` and the arguments their class takes (:func:`~retrieval_qa.registry.
resolve_blocks`): the composed config is what is built, and it is passed down whole; no
builder reads conf/ again.

A composition reads each file once (:func:`~.files.reading`) and records each layer as it
merges it (:class:`~.merge.Composition`), so :meth:`Composed.sources` says where each value
came from without reading anything again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import InputFileError, UsageError, did_you_mean
from ..registry import FLAT_SETTINGS, PLACES, SHORT_NAMES, resolve_blocks
from .files import (
    chain,
    conf_dirs,
    conf_names,
    load_chain,
    load_yaml,
    merge_chain,
    reading,
    yaml_error_line,
)
from .merge import Composition, _set_whole_blocks, check_ranges, merge_strict
from .provenance import layer_keys, leaves, resolve_sources
from .settings import threads_setting

__all__ = ["Composed", "compose", "compose_group", "compose_traced", "experiment_profiles",
           "load_experiment", "load_group"]

Layers = list[tuple[str, list[str]]]


@dataclass
class _Experiment:
    """An experiment file with its ``extends:`` chain merged, and the layers it was made of:
    ``layers``, its files' settings (the root parent first); ``profiles``, each profile's
    (per file, the shared profiles its block extends, then the block)."""

    cfg: DictConfig
    layers: Layers
    profiles: dict[str, Layers]


def load_group(group: str, name: str) -> DictConfig:
    """conf/<group>/<name>.yaml with its ``extends:`` chain; an experiment as
    :func:`load_experiment` gives it (profile blocks with their shared reductions).

    Args:
        group: the folder of conf/.
        name: the file's name in it.
    """
    return load_experiment(name) if group == "experiment" else load_chain(group, name)


def _profile_block(block: DictConfig, where: str, label: str) -> tuple[DictConfig, Layers]:
    """A profile block with its ``extends:`` (conf/profile/NAME.yaml, or a list of names)
    merged under it, and the layers of the shared files (``label``: the block's source)."""
    parents = block.pop("extends", None)
    if parents is None:
        return block, []
    names = [parents] if isinstance(parents, str) else list(parents)
    try:
        shared = [chain("profile", str(n)) for n in names]
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{where}: {e}") from e
    layers = [(f"conf/profile/{n}.yaml ({label} extends it)", layer_keys(found[-1][1]))
              for n, found in zip(names, shared, strict=True)]
    # the block first, so its keys keep their order (what the run reports lists), then the
    # shared settings under it, then the block's values over them
    return OmegaConf.merge(block, *(merge_chain(f) for f in shared), block), layers


def _experiment(name: str) -> _Experiment:
    """conf/experiment/<name>.yaml with its ``extends:`` chain merged (each file over its
    parent's) and the ``extends:`` of its profile blocks resolved, file by file, before the
    merge, so a child's profile adds to its parent's; with the layers it was made of."""
    merged, layers, profiles = None, [], {}
    for file, cfg in chain("experiment", name):
        where = f"conf/experiment/{file}.yaml"
        layers.append((where if file == name else
                       f"{where} (extended by conf/experiment/{name}.yaml)",
                       layer_keys(cfg, skip=("defaults", "profiles"))))
        for profile, block in list(cfg.get("profiles", {}).items()):
            label = f"profile {profile} ({where})"
            own = (label, layer_keys(block, skip=("extends",)))
            cfg.profiles[profile], shared = _profile_block(
                block, f"{where}, profile {profile!r}", label)
            profiles.setdefault(profile, []).extend([*shared, own])
        if merged is not None:
            _set_whole_blocks(merged, cfg)
            cfg = OmegaConf.merge(merged, cfg)
        merged = cfg
    return _Experiment(merged, layers, profiles)


def load_experiment(name: str) -> DictConfig:
    """conf/experiment/<name>.yaml with its ``extends:`` chain merged (the file over its
    parent's) and the ``extends:`` of its profile blocks resolved, file by file, before the
    merge, so a child's profile adds to its parent's.

    Args:
        name: the experiment's file in conf/experiment.
    """
    with reading():
        return _experiment(name).cfg

@dataclass
class Composed:
    """A composed config with what its composition knew: the ``overrides`` it was given and
    the profile block it merged (``None`` for ``paper``), so the run reports the profile's
    settings without reading the experiment file again.

    Args:
        cfg: the composed config.
        overrides: the ``key=value`` strings it was composed with.
        profile_block: the profile's settings as merged, in the resolved config's terms.
        resolved: ``{place: "key: short name"}`` of the blocks whose short name composition
            resolved.
        layers: (where, the dotted keys it set) of each layer, in the order merged.
    """

    cfg: DictConfig
    overrides: list[str]
    profile_block: DictConfig | None = None
    #: ``{place: "key: short name"}`` of the blocks whose short name composition resolved
    resolved: dict[str, str] = field(default_factory=dict)
    #: the layers merged, each as (where, the dotted keys it set), in order
    layers: Layers = field(default_factory=list)

    def sources(self) -> dict[str, str]:
        """Where each value came from (:func:`.provenance.resolve_sources` over the layers
        recorded as they were merged); a key that a short name's resolution added
        (``_target_``, a fixed argument) names that short name."""
        return resolve_sources(self.cfg, self.layers, self.resolved)


def compose(overrides: Sequence[str]) -> DictConfig:
    """``overrides`` as on the command line: ``experiment=NAME``, ``profile=cpu``, and
    ``key=value`` settings; group choices as ``data=NAME`` / ``model=NAME``. An experiment's
    ``defaults`` may set a group to null and give that group's settings itself.

    Args:
        overrides: the ``key=value`` strings; ``experiment=NAME`` is required.

    Returns:
        The composed, checked config (short names resolved to ``_target_``), as ``rqa
        train`` builds it.

    Example:

        >>> cfg = compose(["experiment=dual_gru", "profile=cpu", "model.loss.scale=2.0"])
        >>> cfg.experiment, cfg.profile, cfg.model.loss.scale
        ('dual_gru', 'cpu', 2.0)
        >>> cfg.model.towers.encoder._target_
        'retrieval_qa.encoders.recurrent_encoder.RecurrentTokenEncoder'
    """
    return compose_traced(overrides).cfg


def compose_traced(overrides: Sequence[str]) -> Composed:
    """:func:`compose`, with the profile block it merged, the overrides and the layers it
    merged (:class:`Composed`). Each config file is read once.

    Args:
        overrides: as :func:`compose`'s.
    """
    with reading():
        return _compose(list(overrides))


def _compose(overrides: list[str]) -> Composed:
    """The merge, in its one order: conf/train.yaml, the group files (each over the files it
    ``extends:``), the groups the experiment gives itself, the experiment (its parents
    first), its profile (per file: the shared profiles its block extends, then the block),
    the command line; each layer recorded as it is merged."""
    picks = {k: v for k, v in (o.split("=", 1) for o in overrides if "=" in o)}
    base = load_yaml("train.yaml")
    groups = dict(base.pop("defaults"))
    experiment_name = picks.get("experiment")
    if not experiment_name:
        names = conf_names("experiment")
        raise UsageError(f"say which experiment: experiment=NAME, one of {names}")
    found = _experiment(experiment_name)
    experiment = found.cfg
    groups.update(experiment.pop("defaults", {}))
    groups.update({g: picks[g] for g in groups if g in picks})
    # a group set to null is given whole by the experiment file (e.g. a new method's model
    # settings next to its experiment: one config file)
    inline = {g: experiment.pop(g, None) for g, name in groups.items() if name is None}
    missing = [g for g, node in inline.items() if node is None]
    if missing:
        raise UsageError(f"conf/experiment/{experiment_name}.yaml sets the groups {missing} to "
                         "null but does not give them: add them to the file or name a group file")
    composition = Composition(base, "conf/train.yaml")
    chosen, group_layers = {}, []
    for group, name in groups.items():
        if name is None:
            continue
        found_files = chain(group, str(name)) if group != "experiment" else None
        chosen[group] = merge_chain(found_files) if found_files else load_group(group, name)
        for file, node in found_files or []:
            where = f"conf/{group}/{file}.yaml"
            if file != str(name):
                where += f" (extended by conf/{group}/{name}.yaml)"
            group_layers.append((where, layer_keys(node, f"{group}.")))
    composition.add(chosen, inline, layers=group_layers)
    profiles = experiment.pop("profiles", {})
    composition.merge(experiment, f"conf/experiment/{experiment_name}.yaml",
                      layers=found.layers)
    profile = picks.get("profile", composition.cfg.profile)
    block = None
    if profile != "paper":
        if profile not in profiles:
            raise UsageError(f"experiment {experiment_name!r} has no profile {profile!r}; "
                             f"{did_you_mean(profile, ['paper', *profiles])}"
                             f"profiles: ['paper', {', '.join(map(repr, profiles))}]")
        block = profiles[profile]
        composition.merge(block, f"profile {profile!r} of {experiment_name}",
                          layers=found.profiles.get(profile, []))
    rest = [o for o in overrides if o.split("=", 1)[0] not in (*groups, "experiment")]
    files_cfg = composition.cfg  # before the command line's settings: the values its fixes suggest
    composition.command_line(rest, given=[o for o in overrides if "=" in o
                                          and o.split("=", 1)[0] not in groups])
    cfg = composition.cfg
    cfg.experiment = experiment_name
    cfg.profile = profile
    _check_values(cfg, files_cfg, composition.sources())
    resolved = resolve_blocks(cfg)  # after the checks: a mistyped value fails before torch loads
    if block is not None:
        block = _in_resolved_terms(block, cfg, resolved)
    return Composed(cfg, overrides, block, resolved, composition.layers)


_ABSENT = object()


def _in_resolved_terms(block: DictConfig, cfg: DictConfig, resolved: dict[str, str]
                       ) -> DictConfig:
    """A profile block's settings where the resolved config holds them: a short name as its
    ``_target_``, a flat short name's setting in its block; a setting of a class the config
    does not build (a GRU's ``num_heads``) is not in effect and left out."""
    def target(place: str, name) -> str:
        return SHORT_NAMES[PLACES[place]][1].get(name, {}).get("_target_", name)

    out = OmegaConf.create()
    for key, value in leaves(block):
        parent, _, leaf = key.rpartition(".")
        if key in resolved and PLACES[key] in FLAT_SETTINGS:  # refiner: convrr
            key, value = f"{key}._target_", target(key, value)
        elif OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT:
            if parent in resolved and leaf == SHORT_NAMES[PLACES[parent]][0]:  # type: gru
                key, value = f"{parent}._target_", target(parent, value)
            else:  # a flat short name's setting, in its block now, or a key left out
                key = next((f"{p}.{leaf}" for p in resolved if p.rpartition(".")[0] == parent
                            and leaf in FLAT_SETTINGS.get(PLACES[p], ())), None)
                if key is None or OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT:
                    continue
        OmegaConf.update(out, key, value, force_add=True)
    return out


def compose_group(group: str, name: str, *overrides: Mapping) -> DictConfig:
    """conf/<group>/<name>.yaml (with its ``extends:``) and ``overrides`` merged over it in
    order (a key the file lacks is an error), its short names resolved: a part of a config
    that code outside ``rqa train`` builds (a bench's towers), composed as ``rqa train``
    composes it, e.g. ``build_dual_towers(compose_group("model", "dual_encoder",
    {"towers": {"pooler": {"type": "mean"}}}).towers)``.

    Args:
        group: the conf/ group (``model``, ``data``, ``eval``, ...).
        name: the file's name in the group.
        overrides: mappings merged over the file in order (nested dicts merge key by key).

    Example:

        >>> model = compose_group("model", "dual_encoder", {"towers": {"pooler": {"type": "mean"}}})
        >>> model.towers.pooler._target_
        'retrieval_qa.encoders.poolers.MeanPooler'
        >>> compose_group("model", "dual_encoder", {"towers": {"polar": {}}})
        Traceback (most recent call last):
        ...
        retrieval_qa.errors.UnknownKeyError: ...
    """
    with reading():
        node = load_group(group, name)
    OmegaConf.set_struct(node, True)
    for extra in overrides:
        node = merge_strict(node, OmegaConf.create(dict(extra)), f"conf/{group}/{name}.yaml")
    composed = OmegaConf.create({group: node})
    resolve_blocks(composed)
    return composed[group]


def _check_values(cfg: DictConfig, files_cfg: DictConfig, sources: dict[str, str]) -> None:
    """The values that types cannot check and that would fail only after the run folder is
    written: the ranges of the numeric settings (conf/ranges.yaml), the thread count and a
    ``resume`` checkpoint. ``files_cfg``: the config before the command line's settings;
    ``sources``: each key's source."""
    check_ranges(cfg, files_cfg, sources)
    threads_setting(cfg.threads)
    if cfg.resume not in ("auto", "never") and not Path(str(cfg.resume)).is_file():
        raise UsageError(f"resume={cfg.resume}: no such checkpoint (fix: give the path of a "
                         "Lightning .ckpt, or resume=auto to continue from the run folder's "
                         "last.ckpt, or resume=never)")


def experiment_profiles() -> dict[str, list[str]]:
    """Each experiment of conf/experiment/ (and $RQA_CONF_PATH) with the profiles it offers
    (``paper`` and its ``profiles:`` blocks, its ``extends:`` parents' included), read
    without composing anything (for ``rqa train --help``)."""
    import yaml

    def read(name: str) -> dict:
        path = next((d / "experiment" / f"{name}.yaml" for d in conf_dirs()
                     if (d / "experiment" / f"{name}.yaml").is_file()), None)
        if path is None:
            return {}
        try:  # PyYAML's C loader: a tenth of OmegaConf's time, for a --help
            raw = yaml.load(path.read_text(encoding="utf-8"),
                            Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as e:
            raise InputFileError("config file", path, f"not valid YAML ({yaml_error_line(e)})",
                                 "repair the YAML at that line") from e
        return raw if isinstance(raw, dict) else {}

    out = {}
    for name in conf_names("experiment"):
        profiles, seen, node = ["paper"], set(), name
        while node and node not in seen:
            seen.add(node)
            raw = read(node)
            profiles += [p for p in raw.get("profiles") or {} if p not in profiles]
            node = raw.get("extends")
        out[name] = profiles
    return out
