"""Which checkpoint of a run folder ``rqa train`` resumes from, and whether a checkpoint file
is whole.

A resumable checkpoint is a full Lightning checkpoint: the model, the optimiser states and the
loops (with the training loader's position and, in the callbacks' states, the random-number
states). A run has two kinds of them in ``checkpoints/``:

- ``last.ckpt``: written at every validation (by the best-checkpoint callback), every
  ``trainer.checkpoint_every_n_steps`` steps or minutes, and on SIGTERM/SIGINT
  (:class:`~.callbacks.ResumableCheckpoints`): the newest state of the run;
- ``best-{epoch}-{step}.ckpt``: written at a validation whose score is among the best. It is
  the same full checkpoint as the ``last.ckpt`` written at that validation, so a run resumed
  from it continues as it would have from that ``last.ckpt``: it loses the steps trained
  since, not the exactness of the run.

``last-weights.ckpt`` (weights only, no optimiser or loop state) is never resumed from.

A damaged ``last.ckpt`` (empty, truncated, garbage, a failed CRC) is passed over for the
newest whole checkpoint of the others, and the run says so; when none is whole, ``rqa train``
refuses with the file and what is wrong (:func:`resumable_checkpoint`)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import InputFileError
from ..written import error_line

LAST = "last.ckpt"
WEIGHTS_ONLY = "last-weights.ckpt"
#: what a checkpoint needs to resume a fit (Lightning's keys)
RESUMABLE_KEYS = ("state_dict", "optimizer_states", "loops", "epoch", "global_step")


def checkpoint_problem(path: str | Path, keys: tuple[str, ...] = RESUMABLE_KEYS) -> str | None:
    """What is wrong with the checkpoint file at ``path`` (None when it is whole): empty, not
    a zip archive (truncated or garbage), a member that fails its CRC check, unreadable by
    ``torch.load``, or without ``keys``. Reads the file once (the CRCs) and unpickles its
    index only (the tensors are memory-mapped, not loaded)."""
    import torch

    path = Path(path)
    if not path.is_file():
        return "no such file"
    if path.stat().st_size == 0:
        return "empty (0 bytes)"
    if not zipfile.is_zipfile(path):
        return "not a checkpoint archive (truncated, or another kind of file)"
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.CRC == 0:  # written without CRCs (torch.serialization.set_crc32_options)
                    continue
                with archive.open(info) as member:
                    while member.read(1 << 24):  # a wrong CRC raises at the member's end
                        pass
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        return f"damaged ({e})"
    try:
        state = torch.load(path, map_location="cpu", mmap=True, weights_only=False)
    except Exception as e:  # noqa: BLE001 - whatever unpickling a damaged file raises
        return f"unreadable ({error_line(e)})"
    if not isinstance(state, dict):
        return f"not a Lightning checkpoint (holds a {type(state).__name__})"
    missing = [k for k in keys if k not in state]
    if missing:
        return (f"not a resumable Lightning checkpoint (no {', '.join(missing)}: a weights-only "
                "checkpoint?)")
    return None


def _candidates(folder: Path) -> list[Path]:
    """``last.ckpt`` first, then the other full checkpoints, newest first."""
    others = [p for p in folder.glob("*.ckpt") if p.name not in (LAST, WEIGHTS_ONLY)]
    others.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    last = folder / LAST
    return ([last] if last.is_file() else []) + others


def resumable_checkpoint(folder: str | Path, fix: str) -> tuple[Path | None, list[str]]:
    """The checkpoint of ``folder`` (a run's ``checkpoints/``) to resume from: ``last.ckpt``
    when whole, else the newest whole one of the others; None when there is none at all. Also
    returns the notes to print (each checkpoint passed over and why). Every candidate
    damaged: :class:`~retrieval_qa.errors.InputFileError` naming them, with ``fix``."""
    folder = Path(folder)
    damaged: list[tuple[Path, str]] = []
    for path in _candidates(folder):
        problem = checkpoint_problem(path)
        if problem is None:
            notes = [f"checkpoint {p} is {why}: passed over" for p, why in damaged]
            if damaged:
                notes.append(f"resuming from the newest whole checkpoint instead: {path}")
            return path, notes
        damaged.append((path, problem))
    if not damaged:
        return None, []
    first, why = damaged[0]
    others = "; ".join(f"{p.name}: {w}" for p, w in damaged[1:])
    raise InputFileError("checkpoint", first, why + (
        f"; no other checkpoint of the run is whole ({others})" if others
        else "; the run has no other checkpoint"), fix)


def check_checkpoint(path: str | Path, what: str, fix: str,
                     keys: tuple[str, ...] = RESUMABLE_KEYS) -> Path:
    """``path`` when it is a whole checkpoint with ``keys``, else an
    :class:`~retrieval_qa.errors.InputFileError` naming it (``what``: where it was given)."""
    problem = checkpoint_problem(path, keys)
    if problem is not None:
        raise InputFileError(what, path, problem, fix)
    return Path(path)
