"""`rqa train`: seed, build data and model from the config, fit with checkpoints and resume,
export the towers, evaluate them on the test pool, and report one JSON object."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path

import pytorch_lightning as pl
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from pytorch_lightning.utilities import rank_zero_only

from ..config import Composed
from ..portable_paths import portable
from ..registry import target_of
from ..runtime import apply_threads, machine_info
from ..written import read_report, write_text
from . import run_folder
from .checkpoints import check_checkpoint
from .compile import compile_encoders, compile_mode
from .guards import check_trained
from .resumable_checkpoints import ResumableCheckpoints
from .trainer import build_trainer, resolve_precision
from .writer_lock import WriterLock

log = logging.getLogger(__name__)


def method_class(cfg: DictConfig):
    """The method class that ``model._target_`` names (see :mod:`retrieval_qa.models.method`).

    Args:
        cfg: the composed run config.
    """
    return target_of(cfg.model, "model")


def export_untrained(cfg: DictConfig, folder: str | Path) -> dict:
    """Export an experiment's model as initialised, before any training (the baseline of a
    fine-tuning run: e.g. the pretrained checkpoint with its pooling).

    Args:
        cfg: the composed run config.
        folder: where the model is exported.
    """
    pl.seed_everything(cfg.seed, workers=True)
    built = method_class(cfg).build(cfg)
    path = built.module.export(folder)
    return {"checkpoint": str(path), "experiment": cfg.experiment, "profile": cfg.profile,
            **built.notes, "trained": False}


def _number(value) -> float | None:
    return None if value is None else round(float(value), 4)


def _plain(value):
    """A setting as JSON can write it (a list of a profile is a ListConfig)."""
    return OmegaConf.to_container(value) if isinstance(value, ListConfig) else value


def profile_settings(cfg: DictConfig, block: DictConfig | None) -> dict:
    """The effective values of the settings the run's profile changes (its reductions), and
    which of them the command line overrode (profile value -> effective value).

    Args:
        cfg: the composed run config.
        block: the profile block its composition merged (:class:`~.compose.Composed`); None:
            none.
    """
    if block is None:
        return {"settings": {}, "overridden": {}}
    flat: dict = {}

    def walk(node, prefix=""):
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, DictConfig):
                walk(v, key + ".")
            elif key != "description":
                flat[key] = _plain(v)

    walk(block)
    settings = {k: _plain(OmegaConf.select(cfg, k)) for k in flat}
    overridden = {k: {"profile": flat[k], "effective": settings[k]}
                  for k in flat if settings[k] != flat[k]}
    return {"settings": settings, "overridden": overridden}


def command_line_settings(overrides: Sequence[str], profile_keys: Collection[str]) -> list[str]:
    """The ``key=value`` settings of ``overrides`` that change what a run computes and that
    the description does not name otherwise: not the experiment, profile and seed (named
    beside it), not the profile's own keys (named with the profile's value), not the
    settings of :data:`.run_folder.NEUTRAL_KEYS` (where the run is, how it is displayed).

    Args:
        overrides: the command line's ``key=value`` settings.
        profile_keys: the keys the profile sets.
    """
    named = {"experiment", "profile", "seed", *profile_keys}
    out = []
    for item in overrides:
        key = item.split("=", 1)[0]
        if "=" in item and key not in named and not any(
                key == n or key.startswith(n + ".") for n in run_folder.NEUTRAL_KEYS):
            out.append(item)
    return out


def _note(text: str) -> None:
    """A line on stderr, left out under ``--quiet`` (the report holds the same facts)."""
    from ..progress import is_quiet

    if not is_quiet():
        print(text, file=sys.stderr, flush=True)


def _describe(cfg: DictConfig, block: DictConfig | None, threads: int,
              overrides: Sequence[str] = ()) -> tuple[str, dict]:
    """The description, corrected for the command line's settings (the profile's overridden
    ones with the profile's value, then the others as given), and the profile's effective
    settings; printed to stderr before anything runs."""
    prof = profile_settings(cfg, block)
    description = cfg.description
    if prof["overridden"]:
        description += " [overridden on the command line: " + ", ".join(
            f"{k}={v['effective']} (profile: {v['profile']})"
            for k, v in prof["overridden"].items()) + "]"
    others = command_line_settings(overrides, prof["settings"])
    if others:
        description += " [set on the command line: " + ", ".join(others) + "]"
    _note(f"rqa train {cfg.experiment} (profile {cfg.profile}, seed {cfg.seed}, "
          f"{threads} torch thread{'s' if threads != 1 else ''}): {description}")
    if prof["settings"]:
        _note("  profile settings in effect: " + ", ".join(
            f"{k}={v}" for k, v in prof["settings"].items()))
    return description, prof["settings"]


def _finish_loggers(trainer: pl.Trainer | None) -> None:
    """Close the experiment loggers now (wandb prints its summary when it closes: before the
    JSON result, not after it at interpreter exit)."""
    if trainer is None:
        return
    from pytorch_lightning.loggers import WandbLogger

    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger):
            import wandb

            wandb.finish()


def write_test_record(module, data, folder: Path, name: str | None = None) -> dict:
    """The test's per-question record (evaluation/per_question.py) in ``folder`` (a run's:
    ``per_question.jsonl.gz`` beside result.json; ``name``: another file name), for the
    methods whose test ranks the data module's test pool; ``{}`` for the others."""
    ranks = getattr(module, "test_question_ranks", None)
    pool = getattr(data, "test_pool", None)
    if ranks is None or pool is None or len(ranks[0]) != len(pool.questions):
        return {}
    from ..evaluation.per_question import RUN_DIR_NAME, write_per_question

    path = write_per_question(folder / (name or RUN_DIR_NAME), pool, ranks[0].numpy(),
                              None if ranks[1] is None else ranks[1].numpy(),
                              tuple(module.evaluation["ks"]))
    return {"per_question": path.name}


def log_test_look(cfg: DictConfig, overrides, test: dict, module, checkpoint: str | Path,
                  folder: Path) -> None:
    """The test's line in the ledger of test-pool looks (:mod:`..evaluation.ledger`), when it
    ran on a test pool; ``test``: the report's test (its ``per_question`` in ``folder``)."""
    from ..evaluation import ledger

    if "dataset" not in test or "pool" not in test:
        return
    ranks = getattr(module, "test_question_ranks", None)
    record = folder / test["per_question"] if test.get("per_question") else None
    ledger.record(dataset=test["dataset"], pool=test["pool"],
                  metrics=test.get("metrics", {}), questions=int(test.get("questions") or 0),
                  kind="train", name=cfg.experiment,
                  settings=OmegaConf.to_container(cfg, resolve=True), seed=cfg.seed,
                  overrides=list(overrides), checkpoint=str(checkpoint),
                  ranks=None if ranks is None else ranks[0], record_file=record,
                  subset="the test pool capped (data.max_test_questions)"
                  if test.get("capped") else None)


def train(composed: Composed | DictConfig) -> dict:
    """Build the method that ``model._target_`` names, fit it (resuming from the run's last
    checkpoint), load the best checkpoint, export its inference artefact, test it with the
    Trainer (the shared evaluator, ``conf/eval``) and write one report.

    The run folder is checked first, before anything is built or written
    (:mod:`.run_folder`): a run of other settings there is refused, a finished run of the
    same settings is reused (its report, ``"reused": true``), an unfinished one resumed from
    its newest whole checkpoint; ``resume=never`` starts the folder over. One command at a
    time writes a run folder: another ``rqa train`` writing it is refused
    (:class:`~.writer_lock.WriterLock`). A run that trains no step or diverges is refused
    (:mod:`.guards`) and writes no report.

    Args:
        composed: what :func:`~.compose.compose_traced` gives (the report lists the profile's
            settings), or a bare config (built by hand: the report lists none).
    """
    cfg = composed.cfg if isinstance(composed, Composed) else composed
    # process 0 writes the folder (under DDP the other processes run this function too)
    lock = WriterLock(run_folder.run_dir(cfg)) if rank_zero_only.rank == 0 \
        else contextlib.nullcontext()
    with lock:
        return _train(composed)


def _train(composed: Composed | DictConfig) -> dict:
    """:func:`train`, its run folder locked."""
    start = time.perf_counter()
    cfg, block, overrides = (composed.cfg, composed.profile_block, composed.overrides) \
        if isinstance(composed, Composed) else (composed, None, [])
    folder = run_folder.inspect(cfg)
    run_dir = folder.path
    if folder.state == "finished":
        _note(f"rqa train {cfg.experiment} (profile {cfg.profile}, seed {cfg.seed}): reused "
              f"the finished run in {run_dir} (the same settings): nothing trained or tested; "
              f"its {run_folder.RESULT} follows (resume=never trains it again)")
        return folder.reuse()
    threads = apply_threads(cfg.threads)
    if cfg.trainer.compile:
        compile_mode(cfg.trainer.compile)
    pl.seed_everything(cfg.seed, workers=True)
    built = method_class(cfg).build(cfg)  # a bad setting fails here, before any folder
    description, reduced = _describe(cfg, block, threads, overrides)
    for note in folder.notes:
        _note(f"  {note}")
    if folder.state == "start over" and rank_zero_only.rank == 0:
        removed = folder.start_over()
        print(f"  resume=never: removed the earlier run's {', '.join(removed)} from {run_dir}",
              file=sys.stderr, flush=True)
    stale = run_dir / run_folder.RESULT
    if stale.is_file() and rank_zero_only.rank == 0 and run_folder.untrained(read_report(stale)):
        stale.unlink()  # written by an earlier version: never reused (run_folder.finished)
        print(f"  removed {stale}: the report of a run that trained 0 steps, not a result",
              file=sys.stderr, flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text(run_dir / run_folder.CONFIG, OmegaConf.to_yaml(cfg))
    module, data = built.module, built.data
    trainer = build_trainer(cfg, run_dir)
    if cfg.trainer.compile:
        compile_encoders(module, cfg.trainer.compile, resolve_precision(cfg.trainer))
    resumed_from = str(folder.checkpoint) if folder.checkpoint else None
    stopper = next((c for c in trainer.callbacks if isinstance(c, ResumableCheckpoints)), None)
    if stopper is None:
        raise ValueError("trainer.callbacks has no ResumableCheckpoints block: rqa train stops "
                         "cleanly on a signal through it (fix: keep "
                         "trainer.callbacks.resumable_checkpoints of conf/trainer/default.yaml)")
    stopper.install_handlers()  # a signal before the first step stops at that step
    try:
        trainer.fit(module, datamodule=data, ckpt_path=resumed_from)
        stopper.check(trainer)
        check_trained(trainer, data)  # an untrained model is no result
        # the last validation's scores, also when it ran before a restart (kept in last.ckpt)
        last_val = {k: round(v, 4) for k, v in stopper.last_validation.items()}
        chooser = next((c for c in trainer.callbacks
                        if isinstance(c, pl.callbacks.ModelCheckpoint)), None)
        best = (chooser.best_model_path or None) if chooser else None
        if best:
            check_checkpoint(best, "best checkpoint", "resume=never to train the run again",
                             keys=("state_dict",))
            module.load_state_dict(torch.load(best, map_location="cpu",
                                              weights_only=False)["state_dict"])
        if cfg.test_after_fit:
            trainer.test(module, datamodule=data, verbose=False)
    finally:
        stopper.restore_handlers()
        _finish_loggers(trainer)
    if not trainer.is_global_zero:  # under DDP, process 0 alone exports and reports
        return {"global_rank": trainer.global_rank, "run_dir": str(run_dir)}
    export = module.export(run_dir / "model")
    report = {
        "checkpoint": str(export), "experiment": cfg.experiment, "profile": cfg.profile,
        "description": description, "profile_settings": reduced, "threads": threads,
        "machine": machine_info(threads, ("transformers", "pytorch_lightning")),
        **built.notes, "seed": cfg.seed,
        "best_training_checkpoint": best, "resumed_from": resumed_from,
        "monitor": cfg.trainer.monitor,
        "best_val_score": _number(chooser.best_model_score if chooser else None),
        "last_val": last_val,
        "global_steps": trainer.global_step, "epochs": trainer.current_epoch,
        **module.describe(), "data": data.describe(),
        "trainer": OmegaConf.to_container(cfg.trainer, resolve=True), "precision": str(trainer.precision),
        "eval": getattr(module, "evaluation", None),
        "train_seconds": round(time.perf_counter() - start, 1),
    }
    if cfg.test_after_fit:
        report["test"] = {**module.test_results, **data.describe().get("test", {})}
        report["test"].update(write_test_record(module, data, run_dir))
        log_test_look(cfg, overrides, report["test"], module, report["checkpoint"], run_dir)
    report["seconds"] = round(time.perf_counter() - start, 1)
    report = portable(report)  # runs/..., $RQA_DATA_DIR/...: no machine's absolute paths
    write_text(run_dir / run_folder.RESULT, json.dumps(report, indent=2))
    return report
