"""One entry point for every pool: local files (or the hub for SQuAD), built once, cached."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

from ..errors import DataFileNotFoundError
from ..written import Damaged, rebuilding
from . import multireqa, reqa, splitter
from .cache import cache_root, load_cached_pool, save_pool
from .collection import collection_folder, load_collection
from .io import file_sha256
from .mrqa import read_mrqa
from .sources import default_pool, resolve_data_dir, source_files
from .squad import parse_squad, read_squad, squad_from_hub_rows
from .types import RetrievalPool

log = logging.getLogger(__name__)
HUB_SQUAD = "rajpurkar/squad"
HUB_RETRY_SECONDS = 3600     # after a failed probe the hub is not asked again for an hour
_hub_failed = False          # this process: the hub did not answer


def _hub_marker() -> Path:
    return cache_root() / "hub-unreachable"


def _hub_skip_reason() -> str | None:
    """Why the hub is not asked (offline mode, or a recent failed probe), else None."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").lower() in ("1", "true", "yes", "on"):
            return f"{var}={os.environ[var]}: the hub ({HUB_SQUAD}) was not asked."
    if _hub_failed:
        return f"The hub ({HUB_SQUAD}) did not answer earlier in this run."
    marker = _hub_marker()
    try:
        age = time.time() - marker.stat().st_mtime
    except OSError:
        return None
    if age < HUB_RETRY_SECONDS:
        return (f"The hub ({HUB_SQUAD}) did not answer {age / 60:.0f} min ago; it is not asked "
                f"again for {HUB_RETRY_SECONDS // 60} min (delete {marker} to retry now).")
    return None


def _cache_key(dataset: str, pool: str, paths: tuple[Path, ...], strict: bool) -> str:
    """The source files' hashes, the builder versions and the hashes of the builder and
    splitter sources themselves, so a changed rule can never be served a stale pool."""
    code = [file_sha256(m.__file__) for m in (splitter, reqa, multireqa)]
    h = hashlib.sha256()
    for part in (dataset, pool, reqa.BUILDER_VERSION, multireqa.BUILDER_VERSION,
                 splitter.SPLITTER_VERSION, str(strict), *code, *(file_sha256(p) for p in paths)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


def _from_hub(dataset: str, pool: str, missing: DataFileNotFoundError
              ) -> tuple[RetrievalPool, dict]:
    """SQuAD from the Hugging Face hub, only when no local file exists and the hub answers.
    Not asked in offline mode (HF_HUB_OFFLINE=1 or HF_DATASETS_OFFLINE=1) nor within an hour
    of a failed probe, so a missing file is reported at once."""
    global _hub_failed
    if dataset != "reqa_squad":
        raise missing
    if (reason := _hub_skip_reason()) is not None:
        raise DataFileNotFoundError(missing.name, [Path(p) for p in missing.looked],
                                    f"{missing.how_to_get} {reason}") from None
    log.warning("%s not found locally; asking the hub (%s); HF_HUB_OFFLINE=1 skips this",
                missing.name, HUB_SQUAD)
    try:
        import datasets

        rows = datasets.load_dataset(HUB_SQUAD, split="validation" if pool == "dev" else "train")
    except Exception as e:  # noqa: BLE001 - any hub failure means "not available"
        _hub_failed = True
        try:
            _hub_marker().parent.mkdir(parents=True, exist_ok=True)
            _hub_marker().write_text(f"{time.time()}\n{e}\n")
        except OSError:
            pass
        raise DataFileNotFoundError(missing.name, [Path(p) for p in missing.looked],
                                    f"{missing.how_to_get} The hub ({HUB_SQUAD}) did not answer "
                                    f"either: {e}.") from e
    paragraphs, _ = parse_squad(squad_from_hub_rows(rows), f"hub:{HUB_SQUAD}")
    return reqa.build_reqa(paragraphs, dataset, pool, source=f"hub:{HUB_SQUAD}")


def _rebuilt_multireqa_train(dirs: list[Path], missing: DataFileNotFoundError,
                             cache_dir: str | Path | None, strict: bool, use_cache: bool
                             ) -> tuple[RetrievalPool, dict]:
    """MultiReQA SQuAD train from its boundaries over the SQuAD train file's text, when the
    MRQA train file is absent (:mod:`.multireqa_train`; cached like the other pools)."""
    from . import multireqa_train
    from .sources import find_file

    how = f"{missing.how_to_get} Without it the pool is rebuilt from these two files."
    bounds = find_file("multireqa/train/SQuAD/candidates.json.gz", dirs, how)
    squad = find_file("squad/train-v1.1.json.gz", dirs, how)
    h = hashlib.sha256()
    for part in (multireqa_train.REBUILD_VERSION, multireqa.BUILDER_VERSION, str(strict),
                 file_sha256(multireqa_train.__file__), file_sha256(bounds), file_sha256(squad)):
        h.update(part.encode() + b"\0")
    folder = cache_root(cache_dir) / f"multireqa_squad-train-rebuilt-{h.hexdigest()[:24]}"
    source = (f"{bounds} over the text of {squad} (REBUILT: the MRQA train file "
              f"{missing.name} is absent)")
    if use_cache and (cached := _cached(folder)) is not None:
        built, notes = cached
        built.source = source
        notes["cache"] = str(folder)
        return built, notes
    log.warning("%s not found: rebuilding MultiReQA SQuAD train from %s and %s",
                missing.name, bounds, squad)
    boundaries, breport = multireqa.read_boundaries(bounds, strict)
    paragraphs, sreport = read_squad(squad, strict)
    built, notes = multireqa_train.rebuild_multireqa_train(boundaries, paragraphs,
                                                           source=source)
    notes["skipped_records"] = [breport.summary(), sreport.summary()]
    if use_cache:
        _save_quietly(built, notes, folder)
    return built, notes


def _cached(folder: Path) -> tuple[RetrievalPool, dict] | None:
    """The cached pool, or None: never built, or found damaged (a warning names the file;
    the caller builds it again)."""
    try:
        return load_cached_pool(folder)
    except Damaged as damage:
        rebuilding(damage, log)
        return None


def _save_quietly(built: RetrievalPool, notes: dict, folder: Path) -> None:
    """Write the pool cache; a cache that cannot be written is a warning, not an error."""
    try:
        save_pool(built, notes, folder)
    except OSError as e:
        log.warning("could not write the pool cache at %s: %s", folder, e)


def load_pool(dataset: str, pool: str | None = None, data_dir: str | Path | None = None,
              configured_dir: str | Path | None = None, cache_dir: str | Path | None = None,
              strict: bool = True, use_cache: bool = True) -> tuple[RetrievalPool, dict]:
    """Build (or read from cache) the pool; returns (pool, notes on the build). Without a
    local file, ``multireqa_squad``'s train pool is rebuilt from its boundaries over the
    SQuAD train file, and ``reqa_squad`` is asked of the Hugging Face hub (not in offline mode); other datasets
    are an error naming the missing file. A user's own collection (``collection:PATH``) is
    read from its folder (:mod:`.collection`; not cached, ``data_dir`` not used).

    Args:
        dataset: one of :data:`~retrieval_qa.data.DATASETS` (``reqa_squad``,
            ``multireqa_<name>``), or ``collection:PATH`` (a PATH to a folder holding
            ``corpus.jsonl`` too).
        pool: ``dev``/``train`` (ReQA) or ``test``/``train`` (MultiReQA) or a collection's
            split; None: the dataset's evaluation pool
            (:func:`~retrieval_qa.data.default_pool`; a collection's ``test``, else its only
            split).
        data_dir: the data folder (``--data-dir``); None: $RQA_DATA_DIR, then
            ``configured_dir``, then ``../shared/data`` beside the repository.
        configured_dir: the config's ``data_dir``; None: none.
        cache_dir: the pool cache's folder; None: $RQA_CACHE_DIR or
            ``~/.cache/retrieval_qa``.
        strict: a malformed record is an error; False: it is skipped and counted in the
            notes' ``skipped_records``.
        use_cache: read and write the pool cache (keyed by the source files' content).

    Returns:
        ``(RetrievalPool, notes)``; the notes say how it was built (counts, skipped records,
        the cache folder).

    Example:

        >>> pool, notes = load_pool("reqa_squad")  # SQuAD dev  # doctest: +SKIP
        >>> len(pool.questions), len(pool.candidates)  # doctest: +SKIP
    """
    if collection_folder(dataset) is not None:
        return load_collection(dataset, pool, strict)
    pool = pool or default_pool(dataset)
    dirs = resolve_data_dir(data_dir, configured_dir)
    try:
        files = source_files(dataset, pool, dirs)
    except DataFileNotFoundError as missing:
        if (dataset, pool) == ("multireqa_squad", "train"):  # no MRQA train file: rebuild
            return _rebuilt_multireqa_train(dirs, missing, cache_dir, strict, use_cache)
        return _from_hub(dataset, pool, missing)
    folder = cache_root(cache_dir) / f"{dataset}-{pool}-{_cache_key(dataset, pool, files.paths, strict)}"
    source = ", ".join(str(p) for p in files.paths)
    if use_cache and (cached := _cached(folder)) is not None:
        # The cache is keyed by content: report the files read now, not the first builder's.
        built, notes = cached
        built.source = source
        reports = notes.get("skipped_records")
        for report, path in zip(reports if isinstance(reports, list) else [reports],
                                files.paths, strict=False):
            if isinstance(report, dict) and "path" in report:
                report["path"] = str(path)
        notes["cache"] = str(folder)
        return built, notes
    if files.kind == "squad":
        paragraphs, report = read_squad(files.paths[0], strict)
        built, notes = reqa.build_reqa(paragraphs, dataset, pool, source)
        notes["skipped_records"] = report.summary()
    else:
        bounds, breport = multireqa.read_boundaries(files.paths[0], strict)
        _, contexts, mreport = read_mrqa(files.paths[1], strict)
        built, notes = multireqa.build_multireqa(bounds, contexts, dataset, pool,
                                                 str(files.paths[0]), strict, source)
        notes["skipped_records"] = [breport.summary(), mreport.summary()]
    if use_cache:
        _save_quietly(built, notes, folder)
    return built, notes
