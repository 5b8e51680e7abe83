"""One loader for every method's inference artefact: the folder that ``export()`` wrote,
whose ``model.json`` names its loader class in ``_target_`` (a class with
``load(folder)``, giving an object with ``encode_questions`` / ``encode_answers`` and
``meta``). Used by ``rqa evaluate --checkpoint`` and ``rqa encode``.

Also the checks every loader of a saved model runs before it trusts a file: the files an
export recorded (:func:`record_files` when written, :func:`check_recorded_files` when read:
each present, of the same size and SHA-256), a tokenizer folder whole and its vocabulary real
(:func:`load_tokenizer_folder`), and the tokenizer's ids within the token table of the
weights (:func:`check_token_ids`). A file that fails one is
:class:`~retrieval_qa.written.Damaged`, refused by :func:`refusing_damage` as an
:class:`~retrieval_qa.errors.InputFileError` naming the file and the fix: never a model that
loads with a default in its place (a tokenizer without its vocabulary maps every word to
[UNK], and scores a fraction of the trained model's MRR without a word of warning).

``map_location``: every loader here takes ``"auto"`` by default (:data:`DEFAULT_MAP_LOCATION`,
:func:`resolve_map_location`): the GPU when CUDA is available, else the CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import InputFileError
from ..pretrained import tokenizer_folder_problem, tokenizer_problem
from ..registry import locate
from ..written import Damaged, error_line, read_back, read_json, refuse

LEGACY_LOADER = "retrieval_qa.models.inference.DualEncoderInference"  # exports without _target_
REEXPORT = ("export the model again (a trained run: delete its result.json and run the same "
            "`rqa train` command, which resumes from the run's last checkpoint and exports; "
            "an untrained baseline: the same `rqa export --output DIR experiment=...` "
            "command), or copy the whole folder again")
#: the default device of every loader of an export: the GPU when CUDA is available
DEFAULT_MAP_LOCATION = "auto"
#: the key of model.json that records the export's files and its tokenizer's size
CONTENTS_KEY = "contents"


def resolve_map_location(map_location: str | None = DEFAULT_MAP_LOCATION) -> str:
    """``map_location`` as a device: ``"auto"`` (or None) is ``"cuda"`` when CUDA is
    available, else ``"cpu"``; any other value is returned as given.

    Args:
        map_location: ``"auto"``, None, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...

    Example:

        >>> resolve_map_location("cpu")
        'cpu'
    """
    if map_location in (None, "auto"):
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(map_location)


def file_record(path: str | Path) -> dict:
    """``{"bytes": size, "sha256": hex digest}`` of one file.

    Args:
        path: the file (read in blocks of 1 MiB).
    """
    from ..data.io import file_sha256

    return {"bytes": Path(path).stat().st_size, "sha256": file_sha256(path)}


def record_files(folder: str | Path, names: Iterable[str]) -> dict[str, dict]:
    """The records (:func:`file_record`) of the files ``names`` (paths relative to
    ``folder``, ``/``-separated), for model.json to keep.

    Args:
        folder: the export folder.
        names: its files that a load needs.

    Example:

        >>> record_files("runs/dual_gru/model", ["towers.pt"])  # doctest: +SKIP
        {'towers.pt': {'bytes': 1234, 'sha256': '...'}}
    """
    folder = Path(folder)
    return {name: file_record(folder / name) for name in sorted(set(names))}


def check_recorded_files(folder: str | Path, recorded: object, record_file: str | Path
                         ) -> None:
    """Every file ``recorded`` (what :func:`record_files` gave when the folder was written)
    present in ``folder``, of the same size and SHA-256; else :class:`Damaged` naming it.

    Args:
        folder: the export folder.
        recorded: ``{name: {"bytes", "sha256"}}`` as read from ``record_file``.
        record_file: the file that holds the record (named when the record is malformed).
    """
    folder = Path(folder)
    if not isinstance(recorded, dict) or not all(
            isinstance(r, dict) and isinstance(r.get("bytes"), int)
            and isinstance(r.get("sha256"), str) for r in recorded.values()):
        raise Damaged(record_file, f"its {CONTENTS_KEY!r} is not a record of files")
    for name, want in recorded.items():
        path = folder / name
        if not path.is_file():
            raise Damaged(path, "missing")
        size = path.stat().st_size
        if size != want["bytes"]:
            raise Damaged(path, f"{size} bytes, but {Path(record_file).name} records "
                                f"{want['bytes']} (cut short, or another file)")
        if file_record(path)["sha256"] != want["sha256"]:
            raise Damaged(path, f"its content differs from what {Path(record_file).name} "
                                "records (SHA-256): changed since the export")


def tokenizer_ids(tokenizer) -> int:
    """How many token ids ``tokenizer`` gives (its largest id + 1: the rows a token table
    needs; as :func:`~retrieval_qa.models.method.set_vocab_size` counts them).

    Args:
        tokenizer: a Hugging Face tokenizer (its ``get_vocab()``, added tokens included).
    """
    return max(tokenizer.get_vocab().values()) + 1


def load_tokenizer_folder(folder: str | Path, recorded_ids: int | None = None,
                          strict: bool = True):
    """The tokenizer saved in ``folder``, loaded offline, after its files are checked
    (:func:`~retrieval_qa.pretrained.tokenizer_folder_problem`); its vocabulary must hold more
    than its special tokens, and give ``recorded_ids`` ids when the export recorded that.

    Args:
        folder: the tokenizer's folder (an export's ``tokenizer/``).
        recorded_ids: the ids the tokenizer gave when it was saved; None: not recorded.
        strict: require tokenizer_config.json (folders this suite wrote).

    Raises:
        Damaged: naming the file that is missing or unreadable, or the folder.

    Example:

        >>> tok = load_tokenizer_folder("runs/dual_gru/model/tokenizer")  # doctest: +SKIP
    """
    from transformers import AutoTokenizer

    folder = Path(folder)
    found = tokenizer_folder_problem(folder, strict=strict)
    if found is not None:
        raise Damaged(*found)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - whatever the tokenizer library says of its files
        raise Damaged(folder, f"not a tokenizer ({error_line(e)})") from None
    problem = tokenizer_problem(tokenizer)
    if problem is None and recorded_ids is not None and tokenizer_ids(tokenizer) != recorded_ids:
        problem = (f"gives {tokenizer_ids(tokenizer)} token ids, but the export recorded "
                   f"{recorded_ids} (another tokenizer)")
    if problem is not None:
        raise Damaged(folder, problem)
    return tokenizer


def token_table_rows(module) -> int | None:
    """The rows of the token table(s) a tower (or the two towers) of the suite reads: the
    smallest among the towers' (a pretrained model's input embeddings, or a
    :class:`~retrieval_qa.encoders.TokenEmbedder`'s table); None when none is found (towers
    of another kind).

    Args:
        module: a tower, or dual towers (with ``question_tower`` / ``answer_tower``).
    """
    import torch

    towers = [getattr(module, side) for side in ("question_tower", "answer_tower")
              if hasattr(module, side)] or [module]
    rows = []
    for tower in towers:
        encoder = getattr(tower, "token_encoder", None)
        model = getattr(encoder, "model", None)
        table = None
        if model is not None and hasattr(model, "get_input_embeddings"):
            table = model.get_input_embeddings()
        else:
            embedder = getattr(encoder, "embedder", None)
            table = getattr(embedder, "embedding", embedder)
        if isinstance(table, torch.nn.Embedding):
            rows.append(int(table.num_embeddings))
    return min(rows) if rows else None


def check_token_ids(tokenizer, rows: int | None, tokenizer_folder: str | Path,
                    weights: str | Path) -> None:
    """:class:`Damaged` naming ``tokenizer_folder`` when the tokenizer gives ids beyond the
    ``rows`` of the token table in ``weights`` (another model's tokenizer: its ids would
    index past the table). ``rows`` None: nothing to check.

    Args:
        tokenizer: the loaded tokenizer.
        rows: the rows of the token table (:func:`token_table_rows`).
        tokenizer_folder: where the tokenizer was read from (named in the error).
        weights: the weights file that holds the table (named in the error).
    """
    if rows is None:
        return
    ids = tokenizer_ids(tokenizer)
    if ids > rows:
        raise Damaged(tokenizer_folder, f"gives {ids} token ids, but the token table of "
                                        f"{weights} has {rows} rows (another model's tokenizer)")


#: the weights file of a Hugging Face model folder, one of these (or a sharded one's index)
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
              "pytorch_model.bin.index.json")


def check_model_folder(folder: str | Path) -> None:
    """A Hugging Face model folder that a loader of the suite reads back (a classifier's or
    a reranker's export): ``config.json``, its weights (:data:`HF_WEIGHTS`) and a whole
    tokenizer whose vocabulary is real and gives no id beyond the config's ``vocab_size``;
    else :class:`Damaged` naming the first file missing or wrong.

    Args:
        folder: the model folder (``save_pretrained`` of the model and of its tokenizer).

    Example:

        >>> check_model_folder("runs/reranker")  # doctest: +SKIP
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise Damaged(folder, "missing (no model folder)")
    config = read_json(folder / "config.json")
    if not any((folder / name).is_file() for name in HF_WEIGHTS):
        raise Damaged(folder / HF_WEIGHTS[0], f"missing (nor {', '.join(HF_WEIGHTS[1:])})")
    tokenizer = load_tokenizer_folder(folder)
    rows = config.get("vocab_size")
    if isinstance(rows, int) and not isinstance(rows, bool):
        check_token_ids(tokenizer, rows, folder, folder / "config.json")


def st_module_files(folder: str | Path, config_file: str) -> tuple[dict, Path]:
    """The files of a :class:`~retrieval_qa.export.sentence_transformers.RetrievalTower`
    module folder other than its tokenizer: ``config_file`` (rqa_tower.json, with its keys),
    the weights (``model.safetensors`` or ``pytorch_model.bin``), and a pretrained encoder's
    ``encoder/config.json``; :class:`Damaged` naming the first one missing or unreadable.

    Args:
        folder: the module's folder.
        config_file: the name of its config file.

    Returns:
        The config and the path of the weights.
    """
    folder = Path(folder)
    config = read_json(folder / config_file, ("sides", "default_task", "similarity", "spec"))
    weights = next((folder / n for n in ("model.safetensors", "pytorch_model.bin")
                    if (folder / n).is_file()), folder / "model.safetensors")
    if not weights.is_file():
        raise Damaged(weights, "missing (nor pytorch_model.bin)")
    spec = config["spec"]
    if isinstance(spec, dict) and (spec.get("kind"), spec.get("encoder_type")) \
            == ("tower", "pretrained"):
        read_json(folder / "encoder" / "config.json")  # the encoder's architecture
    return config, weights


def convert_again(folder: str | Path) -> str:
    """The fix for a damaged sentence-transformers folder: convert the rqa export it came
    from again (named by ``rqa_export.json`` in the folder or the one above it).

    Args:
        folder: the sentence-transformers folder, or one of its module folders.

    Returns:
        The fix as a sentence (``EXPORT`` in place of the source when none is recorded).
    """
    import json

    folder = Path(folder)
    root = folder if (folder / "rqa_export.json").is_file() else folder.parent
    source = "EXPORT"
    try:
        source = json.loads((root / "rqa_export.json").read_text(encoding="utf-8"))["source"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return (f"convert the model again: `rqa export --checkpoint {source} --format "
            f"sentence-transformers --output {root}`, or copy the whole folder again")


def load_weights(path: str | Path, map_location):
    """``torch.load`` of an export's weights file; :class:`~retrieval_qa.written.Damaged`
    naming it when it is empty, truncated or not a saved state.

    Args:
        path: the weights file (``torch.save``).
        map_location: ``torch.load``'s ``map_location`` (a device, e.g. from
            :func:`resolve_map_location`).
    """
    import torch

    return read_back(path, lambda p: torch.load(p, map_location=map_location),
                     "saved weights (torch.save)")


@contextlib.contextmanager
def refusing_damage(what: str = "exported model file", fix: str = REEXPORT) -> Iterator[None]:
    """Loading a saved model: a missing or damaged file of it (:class:`Damaged`) is refused
    as an :class:`~retrieval_qa.errors.InputFileError` naming it, with the fix.

    Args:
        what: what the file is, to begin the message.
        fix: how to get a whole folder again.
    """
    try:
        yield
    except Damaged as damage:
        raise refuse(damage, what, fix) from None


def load_artifact(folder: str | Path, map_location: str = DEFAULT_MAP_LOCATION):
    """The exported model in ``folder`` on ``map_location`` (``auto``, the default of every
    loader: the GPU when CUDA is available, else the CPU).

    Args:
        folder: an export folder (the ``checkpoint`` that ``rqa train`` prints, or ``rqa
            export --output``); its model.json names the loader class.
        map_location: ``"auto"``, ``"cpu"``, ``"cuda"``, ...

    Returns:
        The loader's object (a :class:`~retrieval_qa.models.inference.DualEncoderInference`
        for the dual encoders), with ``encode_questions`` / ``encode_answers`` and ``meta``.

    Raises:
        FileNotFoundError: the folder, or its model.json, is missing.
        InputFileError: a file of the export is missing, damaged, or not the one the export
            recorded (the file named, and the fix).

    Example:

        >>> model = load_artifact("runs/dual_gru/checkpoint", "cpu")  # doctest: +SKIP
        >>> model.meta["similarity"]  # doctest: +SKIP
        'dot'
    """
    map_location = resolve_map_location(map_location)
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
    except OSError as e:  # a file the loader opened itself, missing or unreadable
        present = sorted(p.name for p in folder.iterdir())
        raise InputFileError("exported model", folder, f"incomplete export "
                             f"({error_line(e)}); it holds {present}", REEXPORT) from e
    except Exception as e:  # noqa: BLE001 - a damaged tokenizer or settings file, say
        raise InputFileError("exported model", folder, f"cannot be loaded "
                             f"({error_line(e)})", REEXPORT) from e
