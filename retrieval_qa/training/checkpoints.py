"""Which checkpoint of a run folder ``rqa train`` resumes from, and whether a checkpoint file
is whole.

A resumable checkpoint is a full Lightning checkpoint: the model, the optimiser states and the
loops (with the training loader's position and, in the callbacks' states, the random-number
states). A run writes one, ``checkpoints/last.ckpt``: after every validation and at every
epoch's end, every ``trainer.checkpoint_every_n_steps`` steps or minutes, and on
SIGTERM/SIGINT (:class:`~.resumable_checkpoints.ResumableCheckpoints`): the newest state of
the run.
The other files of ``checkpoints/`` hold weights only (no optimiser or loop state) and are
never resumed from: ``best-{epoch}-{step}.ckpt``, the weights of a validation whose score is
among the best (what the run tests and exports), and ``last-weights.ckpt``, written between
two ``last.ckpt`` for inspection.

A damaged ``last.ckpt`` (empty, truncated, garbage, a failed CRC) is passed over for the
newest other checkpoint of the folder that can resume the run (one copied there, or a best
checkpoint of a run written when those were full checkpoints), and the run says so; when
there is none, ``rqa train`` refuses with the files and what is wrong with each
(:func:`resumable_checkpoint`)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from ..errors import InputFileError
from ..written import error_line

LAST = "last.ckpt"
WEIGHTS_ONLY = "last-weights.ckpt"
#: what a checkpoint needs to resume a fit (Lightning's keys)
RESUMABLE_KEYS = ("state_dict", "optimizer_states", "loops", "epoch", "global_step")
#: how :func:`checkpoint_problem` begins for a whole checkpoint of weights only
WEIGHTS_ONLY_PROBLEM = "weights only"


def checkpoint_problem(path: str | Path, keys: tuple[str, ...] = RESUMABLE_KEYS) -> str | None:
    """What is wrong with the checkpoint file at ``path`` (None when it is whole): empty, not
    a zip archive (truncated or garbage), a member that fails its CRC check, unreadable by
    ``torch.load``, or without ``keys``. Reads the file once (the CRCs) and unpickles its
    index only (the tensors are memory-mapped, not loaded).

    Args:
        path: the checkpoint file.
        keys: the top-level keys it must hold (default: those a resume needs).
    """
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
    if missing and "state_dict" in state:
        return f"{WEIGHTS_ONLY_PROBLEM} (no {', '.join(missing)}): not a checkpoint to resume from"
    if missing:
        return f"not a resumable Lightning checkpoint (no {', '.join(missing)})"
    return None


def _candidates(folder: Path) -> list[Path]:
    """``last.ckpt`` first, then the other checkpoints but ``last-weights.ckpt``, newest
    first."""
    others = [p for p in folder.glob("*.ckpt") if p.name not in (LAST, WEIGHTS_ONLY)]
    others.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    last = folder / LAST
    return ([last] if last.is_file() else []) + others


def resumable_checkpoint(folder: str | Path, fix: str) -> tuple[Path | None, list[str]]:
    """The checkpoint of ``folder`` (a run's ``checkpoints/``) to resume from: ``last.ckpt``
    when whole, else the newest of the others that can resume the run (whole, with optimiser
    and loop state); None when the folder has none and none is damaged (no checkpoint, or
    weights only: the run starts from its beginning). Also returns the notes to print (each
    checkpoint passed over and why). A damaged one and none that can resume:
    :class:`~retrieval_qa.errors.InputFileError` naming them all.

    Args:
        folder: the run's ``checkpoints/``.
        fix: the error's fix.
    """
    folder = Path(folder)
    passed: list[tuple[Path, str]] = []
    for path in _candidates(folder):
        problem = checkpoint_problem(path)
        if problem is None:
            notes = [f"checkpoint {p} is {why}: passed over" for p, why in passed]
            if passed:
                notes.append(f"resuming from the newest resumable checkpoint instead: {path}")
            return path, notes
        passed.append((path, problem))
    if all(why.startswith(WEIGHTS_ONLY_PROBLEM) for _, why in passed):
        return None, [f"checkpoint {p} holds {why}; the run starts from its beginning"
                      for p, why in passed]
    first, why = next((p, w) for p, w in passed if not w.startswith(WEIGHTS_ONLY_PROBLEM))
    others = "; ".join(f"{p.name}: {w}" for p, w in passed if p != first)
    raise InputFileError("checkpoint", first, why + (
        f"; no other checkpoint of the run can resume it ({others})" if others
        else "; the run has no other checkpoint"), fix)


def check_checkpoint(path: str | Path, what: str, fix: str,
                     keys: tuple[str, ...] = RESUMABLE_KEYS) -> Path:
    """``path`` when it is a whole checkpoint with ``keys``, else an
    :class:`~retrieval_qa.errors.InputFileError` naming it.

    Args:
        path: the checkpoint file.
        what: where it was given (e.g. ``resume=``).
        fix: the error's fix.
        keys: the top-level keys it must hold (default: those a resume needs).
    """
    problem = checkpoint_problem(path, keys)
    if problem is not None:
        raise InputFileError(what, path, problem, fix)
    return Path(path)
