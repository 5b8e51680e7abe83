"""``rqa data stats``: the counts of a pool."""

from __future__ import annotations

from .parsing import add_command
from .pools import add_data_args, load, unit_counts

EXAMPLES = """\
examples:
  rqa data stats --dataset reqa_squad --pool dev
  rqa data stats --dataset multireqa_squad --pool test --lenient   # skip malformed records"""


def add_parser(sub) -> None:
    data = add_command(sub, "data", help="dataset utilities: counts of a pool",
                       description="Dataset utilities.", epilog="""\
example:
  rqa data stats --dataset multireqa_squad --pool test""")
    group = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")
    stats = add_command(group, "stats", run=run, threads="check", epilog=EXAMPLES,
                        help="counts of a pool (ENDX Table 1 layout)",
                        description="Counts of a pool: questions, candidate sentences, QA "
                                    "inputs, answers per question (ENDX Table 1 layout).")
    add_data_args(stats)


def run(args) -> dict:
    from ..data.stats import pool_stats

    pool, notes = load(args)
    return {**pool_stats(pool), **unit_counts(notes), "build_notes": notes}
