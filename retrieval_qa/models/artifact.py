"""One loader for every method's inference artefact: the folder that ``export()`` wrote,
whose ``model.json`` names its loader class in ``_target_`` (a class with
``load(folder)``, giving an object with ``encode_questions`` / ``encode_answers`` and
``meta``). Used by ``rqa evaluate --checkpoint`` and ``rqa encode``."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputFileError
from ..registry import locate
from ..torch_files import REEXPORT, error_summary

LEGACY_LOADER = "retrieval_qa.models.inference.DualEncoderInference"  # exports without _target_


def load_artifact(folder: str | Path, map_location: str = "auto"):
    """The exported model in ``folder`` on ``map_location`` (``auto``: the GPU when CUDA is
    available, else the CPU)."""
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
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{meta_file}: not valid JSON ({e}); re-export the model") from e
    if not isinstance(meta, dict):
        raise ValueError(f"{meta_file}: not an export's model.json (a JSON object with "
                         f"_target_); re-export the model")
    loader = locate(meta.get("_target_", LEGACY_LOADER))
    try:
        return loader.load(folder, map_location=map_location)
    except InputFileError:  # a damaged weights file, named by the loader
        raise
    except (FileNotFoundError, OSError) as e:
        present = sorted(p.name for p in folder.iterdir())
        raise FileNotFoundError(f"{folder}: incomplete export ({e}); it holds {present}. "
                                f"Fix: {REEXPORT}") from e
    except Exception as e:  # noqa: BLE001 - a damaged tokenizer or settings file, say
        raise InputFileError("exported model", folder, f"cannot be loaded "
                             f"({error_summary(e)})", REEXPORT) from e
