"""Dataset names, where their files live under the data directory, and how to get them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataDirNotFoundError, DataFileNotFoundError, did_you_mean

SQUAD_URL = "https://rajpurkar.github.io/SQuAD-explorer/dataset/{name}"
MRQA_URL = "https://github.com/mrqa/MRQA-Shared-Task-2019 (download.sh lists every file)"
MULTIREQA_URL = "https://github.com/google-research-datasets/MultiReQA (data/<split>/<Dataset>/)"


@dataclass(frozen=True)
class MultiReQASpec:
    """Where a MultiReQA set's files are.

    Attributes:
        folder: the MultiReQA folder name.
        mrqa_name: the MRQA file stem.
        in_domain: in-domain sets have a train split.
    """
    folder: str        # MultiReQA folder name
    mrqa_name: str     # MRQA file stem
    in_domain: bool    # in-domain datasets have a train split

    def pools(self) -> tuple[str, ...]:
        return ("train", "test") if self.in_domain else ("test",)


MULTIREQA = {
    "squad": MultiReQASpec("SQuAD", "SQuAD", True),
    "naturalquestions": MultiReQASpec("NaturalQuestions", "NaturalQuestionsShort", True),
    "hotpotqa": MultiReQASpec("HotpotQA", "HotpotQA", True),
    "triviaqa": MultiReQASpec("TriviaQA", "TriviaQA-web", True),
    "searchqa": MultiReQASpec("SearchQA", "SearchQA", True),
    "bioasq": MultiReQASpec("BioASQ", "BioASQ", False),
    "relationextraction": MultiReQASpec("RelationExtraction", "RelationExtraction", False),
    "duorc": MultiReQASpec("DuoRC", "DuoRC.ParaphraseRC", False),
    "textbookqa": MultiReQASpec("TextbookQA", "TextbookQA", False),
}
REQA_POOLS = ("dev", "train")
DATASETS = ("reqa_squad", *(f"multireqa_{k}" for k in MULTIREQA))


def default_pool(dataset: str) -> str:
    """The pool a dataset is evaluated on: ``dev`` for ReQA, ``test`` for MultiReQA.

    Args:
        dataset: one of :data:`DATASETS`.

    Example:

        >>> default_pool("reqa_squad"), default_pool("multireqa_bioasq")
        ('dev', 'test')
    """
    return "dev" if dataset.startswith("reqa_") else "test"


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def resolve_data_dir(explicit: str | Path | None = None, configured: str | Path | None = None
                     ) -> list[Path]:
    """The data folder: the first given of --data-dir (or the ``data_dir`` a caller passes),
    $RQA_DATA_DIR and the config's ``data_dir``; else ``../shared/data`` beside the repository
    (the developers' and CI's layout). A folder given explicitly that does not exist is an
    error naming it: it is never replaced by another one. Returned as a one-element list.

    Args:
        explicit: ``--data-dir`` (or the ``data_dir`` a caller passes); None: not given.
        configured: the config's ``data_dir``; None: not set.
    """
    for value, given_by in ((explicit, "--data-dir"),
                            (os.environ.get("RQA_DATA_DIR"), "$RQA_DATA_DIR"),
                            (configured, "data.data_dir")):
        if value:
            path = Path(value).expanduser()
            if not path.is_dir():
                raise DataDirNotFoundError(path, given_by)
            return [path]
    return [repo_root().parent / "shared" / "data"]


def find_file(relative: str, dirs: list[Path], how_to_get: str) -> Path:
    """The first of ``dirs`` holding ``relative`` (a ``.gz`` name also matches the
    file unzipped); else a DataFileNotFoundError saying how to get it.

    Args:
        relative: the file's path under a data folder.
        dirs: the data folders.
        how_to_get: a sentence saying how to get the file.
    """
    for d in dirs:
        if (d / relative).is_file():
            return d / relative
        if relative.endswith(".gz") and (d / relative[:-3]).is_file():
            return d / relative[:-3]
    raise DataFileNotFoundError(relative, [d / relative for d in dirs], how_to_get)


@dataclass(frozen=True)
class SourceFiles:
    """The files a pool is built from.

    Attributes:
        kind: ``squad`` or ``multireqa``.
        paths: squad: ``(json,)``; multireqa: ``(boundaries, mrqa)``.
    """
    kind: str                  # "squad" or "multireqa"
    paths: tuple[Path, ...]    # squad: (json,), multireqa: (boundaries, mrqa)


def source_files(dataset: str, pool: str, dirs: list[Path]) -> SourceFiles:
    """The source files of a dataset's pool, found in ``dirs``.

    Args:
        dataset: ``reqa_squad`` or ``multireqa_<set>``.
        pool: the pool (split).
        dirs: the data folders (:func:`resolve_data_dir`).
    """
    if dataset == "reqa_squad":
        if pool not in REQA_POOLS:
            raise ValueError(f"pool {pool!r} is not one of {REQA_POOLS} for {dataset} (fix: "
                             f"{did_you_mean(pool, REQA_POOLS)}give one of them)")
        name = f"{pool}-v1.1.json"
        path = find_file(f"squad/{name}.gz", dirs,
                         f"Get it from {SQUAD_URL.format(name=name)} (or gzip it into squad/).")
        return SourceFiles("squad", (path,))
    if dataset.startswith("multireqa_") and dataset[10:] in MULTIREQA:
        spec = MULTIREQA[dataset[10:]]
        if pool not in spec.pools():
            raise ValueError(f"pool {pool!r} is not one of {spec.pools()} for {dataset} (fix: "
                             f"{did_you_mean(pool, spec.pools())}give one of them)")
        # MultiReQA's test split is the MRQA dev file; its boundaries sit in data/dev/ for
        # in-domain datasets and data/test/ for out-of-domain ones.
        folder = "train" if pool == "train" else ("dev" if spec.in_domain else "test")
        mrqa_split = "train" if pool == "train" else "dev"
        bounds = find_file(f"multireqa/{folder}/{spec.folder}/candidates.json.gz", dirs,
                           f"Get it from {MULTIREQA_URL}.")
        mrqa = find_file(f"mrqa/{mrqa_split}/{spec.mrqa_name}.jsonl.gz", dirs,
                         f"Get {spec.mrqa_name}.jsonl.gz ({mrqa_split}) from {MRQA_URL}.")
        return SourceFiles("multireqa", (bounds, mrqa))
    raise ValueError(f"unknown dataset {dataset!r}; {did_you_mean(dataset, DATASETS)}known: "
                     f"{', '.join(DATASETS)}; or a collection of your own: collection:PATH "
                     "(docs/data.md)")
