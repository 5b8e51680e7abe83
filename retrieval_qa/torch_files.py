"""``torch.load`` of a file the suite wrote (an export's weights), with a damaged file (empty,
truncated, garbage) named in the error instead of torch's message about zip archives."""

from __future__ import annotations

from pathlib import Path

from .errors import InputFileError

#: the fix for a damaged file of an exported model folder
REEXPORT = ("copy the whole folder that `rqa train` / `rqa export` wrote again, or export the "
            "model again")


def error_summary(e: BaseException) -> str:
    """``Type: first sentence`` of an exception's message (torch's run on for lines)."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    cut = text.find(". ")
    return f"{type(e).__name__}: {text[:cut + 1] if 0 < cut < 160 else text[:160]}"


def load_torch(path: str | Path, what: str, fix: str, **kwargs):
    """``torch.load(path, **kwargs)``; a file that cannot be read is an
    :class:`~retrieval_qa.errors.InputFileError` naming it (``what``: which file it is), what
    is wrong and ``fix``. A missing file raises FileNotFoundError as torch does."""
    import torch

    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise InputFileError(what, path, "empty (0 bytes)", fix)
    try:
        return torch.load(path, **kwargs)
    except FileNotFoundError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever unpickling a damaged file raises
        raise InputFileError(what, path, f"damaged or not a torch file ({error_summary(e)})",
                             fix) from e
