"""The steps every composition is made of, experiments' (:mod:`.experiment`) and pipelines'
(:mod:`.pipeline`) alike: a base file, then layers merged over it in order (config files,
an experiment's profile, ``key=value`` settings), each recorded with the keys it sets as it
is merged (:class:`Composition`: where each value came from is known without reading a file
again), then the values checked against ``conf/ranges.yaml`` (:func:`check_ranges`) naming
the layer that set the value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigKeyError

from ..errors import OutOfRangeError, UnknownKeyError
from .overrides import apply_overrides, override_value
from .provenance import COMMAND_LINE, layer_keys, override_keys, resolve_sources
from .ranges import out_of_range

__all__ = ["Composition", "check_ranges", "compose_file", "merge_strict"]

#: the fix an unknown key of an experiment's layer suggests
FIX = "check the spelling against conf/train.yaml and its groups"


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


def merge_strict(base: DictConfig, extra, where: str, fix: str = FIX) -> DictConfig:
    """``extra`` merged over ``base`` (a struct config: a key it does not have is an
    :class:`UnknownKeyError` naming ``where``, the key, the keys it may have meant and
    ``fix``); its blocks that name another class are set whole (:func:`_set_whole_blocks`).

    Args:
        base: the config merged so far (struct).
        extra: the layer merged over it (a DictConfig or a mapping).
        where: the layer's source, for the error.
        fix: the fix the error suggests.
    """
    if isinstance(extra, DictConfig):
        _set_whole_blocks(base, extra)
    try:
        return OmegaConf.merge(base, extra)
    except ConfigKeyError as e:
        key = f"{e.full_key}: " if e.full_key and e.full_key != e.key else ""
        raise UnknownKeyError(f"{where}: {key}{e.msg.splitlines()[0]} (fix: {fix})") from e


class Composition:
    """One composition in progress: the config merged so far (:attr:`cfg`) and its layers,
    each recorded as it is merged, in that order, as (where, the dotted keys it sets)
    (:attr:`layers`); :meth:`sources` says where each value came from.

    Args:
        base: the settings everything is merged over (a struct config after the first
            strict merge).
        where: the base's source (``conf/train.yaml``).
    """

    def __init__(self, base: DictConfig, where: str) -> None:
        self.cfg = base
        self.layers: list[tuple[str, list[str]]] = [(where, layer_keys(base))]

    def record(self, *layers: tuple[str, Sequence[str]]) -> None:
        """Record layers merged (or set) by the caller, in the order they were.

        Args:
            layers: (where, the dotted keys it sets) of each.
        """
        self.layers += [(where, list(keys)) for where, keys in layers]

    def add(self, *nodes, layers: Sequence[tuple[str, Sequence[str]]]) -> DictConfig:
        """``nodes`` merged over the config as they are (new keys allowed: the groups of an
        experiment), the config made struct after; ``layers`` recorded.

        Args:
            nodes: the settings merged, in order.
            layers: (where, the dotted keys it sets) of each file they were made of.
        """
        self.cfg = OmegaConf.merge(self.cfg, *nodes)
        OmegaConf.set_struct(self.cfg, True)
        self.record(*layers)
        return self.cfg

    def merge(self, node, where: str, fix: str = FIX,
              layers: Sequence[tuple[str, Sequence[str]]] | None = None) -> DictConfig:
        """``node`` merged over the config strictly (:func:`merge_strict`) and recorded.

        Args:
            node: the layer's settings.
            where: its source, for an unknown key's error (and its record).
            fix: the fix an unknown key's error suggests.
            layers: what is recorded, when ``node`` was made of several files (a profile
                block and the shared profiles it extends); None: (``where``, its keys).
        """
        self.cfg = merge_strict(self.cfg, node, where, fix)
        self.record(*(layers if layers is not None else [(where, layer_keys(node))]))
        return self.cfg

    def command_line(self, overrides: Sequence[str], given: Sequence[str] | None = None,
                     words: Mapping[str, Sequence[str]] | None = None) -> DictConfig:
        """``key=value`` ``overrides`` applied (:func:`~.overrides.apply_overrides`) and
        recorded as the command line's.

        Args:
            overrides: the settings applied.
            given: the settings recorded as the command line's (the group choices and the
                experiment's name among them); None: ``overrides``.
            words: as :func:`~.overrides.check_override`'s.
        """
        self.cfg = apply_overrides(self.cfg, overrides, words)
        self.record((COMMAND_LINE, override_keys(overrides if given is None else given)))
        return self.cfg

    def sources(self, cfg: DictConfig | None = None,
                resolved: Mapping[str, str] | None = None) -> dict[str, str]:
        """Each dotted key of the config with the last layer that set it
        (:func:`~.provenance.resolve_sources`).

        Args:
            cfg: the config whose keys are named; None: :attr:`cfg`.
            resolved: as :func:`~.provenance.resolve_sources`'s.
        """
        return resolve_sources(self.cfg if cfg is None else cfg, self.layers, resolved)


def check_ranges(cfg: DictConfig, files: DictConfig, sources: dict[str, str]) -> None:
    """An :class:`OutOfRangeError` for the first value outside its range, naming where it was
    set (``sources``: each key's, :mod:`.provenance`) and the fix: on the command line, the
    value the config files give (``files``: the config before the command line's settings)
    when that one is in range; in a file, that file.

    Args:
        cfg: the composed config.
        files: the config before the command line's settings.
        sources: each dotted key's source.
    """
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


def compose_file(settings: DictConfig, source: str, overrides: Sequence[str] = ()) -> DictConfig:
    """A settings file of its own (``source``, read as ``settings``; e.g. the reranker's
    training, conf/pipeline/training/reranker.yaml) with ``key=value`` ``overrides``: its
    keys strict, its values checked against conf/ranges.yaml.

    Args:
        settings: the file's settings.
        source: the file, as its errors name it.
        overrides: ``key=value`` settings over it.
    """
    composition = Composition(settings, source)
    cfg = composition.command_line(overrides)
    check_ranges(cfg, settings, composition.sources())
    return cfg
