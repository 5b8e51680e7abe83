"""The data options of the commands that read a pool (``--dataset``, ``--pool``,
``--data-dir``, ``--lenient``, ``--no-cache``) and the pool they name, read with one
progress line on stderr."""

from __future__ import annotations

import argparse

POOL_HELP = "evaluation pool: dev|train for reqa_*, test|train for multireqa_*"


def add_data_args(p: argparse.ArgumentParser, paragraphs: bool = False,
                  pool_help: str = POOL_HELP) -> None:
    """The data options; ``paragraphs``: squad_paragraphs (the paragraph task of frozen
    embeddings) is a dataset too."""
    from ..data.paragraphs import DATASET as PARAGRAPHS
    from ..data.sources import DATASETS

    others = ", ".join(d for d in DATASETS if d != "reqa_squad")
    p.add_argument("--dataset", default="reqa_squad",
                   choices=(*DATASETS, PARAGRAPHS) if paragraphs else DATASETS, metavar="NAME",
                   help=f"the data: reqa_squad (ReQA SQuAD){',' if paragraphs else ' or'} a "
                        f"MultiReQA set ({others})"
                        + (f", or {PARAGRAPHS} (paragraph retrieval, with --model static:*)"
                           if paragraphs else ""))
    p.add_argument("--pool", default=None, help=f"{pool_help} (default: dev / test)")
    p.add_argument("--data-dir", default=None,
                   help="folder with squad/, mrqa/, multireqa/ (else $RQA_DATA_DIR, else "
                        "../shared/data beside the repository)")
    p.add_argument("--lenient", action="store_true",
                   help="skip malformed records (reported in the output) instead of failing")
    p.add_argument("--no-cache", action="store_true", help="rebuild, do not read or write cache")


def load(args, dataset: str | None = None, pool: str | None = None) -> tuple:
    """The pool of ``--dataset`` / ``--pool`` (or of ``dataset`` / ``pool``) and its build
    notes, with one progress line on stderr unless ``--quiet``."""
    from ..data import default_pool, load_pool
    from ..progress import stage

    dataset = dataset or args.dataset
    pool = pool if pool is not None else args.pool
    with stage(f"pool {dataset}/{pool or default_pool(dataset)}",
               enabled=not getattr(args, "quiet", False)) as s:
        built, notes = load_pool(dataset, pool, args.data_dir, strict=not args.lenient,
                                 use_cache=not args.no_cache)
        s.done = ("read from the cache" if "cache" in notes
                  else "built" + ("" if args.no_cache else " and cached"))
        s.detail = f"{len(built.questions)} questions, {len(built.candidates)} candidates"
    return built, notes


def unit_counts(notes: dict) -> dict:
    """MultiReQA: how many question ids the source has and how many of them have no gold
    sentence (left out of the pool, counted here so nothing is dropped silently)."""
    return {k: notes[k] for k in ("question_ids", "questions_with_gold",
                                  "questions_without_gold") if k in notes}
