"""One loader for every method's inference artefact: the folder that ``export()`` wrote,
whose ``model.json`` names its loader class in ``_target_`` (a class with
``load(folder)``, giving an object with ``encode_questions`` / ``encode_answers`` and
``meta``). Used by ``rqa evaluate --checkpoint`` and ``rqa encode``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputFileError
from ..registry import locate
from ..written import Damaged, error_line, read_back, read_json, refuse

LEGACY_LOADER = "retrieval_qa.models.inference.DualEncoderInference"  # exports without _target_
REEXPORT = ("export the model again (`rqa export` from the run's checkpoint, or the same "
            "`rqa train` command), or copy the whole folder again")


def load_weights(path: str | Path, map_location):
    """``torch.load`` of an export's weights file; :class:`~retrieval_qa.written.Damaged`
    naming it when it is empty, truncated or not a saved state."""
    import torch

    return read_back(path, lambda p: torch.load(p, map_location=map_location),
                     "saved weights (torch.save)")


@contextlib.contextmanager
def refusing_damage() -> Iterator[None]:
    """Loading an export: a damaged file of it is refused, naming it, with the fix."""
    try:
        yield
    except Damaged as damage:
        raise refuse(damage, "exported model file", REEXPORT) from None


def load_artifact(folder: str | Path, map_location: str = "auto"):
    """The exported model in ``folder`` on ``map_location`` (``auto``: the GPU when CUDA is
    available, else the CPU).

    Args:
        folder: an export folder (the ``checkpoint`` that ``rqa train`` prints, or ``rqa
            export --output``); its model.json names the loader class.
        map_location: ``"auto"``, ``"cpu"``, ``"cuda"``, ...

    Returns:
        The loader's object (a :class:`~retrieval_qa.models.inference.DualEncoderInference`
        for the dual encoders), with ``encode_questions`` / ``encode_answers`` and ``meta``.

    Raises:
        FileNotFoundError: the folder, or a file of it, is missing.
        InputFileError: a file of the export is damaged.

    Example:

        >>> model = load_artifact("runs/dual_gru/checkpoint", "cpu")  # doctest: +SKIP
        >>> model.meta["similarity"]  # doctest: +SKIP
        'dot'
    """
    if map_location == "auto":
        import torch

        map_location = "cuda" if torch.cuda.is_available() else "cpu"
    folder = Path(folder)
    meta_file = folder / "model.json"
    if not folder.exists():
        raise FileNotFoundError(f"{folder} does not exist; pass the `checkpoint` folder "
                                "printed by `rqa train` (or the --output of `rqa export`)")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is a file, not an exported model folder; pass the "
                                "`checkpoint` folder printed by `rqa train` (a Lightning .ckpt "
                                "is not loaded here)")
    if not meta_file.is_file():
        raise FileNotFoundError(f"{folder} is not an exported model (no model.json); pass the "
                                "`checkpoint` folder printed by `rqa train`")
    try:
        with refusing_damage():
            meta = read_json(meta_file)
            loader = locate(meta.get("_target_", LEGACY_LOADER))
            return loader.load(folder, map_location=map_location)
    except InputFileError:  # a damaged file of the export, named
        raise
    except (FileNotFoundError, OSError) as e:
        present = sorted(p.name for p in folder.iterdir())
        raise FileNotFoundError(f"{folder}: incomplete export ({e}); it holds {present}. "
                                f"Fix: {REEXPORT}") from e
    except Exception as e:  # noqa: BLE001 - a damaged tokenizer or settings file, say
        raise InputFileError("exported model", folder, f"cannot be loaded "
                             f"({error_line(e)})", REEXPORT) from e
