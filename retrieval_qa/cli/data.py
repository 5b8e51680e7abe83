"""``rqa data stats``: the counts of a pool; ``rqa data export``: a pool written as a
collection (:mod:`retrieval_qa.data.collection_writer`) that ``--dataset collection:PATH``
reads back."""

from __future__ import annotations

from .parsing import add_command
from .pools import add_data_args, load, unit_counts

EXAMPLES = """\
examples:
  rqa data stats --dataset reqa_squad --pool dev
  rqa data stats --dataset multireqa_squad --pool test --lenient   # skip malformed records
  rqa data stats --dataset collection:collections/reqa_squad-dev --pool dev   # your own"""

EXPORT_EXAMPLES = """\
examples:
  rqa data export --dataset reqa_squad --pool dev --output collections/reqa_squad-dev
  rqa data stats --dataset collection:collections/reqa_squad-dev --pool dev
  rqa evaluate --model bm25 --dataset collection:collections/reqa_squad-dev --pool dev"""


def add_parser(sub) -> None:
    """``rqa data``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    data = add_command(sub, "data", help="dataset utilities: counts of a pool, a pool written "
                                         "as a collection",
                       description="Dataset utilities.", epilog="""\
examples:
  rqa data stats --dataset multireqa_squad --pool test
  rqa data export --dataset reqa_squad --pool dev --output collections/reqa_squad-dev""")
    group = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")
    stats = add_command(group, "stats", run=run, threads="check", epilog=EXAMPLES,
                        help="counts of a pool (ENDX Table 1 layout)",
                        description="Counts of a pool: questions, candidate sentences, QA "
                                    "inputs, answers per question (ENDX Table 1 layout).")
    add_data_args(stats)
    export = add_command(group, "export", run=run_export, threads="check",
                         epilog=EXPORT_EXAMPLES,
                         help="write a pool as a collection (corpus.jsonl, queries.jsonl, "
                              "qrels/POOL.tsv: BEIR's layout)",
                         description="Write a pool as a collection of your own would be "
                                     "written (docs/data.md, \"Your own collection\"): every "
                                     "candidate in corpus.jsonl, one query per question unit "
                                     "in queries.jsonl (ReQA: one per distinct question text), "
                                     "every gold candidate of each in qrels/POOL.tsv. Read "
                                     "back with --dataset collection:DIR --pool POOL, it gives "
                                     "the same candidates, questions, gold lists and metrics.")
    add_data_args(export)
    export.add_argument("--output", required=True, metavar="DIR",
                        help="the collection's folder (written whole, or not at all)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace the --output folder when it holds anything")


def run(args) -> dict:
    """``rqa data stats``: the pool's counts and its build notes.

    Args:
        args: the parsed options.
    """
    from ..data.stats import pool_stats

    pool, notes = load(args)
    return {**pool_stats(pool), **unit_counts(notes), "build_notes": notes}


def run_export(args) -> dict:
    """``rqa data export``: the pool written as a collection; what was written.

    Args:
        args: the parsed options.
    """
    from ..data.collection_writer import write_collection
    from .export import check_output

    check_output(args.output, args.overwrite)  # before the pool is read
    pool, notes = load(args)
    written = write_collection(pool, args.output)
    return {**written, "dataset": pool.dataset, "pool": pool.pool,
            "question_unit": pool.question_unit, "source": pool.source,
            **unit_counts(notes), "build_notes": notes}
