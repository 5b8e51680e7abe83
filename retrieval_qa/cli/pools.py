"""The data options of the commands that read a pool (``--dataset``, ``--pool``,
``--data-dir``, ``--lenient``, ``--no-cache``) and the pool they name, read with one
progress line on stderr. ``--dataset`` takes a built-in name or a collection of the user's
own (``collection:PATH``, or a PATH to a folder holding ``corpus.jsonl``:
:mod:`retrieval_qa.data.collection`)."""

from __future__ import annotations

import argparse

from ..errors import did_you_mean

POOL_HELP = ("evaluation pool: dev|train for reqa_*, test|train for multireqa_*, a split "
             "(qrels/SPLIT.tsv) for a collection; validation: the validation side of the "
             "training pool (the training runs' 9:1 split, conf/data/reqa_squad.yaml; not a test "
             "pool: it chooses)")
VALIDATION = "validation"


def dataset_type(names: tuple[str, ...]):
    """The ``--dataset`` value type: one of ``names`` as it is, ``collection:PATH`` as it is
    (the folder is checked when it is read), a PATH to a folder holding ``corpus.jsonl`` as
    ``collection:PATH``; anything else an argparse error with the close names and the
    choices.

    Args:
        names: the built-in dataset names the command takes.
    """
    def dataset(text: str) -> str:
        from ..data.collection import PREFIX, collection_folder

        if text in names or text.startswith(PREFIX):
            return text
        if collection_folder(text) is not None:
            return PREFIX + text
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r}; {did_you_mean(text, names)}choose from "
            f"{', '.join(map(repr, names))}, or a collection of your own as collection:PATH "
            "(a folder with corpus.jsonl, queries.jsonl, qrels/; docs/data.md)")

    return dataset


def add_data_args(p: argparse.ArgumentParser, paragraphs: bool = False,
                  pool_help: str = POOL_HELP) -> None:
    """The data options (``--dataset``, ``--pool``, ``--data-dir``...).

    Args:
        p: the command's parser.
        paragraphs: squad_paragraphs (the paragraph task of frozen embeddings) is a dataset too.
        pool_help: the help of ``--pool``.
    """
    from ..data.paragraphs import DATASET as PARAGRAPHS
    from ..data.sources import DATASETS

    others = ", ".join(d for d in DATASETS if d != "reqa_squad")
    p.add_argument("--dataset", default="reqa_squad",
                   type=dataset_type((*DATASETS, PARAGRAPHS) if paragraphs else DATASETS),
                   metavar="NAME",
                   help=f"the data: reqa_squad (ReQA SQuAD), a MultiReQA set ({others})"
                        + (f", {PARAGRAPHS} (paragraph retrieval, with --model static:*)"
                           if paragraphs else "")
                        + ", or a collection of your own: collection:PATH (corpus.jsonl, "
                          "queries.jsonl, qrels/SPLIT.tsv; docs/data.md)")
    p.add_argument("--pool", default=None, help=f"{pool_help} (default: dev / test)")
    p.add_argument("--data-dir", default=None,
                   help="folder with squad/, mrqa/, multireqa/ (else $RQA_DATA_DIR, else "
                        "../shared/data beside the repository)")
    p.add_argument("--lenient", action="store_true",
                   help="skip malformed records (reported in the output) instead of failing")
    p.add_argument("--no-cache", action="store_true", help="rebuild, do not read or write cache")


def load(args, dataset: str | None = None, pool: str | None = None) -> tuple:
    """The pool of ``--dataset`` / ``--pool`` (or of ``dataset`` / ``pool``) and its build
    notes, with one progress line on stderr unless ``--quiet``.

    Args:
        args: the parsed options (``--dataset``, ``--pool``, ``--data-dir``...).
        dataset: the dataset instead of ``--dataset``; None: ``--dataset``.
        pool: the pool instead of ``--pool``; None: ``--pool`` (or the default one).
    """
    from ..data import default_pool, load_pool
    from ..data.collection import collection_folder, default_split
    from ..progress import stage

    dataset = dataset or args.dataset
    pool = pool if pool is not None else args.pool
    folder = collection_folder(dataset)
    if folder is not None and pool is None:
        pool = default_split(folder)
    with stage(f"pool {dataset}/{pool or default_pool(dataset)}",
               enabled=not getattr(args, "quiet", False)) as s:
        built, notes = load_pool(dataset, "train" if pool == VALIDATION else pool,
                                 args.data_dir, strict=not args.lenient,
                                 use_cache=not args.no_cache)
        if pool == VALIDATION:
            built = validation_side(built)
        s.done = ("read from the cache" if "cache" in notes
                  else "built" + ("" if args.no_cache else " and cached"))
        s.detail = f"{len(built.questions)} questions, {len(built.candidates)} candidates"
    return built, notes


def validation_side(train_pool):
    """The validation pool of ``train_pool`` as the training runs hold it out: their 9:1 split
    with the data config's ``val_fraction`` and ``split_seed`` (candidates: the sentences of
    the validation questions' paragraphs), uncapped.

    Args:
        train_pool: a training pool (``reqa_*``/``multireqa_*`` ``train``, a collection's
            ``train`` split).
    """
    from ..config import compose_group
    from ..data.split import train_val_split

    data = compose_group("data", "reqa_squad")
    return train_val_split(train_pool, float(data.val_fraction), int(data.split_seed))[1]


def unit_counts(notes: dict) -> dict:
    """MultiReQA and a collection: how many question ids the source has and how many of them
    have no gold sentence (left out of the pool, counted here so nothing is dropped
    silently); a collection's queries that its split does not judge (BEIR: not in the
    split).

    Args:
        notes: the pool's build notes.
    """
    return {k: notes[k] for k in ("question_ids", "questions_with_gold",
                                  "questions_without_gold", "queries_not_in_split")
            if k in notes}
