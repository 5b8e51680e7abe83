"""``rqa ledger``: how many configurations were evaluated on each test pool, family by family,
and which look the results keep (:mod:`retrieval_qa.evaluation.ledger`)."""

from __future__ import annotations

from pathlib import Path

from .parsing import add_command

EXAMPLES = """\
examples:
  rqa ledger                                   # this checkout's looks (runs/ledger.jsonl)
  rqa ledger --ledger results/ledger.jsonl     # the looks behind results/
  rqa ledger --ledger results/ledger.jsonl --family distill_pipeline"""


def add_parser(sub) -> None:
    """``rqa ledger``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    led = add_command(sub, "ledger", run=run, threads="check", epilog=EXAMPLES,
                      help="the ledger of test-pool looks: configurations evaluated on each "
                           "test pool, per family, and which one a headline keeps",
                      description="Every evaluation of a test pool (ReQA SQuAD dev and train, "
                                  "MultiReQA test pools) by any command is appended to a "
                                  "ledger ($RQA_LEDGER, else runs/ledger.jsonl). This command "
                                  "counts, for each family of runs and each test pool, the "
                                  "configurations and evaluations looked at, and marks the "
                                  "looks that a headline of results/*/claims.yaml keeps.")
    led.add_argument("--ledger", default=None, metavar="FILE",
                     help="the ledger to read (default: $RQA_LEDGER, else runs/ledger.jsonl)")
    led.add_argument("--family", default=None, metavar="NAME", help="only this family")
    led.add_argument("--results", default="results", metavar="DIR",
                     help="the results folder whose claims mark the kept looks")


def run(args) -> dict:
    """The ledger's summary (a markdown table on stderr, its rows as JSON).

    Args:
        args: the parsed options.
    """
    import sys

    from ..analysis.claims import load_studies
    from ..analysis.results_tables import kept_looks
    from ..evaluation.ledger import ledger_path, read, summarise

    path = Path(args.ledger) if args.ledger else ledger_path()
    results = Path(args.results)
    kept = kept_looks(load_studies(results)) if results.is_dir() else {}
    rows = summarise(read(path), args.family, kept)
    lines = ["| family | test pool | configurations | evaluations | seeds | MRR range | kept |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        span = "–" if r["mrr_range"] is None else \
            f"{r['mrr_range'][0]:.2f} to {r['mrr_range'][1]:.2f}"
        lines.append(f"| {r['family']} | {r['pool']} | {r['configurations']} | "
                     f"{r['evaluations']} | {', '.join(map(str, r['seeds'])) or '–'} | {span} "
                     f"| {', '.join(r['kept']) or '–'} |")
    sys.stderr.write("\n".join(lines) + "\n")
    return {"ledger": str(path), "family": args.family, "rows": rows}
