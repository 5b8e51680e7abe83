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
builder reads conf/ again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError

from .. import config
from ..config import (
    apply_overrides,
    conf_dirs,
    conf_names,
    load_yaml,
    override_value,
    yaml_error_line,
)
from ..errors import InputFileError, OutOfRangeError, UnknownKeyError, UsageError, did_you_mean
from ..ranges import out_of_range
from ..registry import FLAT_SETTINGS, PLACES, SHORT_NAMES, resolve_blocks
from .provenance import COMMAND_LINE, leaves, value_sources

__all__ = ["Composed", "check_ranges", "compose", "compose_group", "compose_traced",
           "experiment_profiles", "load_experiment", "load_group", "merge_strict"]


def _set_whole_blocks(base: DictConfig, extra: DictConfig, prefix: str = "") -> None:
    """A block of ``extra`` that names a class (``_target_``) other than the block of ``base``
    at its place names (or where ``base`` has none) holds that class's settings whole: it is
    set as it is, not merged key by key into the other class's settings (whose keys do not
    apply, and whose struct would refuse the new ones). So an experiment adds a pooler,
    callback or logger of its own by a block that names it."""
    for key, node in extra.items():
        if not isinstance(node, DictConfig):
            continue
        path = f"{prefix}{key}"
        here = OmegaConf.select(base, path, default=None)
        target = node.get("_target_")
        if target and not (isinstance(here, DictConfig) and here.get("_target_") == target):
            with open_dict(base):
                OmegaConf.update(base, path, node, merge=False)
        elif isinstance(here, DictConfig):
            _set_whole_blocks(base, node, path + ".")


def merge_strict(base: DictConfig, extra, where: str,
                 fix: str = "check the spelling against conf/train.yaml and its groups"
                 ) -> DictConfig:
    """``extra`` merged over ``base`` (a struct config: a key it does not have is an
    :class:`UnknownKeyError` naming ``where``, the key, the keys it may have meant and
    ``fix``); its blocks that name another class are set whole (:func:`_set_whole_blocks`)."""
    if isinstance(extra, DictConfig):
        _set_whole_blocks(base, extra)
    try:
        return OmegaConf.merge(base, extra)
    except ConfigKeyError as e:
        key = f"{e.full_key}: " if e.full_key and e.full_key != e.key else ""
        raise UnknownKeyError(f"{where}: {key}{e.msg.splitlines()[0]} (fix: {fix})") from e


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
    if not parent:
        return cfg
    base = load_experiment(parent)
    _set_whole_blocks(base, cfg)
    return OmegaConf.merge(base, cfg)


@dataclass
class Composed:
    """A composed config with what its composition knew: the ``overrides`` it was given and
    the profile block it merged (``None`` for ``paper``), so the run reports the profile's
    settings without reading the experiment file again."""

    cfg: DictConfig
    overrides: list[str]
    profile_block: DictConfig | None = None
    #: ``{place: "key: short name"}`` of the blocks whose short name composition resolved
    resolved: dict[str, str] = field(default_factory=dict)

    def sources(self) -> dict[str, str]:
        """Where each value came from (:func:`.provenance.value_sources`); a key that a short
        name's resolution added (``_target_``, a fixed argument) names that short name."""
        from .provenance import value_sources

        return value_sources(self.cfg, self.overrides, self.resolved)


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
    """:func:`compose`, with the profile block it merged and the overrides (:class:`Composed`)."""
    picks = {k: v for k, v in (o.split("=", 1) for o in overrides if "=" in o)}
    base = load_yaml("train.yaml")
    groups = dict(base.pop("defaults"))
    experiment_name = picks.get("experiment")
    if not experiment_name:
        names = conf_names("experiment")
        raise UsageError(f"say which experiment: experiment=NAME, one of {names}")
    experiment = load_experiment(experiment_name)
    groups.update(experiment.pop("defaults", {}))
    groups.update({g: picks[g] for g in groups if g in picks})
    # a group set to null is given whole by the experiment file (e.g. a new method's model
    # settings next to its experiment: one config file)
    inline = {g: experiment.pop(g, None) for g, name in groups.items() if name is None}
    missing = [g for g, node in inline.items() if node is None]
    if missing:
        raise UsageError(f"conf/experiment/{experiment_name}.yaml sets the groups {missing} to "
                         "null but does not give them: add them to the file or name a group file")
    cfg = OmegaConf.merge(base, {g: load_group(g, name) for g, name in groups.items()
                                 if name is not None}, inline)
    OmegaConf.set_struct(cfg, True)
    profiles = experiment.pop("profiles", {})
    cfg = merge_strict(cfg, experiment, f"conf/experiment/{experiment_name}.yaml")
    profile = picks.get("profile", cfg.profile)
    block = None
    if profile != "paper":
        if profile not in profiles:
            raise UsageError(f"experiment {experiment_name!r} has no profile {profile!r}; "
                             f"{did_you_mean(profile, ['paper', *profiles])}"
                             f"profiles: ['paper', {', '.join(map(repr, profiles))}]")
        block = profiles[profile]
        cfg = merge_strict(cfg, block, f"profile {profile!r} of {experiment_name}")
    rest = [o for o in overrides if o.split("=", 1)[0] not in (*groups, "experiment")]
    files = cfg  # before the command line's settings: the values its fixes suggest
    cfg = apply_overrides(cfg, rest)
    cfg.experiment = experiment_name
    cfg.profile = profile
    _check_values(cfg, files, list(overrides))
    resolved = resolve_blocks(cfg)  # after the checks: a mistyped value fails before torch loads
    if block is not None:
        block = _in_resolved_terms(block, cfg, resolved)
    return Composed(cfg, list(overrides), block, resolved)


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
    node = load_group(group, name)
    OmegaConf.set_struct(node, True)
    for extra in overrides:
        node = merge_strict(node, OmegaConf.create(dict(extra)), f"conf/{group}/{name}.yaml")
    composed = OmegaConf.create({group: node})
    resolve_blocks(composed)
    return composed[group]


def _check_values(cfg: DictConfig, files: DictConfig, overrides: list[str]) -> None:
    """The values that types cannot check and that would fail only after the run folder is
    written: the ranges of the numeric settings (conf/ranges.yaml), the thread count and a
    ``resume`` checkpoint. ``files``: the config before the command line's settings."""
    from ..runtime import resolve_threads

    check_ranges(cfg, files, value_sources(cfg, overrides))
    resolve_threads(cfg.threads)
    if cfg.resume not in ("auto", "never") and not Path(str(cfg.resume)).is_file():
        raise UsageError(f"resume={cfg.resume}: no such checkpoint (fix: give the path of a "
                         "Lightning .ckpt, or resume=auto to continue from the run folder's "
                         "last.ckpt, or resume=never)")


def check_ranges(cfg: DictConfig, files: DictConfig, sources: dict[str, str]) -> None:
    """An :class:`OutOfRangeError` for the first value outside its range, naming where it was
    set (``sources``: each key's, :mod:`.provenance`) and the fix: on the command line, the
    value the config files give (``files``: the config before the command line's settings)
    when that one is in range; in a file, that file."""
    found = out_of_range(cfg)
    if found is None:
        return
    key, value, rule = found
    parts = key.split(".")
    source = next((sources[k] for n in range(len(parts), 0, -1)
                   if (k := ".".join(parts[:n])) in sources), "conf/")
    allowed = (f"a list of values that are each {rule.allowed}" if isinstance(value, list)
               else rule.allowed)
    if source == COMMAND_LINE:
        where, fix = "set on the command line", f"give {key} {allowed}"
        before = OmegaConf.select(files, key, default=None, throw_on_resolution_failure=False)
        if isinstance(before, ListConfig):
            before = OmegaConf.to_container(before)
        if before is not None and not isinstance(before, DictConfig) and rule.allows(before):
            fix += f", e.g. {key}={override_value(before)}, its value in the config files"
    else:
        where, fix = f"set in {source}", f"set {key} in {source} to {allowed}"
    raise OutOfRangeError(key, override_value(value), where, allowed, rule.where, fix)


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


def compose_file(settings: DictConfig, source: str, overrides: Sequence[str] = ()) -> DictConfig:
    """A settings file of its own (``source``, read as ``settings``; e.g. the reranker's
    training, conf/pipeline/training/reranker.yaml) with ``key=value`` ``overrides``: its
    keys strict, its values checked against conf/ranges.yaml."""
    from .provenance import layer_keys, override_keys, resolve_sources

    cfg = apply_overrides(settings, overrides)
    check_ranges(cfg, settings, resolve_sources(cfg, [(source, layer_keys(settings)),
                                                      (COMMAND_LINE, override_keys(overrides))]))
    return cfg
