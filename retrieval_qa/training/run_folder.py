"""A run folder and the config that may use it: ``rqa train`` resumes or reuses a run only
when the config the run was started with equals this one.

The folder, ``<output_dir>/<experiment>/<profile>-seed<seed>`` (:func:`run_dir`), does not
depend on the other settings, so it may hold a run of other settings: a smoke run with
``trainer.max_steps=20`` before the full run, say. Every run writes its composed config to
``config.yaml`` before it trains (runs of earlier versions of the suite did too), and that
file is what a new command is compared with (:func:`inspect`):

- a folder without a run (no ``result.json``, no checkpoint): a new run;
- the same settings and ``result.json``: the finished run is reused: its report, marked
  ``"reused": true``, nothing trained or tested again (not the report of a run that trained
  0 steps, written by earlier versions: that run trains again, :func:`untrained`);
- the same settings and a checkpoint: resumed (:mod:`.checkpoints` picks the checkpoint);
- other settings: refused before anything is written (:class:`~retrieval_qa.errors.
  SettingsMismatchError`), naming the keys that differ (old -> new) and the fix:
  ``output_dir=...`` for a folder of its own, or ``resume=never``, which starts the folder over
  (:meth:`RunFolder.start_over`: the earlier run's checkpoints, export, result, logs and
  whatever else was computed from it are removed, so nothing of it can be mixed into the new
  one).

One ``rqa train`` at a time writes a run folder: :class:`~.writer_lock.WriterLock`, an
``fcntl`` lock on its ``rqa-train.lock`` held for the run's life; a second command into the
folder is refused (:class:`~.writer_lock.RunFolderInUse`) naming the folder, the holder's pid
and the fix.

"Equal" leaves out the settings of :data:`NEUTRAL_KEYS`, which cannot change what a run
computes; each is listed with the reason. The comparison is of the resolved values
(``${...}`` interpolations filled in), key by key; a key only one side has differs too (a
setting added to conf/ since the run was started: whether the earlier code behaved as its
default does cannot be known from the folder)."""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..errors import InputFileError, SettingsMismatchError
from ..registry import resolve_blocks
from ..written import read_report, write_text
from .checkpoints import check_checkpoint, resumable_checkpoint
from .writer_lock import LOCK

CONFIG = "config.yaml"
RESULT = "result.json"

#: settings that cannot change what a run computes (its weights, validation scores and test
#: metrics), with the reason; a key covers the keys under it. A run resumes or is reused
#: across a change of these only.
NEUTRAL_KEYS: dict[str, str] = {
    "description": "text; the settings it describes are compared one by one",
    "output_dir": "where the run folder is, not what runs in it (a moved folder is the same run)",
    "resume": "how the command starts (auto, never, a checkpoint), not what it computes",
    "threads": "torch threads change the order of float additions only, as the machine a run "
               "resumes on does (neither is a setting of the method)",
    "logger": "where the metrics are logged (csv, wandb, none), not their values",
    "trainer.enable_progress_bar": "display on stderr",
    "trainer.progress_refresh_steps": "display on stderr (the bar's loss read-back)",
    "trainer.callbacks.progress_bar": "the progress bar (the two settings above)",
    "trainer.callbacks.model_summary": "the model summary printed on stderr",
    "trainer.log_every_n_steps": "how often metrics are logged and the checkpoint clock read",
    "trainer.checkpoint_every_n_steps": "when the resumable last.ckpt is written: a run "
                                        "resumed from any of them continues exactly "
                                        "(tests/training/test_interrupt.py)",
    "trainer.checkpoint_every_minutes": "as trainer.checkpoint_every_n_steps",
    "trainer.weights_every_minutes": "weights-only snapshots for inspection; training never "
                                     "reads them",
    "trainer.callbacks.resumable_checkpoints": "the block of the checkpoint cadences above",
    "data.num_workers": "worker processes only collate the batches whose content and order the "
                        "main process's sampler decides (measured: bitwise-equal weights with 0 "
                        "and 2 workers, 3 epochs, dropout 0.3)",
    "data.pin_memory": "page-locked copies of the same batches",
}

#: settings a run fills in when the command leaves them null (its config.yaml holds the value
#: it derived); a key ending in one of these is not compared when the command leaves it null
DERIVED_KEYS: dict[str, str] = {
    "encoder.vocab_size": "a random token table's size (model.towers.encoder, "
                          "model.cross.encoder), set from the tokenizer (its `pretrained`, "
                          "compared) when null; a value given must equal it "
                          "(retrieval_qa/models/method.py, set_vocab_size)",
}

#: what ``resume=never`` keeps of a run folder: the request a sweep writes before the run (its
#: parameters); everything else there is the earlier run's or was computed from its model
#: (checkpoints, export, result, logs, a study's evaluations of it) and is removed
KEEP = ("sweep.json",)

#: how to get past a run of other settings (rqa train)
FIX = ("output_dir=DIR to give this run a folder of its own, or resume=never to start that "
       "folder over (the earlier run's checkpoints, result, logs and the rest are removed)")

_ABSENT = object()


def run_dir(cfg: DictConfig) -> Path:
    """``<output_dir>/<experiment>/<profile>-seed<seed>``.

    Args:
        cfg: the composed run config.
    """
    return Path(cfg.output_dir) / cfg.experiment / f"{cfg.profile}-seed{cfg.seed}"


def is_neutral(key: str) -> bool:
    """Whether ``key`` is one of :data:`NEUTRAL_KEYS` or under one.

    Args:
        key: a dotted config key.
    """
    return any(key == k or key.startswith(k + ".") for k in NEUTRAL_KEYS)


def _is_derived(key: str) -> bool:
    return any(key == k or key.endswith("." + k) for k in DERIVED_KEYS)


def _flat(node, prefix: str = "") -> dict:
    if isinstance(node, dict) and node:
        out = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _with_targets(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` with its short names resolved, as composition writes them since it
    resolves them (:func:`~retrieval_qa.registry.resolve_blocks`): a run started before holds
    ``type: gru`` where a new command holds its ``_target_``, and the settings are the same.
    A short name that no longer exists is left as it is (it differs)."""
    out = copy.deepcopy(cfg)
    try:
        resolve_blocks(out)
    except (ValueError, KeyError, ImportError):
        return cfg
    return out


def _containers(old: DictConfig, new: DictConfig) -> tuple[dict, dict]:
    """Both configs as plain dicts, their short names resolved, their interpolations too;
    unresolved both when either cannot be (an interpolation of an environment variable that
    is not set, say)."""
    old, new = _with_targets(old), _with_targets(new)
    try:
        return (OmegaConf.to_container(old, resolve=True),
                OmegaConf.to_container(new, resolve=True))
    except Exception:  # noqa: BLE001 - any resolver error: compare the values as written
        return OmegaConf.to_container(old), OmegaConf.to_container(new)


def flat_differences(old: dict, new: dict) -> dict[str, tuple]:
    """``{dotted key: (old value, new value)}`` of every leaf of two nested dicts that differs
    (a side without the key has :data:`_ABSENT`, shown as "(not set)" by :func:`describe`).

    Args:
        old: the recorded settings (nested dicts).
        new: this command's.
    """
    a, b = _flat(old), _flat(new)
    return {key: (a.get(key, _ABSENT), b.get(key, _ABSENT))
            for key in [*b, *(k for k in a if k not in b)]
            if a.get(key, _ABSENT) != b.get(key, _ABSENT)}


def differences(old: DictConfig, new: DictConfig) -> dict[str, tuple]:
    """:func:`flat_differences` of two run configs (resolved), the keys of
    :data:`NEUTRAL_KEYS` left out, and those of :data:`DERIVED_KEYS` that ``new`` leaves
    null.

    Args:
        old: the recorded run config.
        new: this command's.
    """
    return {key: (va, vb) for key, (va, vb) in flat_differences(*_containers(old, new)).items()
            if not is_neutral(key) and not (vb is None and _is_derived(key))}


def _show(value) -> str:
    return "(not set)" if value is _ABSENT else json.dumps(value, default=str)


def describe(diffs: dict[str, tuple], limit: int = 12) -> str:
    """``key: old -> new; ...`` (the first ``limit``, then how many more).

    Args:
        diffs: ``{key: (old, new)}``.
        limit: how many to show.
    """
    shown = [f"{k}: {_show(a)} -> {_show(b)}" for k, (a, b) in list(diffs.items())[:limit]]
    more = len(diffs) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def read_config(path: Path, fix: str) -> DictConfig:
    """A run's ``config.yaml``; :class:`InputFileError` naming it when it is not a config.

    Args:
        path: the ``config.yaml``.
        fix: the error's fix.
    """
    try:
        cfg = OmegaConf.load(path)
    except Exception as e:  # noqa: BLE001 - a damaged YAML file, whatever the parser raises
        raise InputFileError("run config", path, f"unreadable ({str(e).splitlines()[0]})",
                             fix) from e
    if not isinstance(cfg, DictConfig):
        raise InputFileError("run config", path, "not a mapping of settings", fix)
    return cfg


def holds_run(folder: Path) -> bool:
    """Whether a run of ``rqa train`` left a result or a checkpoint (a weights-only one too)
    in ``folder``.

    Args:
        folder: the run folder.
    """
    return (folder / RESULT).is_file() or any((folder / "checkpoints").glob("*.ckpt"))


def finished(cfg: DictConfig, folder: Path | None = None, fix: str = "") -> bool:
    """Whether ``cfg``'s run folder holds a finished run of these settings (True: reuse it)
    or no run or an unfinished one of them (False: run, resuming); a run of other settings is
    a :class:`SettingsMismatchError`. Reads only ``result.json``'s presence and
    ``config.yaml`` (no checkpoint is opened).

    Args:
        cfg: the composed run config.
        folder: the run folder; None: :func:`run_dir`.
        fix: the error's fix; "": ``rqa train``'s.
    """
    folder = run_dir(cfg) if folder is None else Path(folder)
    if not holds_run(folder):
        return False
    require_same(cfg, folder, fix or FIX)
    if not (folder / RESULT).is_file():
        return False
    report = read_report(folder / RESULT)  # a damaged report is refused, not passed off
    return not untrained(report)


def untrained(report: dict) -> bool:
    """Whether a run's report is that of a run that trained 0 steps (written by versions of
    the suite before such runs were refused: :func:`~.guards.check_trained`): not a result,
    never reused; the run trains again.

    Args:
        report: the run's ``result.json``.
    """
    return report.get("global_steps") == 0


def require_same(cfg: DictConfig, folder: Path, fix: str) -> None:
    """Refuse (:class:`SettingsMismatchError`) when the run in ``folder`` was started with
    other settings than ``cfg``, or when its ``config.yaml`` is missing or unreadable.

    Args:
        cfg: the composed run config.
        folder: the run folder.
        fix: the error's fix.
    """
    path = folder / CONFIG
    if not path.is_file():
        raise InputFileError("run folder", folder, f"holds a run but no {CONFIG}: its "
                             "settings cannot be compared with this command's", fix)
    diffs = differences(read_config(path, fix), cfg)
    if not diffs:
        return
    older = any(old is _ABSENT for old, _ in diffs.values())
    note = ("; '(not set)': absent from its config.yaml (a run of an earlier version, or of "
            "another experiment)") if older else ""
    raise SettingsMismatchError(folder, diffs, f"{folder} holds a run started with other "
                                f"settings ({describe(diffs)}){note}; it was not resumed and "
                                f"nothing was written (fix: {fix})")


@dataclass
class RunFolder:
    """What :func:`inspect` found.

    Attributes:
        path: the run folder.
        state: ``new``, ``resume``, ``finished`` or ``start over``.
        checkpoint: the checkpoint to resume from; None: none.
        notes: notes for stderr (checkpoints passed over).
    """

    path: Path
    state: str
    checkpoint: Path | None = None
    notes: list[str] = field(default_factory=list)

    def reuse(self) -> dict:
        """The finished run's report, marked ``"reused": true`` (refused when damaged)."""
        return {**read_report(self.path / RESULT), "reused": True}

    def start_over(self) -> list[str]:
        """Remove what an earlier run left here (all but :data:`KEEP`); returns the names."""
        removed = []
        for target in _leftovers(self.path):
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
            removed.append(target.name)
        return removed


def _leftovers(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name not in (*KEEP, LOCK)) \
        if folder.is_dir() else []


def inspect(cfg: DictConfig, folder: Path | None = None) -> RunFolder:
    """What ``cfg`` may do with its run folder (see the module docstring); reads only.

    Args:
        cfg: the composed run config; its ``resume``: ``never`` starts over; ``auto`` resumes
            or reuses a run of the same settings; a checkpoint path resumes from it when it is
            whole and its run (the folder above its ``checkpoints/``, when it has a
            config.yaml) and this folder's have the same settings.
        folder: the run folder; None: :func:`run_dir`.
    """
    folder = run_dir(cfg) if folder is None else Path(folder)
    resume = str(cfg.resume)
    if resume == "never":
        return RunFolder(folder, "start over" if _leftovers(folder) else "new")
    if resume != "auto":
        path = check_checkpoint(resume, "resume=", "give a whole checkpoint of the run, or "
                                "resume=auto (the run folder's newest whole checkpoint), or "
                                "resume=never")
        source = path.parent.parent
        if path.parent.name == "checkpoints" and (source / CONFIG).is_file():
            require_same(cfg, source, f"resume from a checkpoint of a run of these settings, "
                                      f"or drop resume={resume}")
        if holds_run(folder):
            require_same(cfg, folder, FIX)
        return RunFolder(folder, "resume", path)
    if finished(cfg, folder):
        return RunFolder(folder, "finished")
    if not holds_run(folder):
        return RunFolder(folder, "new")
    checkpoint, notes = resumable_checkpoint(folder / "checkpoints", FIX)
    return RunFolder(folder, "resume" if checkpoint else "new", checkpoint, notes)


def resume_point(checkpoints: Path, settings: DictConfig, resume: str, fix: str
                 ) -> tuple[Path | None, list[str]]:
    """The rule above for a training outside ``rqa train`` (:mod:`retrieval_qa.classifiers`),
    writing ``settings`` beside its checkpoints; returns the checkpoint and the notes for
    stderr.

    Args:
        checkpoints: the folder of its checkpoints and their ``config.yaml``.
        settings: the settings the checkpoints belong to.
        resume: ``auto``: the newest whole checkpoint of a run of the same settings, None when
            there is none (other settings: a :class:`SettingsMismatchError`, nothing written);
            ``never``: the folder's files are removed first.
        fix: the error's fix.
    """
    checkpoints, notes = Path(checkpoints), []
    if resume not in ("auto", "never"):
        raise ValueError(f"resume={resume!r}; expected auto or never")
    if resume == "never" and checkpoints.is_dir():
        shutil.rmtree(checkpoints)
        notes.append(f"resume=never: removed the earlier training's {checkpoints}")
    checkpoint = None
    if any(checkpoints.glob("*.ckpt")):
        require_same(settings, checkpoints, fix)
        checkpoint, notes = resumable_checkpoint(checkpoints, fix)
    checkpoints.mkdir(parents=True, exist_ok=True)
    write_text(checkpoints / CONFIG, OmegaConf.to_yaml(settings))
    return checkpoint, notes
