"""``rqa ledger``: how many configurations were evaluated on each test pool, family by family,
and which look the results keep (:mod:`retrieval_qa.evaluation.ledger`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .parsing import add_command

EXAMPLES = """\
examples:
  rqa ledger                                   # this checkout's looks (runs/ledger.jsonl)
  rqa ledger --ledger results/ledger.jsonl     # the looks behind results/
  rqa ledger --ledger results/ledger.jsonl --family distill_pipeline
  rqa ledger --family pipeline_plus --looks   # each look with its id
  rqa ledger --keep 8f8b8870d026 fb8b9bc18ab8 --records results/distill_plus/records \
      --seed 1 --config "hybrid_plus_reader (...)"   # commit two looks and their records"""


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
    led.add_argument("--looks", action="store_true",
                     help="list every look too: its id (for --keep), time, seed, pool, MRR and "
                          "record")
    keep = led.add_argument_group(
        "committing looks", "--keep copies looks of --ledger, each with its per-question "
        "record (checked against the look's ranks), into the committed ledger and a "
        "results folder")
    keep.add_argument("--keep", nargs="+", default=None, metavar="ID",
                      help="the looks' ids (or unique prefixes), as --looks lists them")
    keep.add_argument("--records", default=None, metavar="DIR",
                      help="where the records go (results/<study>/records); with --keep")
    keep.add_argument("--into", default=None, metavar="FILE",
                      help="the committed ledger (default: RESULTS/ledger.jsonl)")
    keep.add_argument("--stem", default=None,
                      help="the records' names: STEM.<dataset>_<pool>.questions.jsonl.gz "
                           "(default: <family>_seed<seed>)")
    keep.add_argument("--config", default=None, metavar="LABEL",
                      help="the configuration's label in the results' looks tables")
    keep.add_argument("--seed", type=int, default=None,
                      help="the training seed of looks logged without one (a pipeline's)")


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
    if args.keep:
        return _keep(args, path, results)
    if args.records or args.into or args.stem or args.config or args.seed is not None:
        raise UsageError("rqa ledger: --records, --into, --stem, --config and --seed go with "
                         "--keep (fix: add --keep ID ..., or leave them out)")
    kept = kept_looks(load_studies(results)) if results.is_dir() else {}
    entries = read(path)
    rows = summarise(entries, args.family, kept)
    lines = ["| family | test pool | configurations | evaluations | seeds | MRR range | kept |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        span = "–" if r["mrr_range"] is None else \
            f"{r['mrr_range'][0]:.2f} to {r['mrr_range'][1]:.2f}"
        lines.append(f"| {r['family']} | {r['pool']} | {r['configurations']} | "
                     f"{r['evaluations']} | {', '.join(map(str, r['seeds'])) or '–'} | {span} "
                     f"| {', '.join(r['kept']) or '–'} |")
    looks = [e for e in entries if args.family in (None, e["family"])] if args.looks else []
    if looks:
        lines += ["", "| id | time | family | test pool | seed | MRR | record |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {e['id']} | {e['time']} | {e['family']} | {e['dataset']}/{e['pool']} | "
                  f"{'–' if e.get('seed') is None else e['seed']} | "
                  f"{e['metrics'].get('mrr', '–')} | {e.get('record') or '–'} |" for e in looks]
    sys.stderr.write("\n".join(lines) + "\n")
    out = {"ledger": str(path), "family": args.family, "rows": rows}
    if args.looks:
        out["looks"] = [{k: e.get(k) for k in ("id", "time", "family", "dataset", "pool",
                                                "seed", "record")} | {"mrr": e["metrics"].get("mrr")}
                        for e in looks]
    return out


def _keep(args, path: Path, results: Path) -> dict:
    from ..evaluation.ledger_keep import keep

    if not args.records:
        raise UsageError("rqa ledger --keep: where the records go is not given (fix: add "
                         "--records results/<study>/records)")
    into = Path(args.into) if args.into else results / "ledger.jsonl"
    kept = keep(args.keep, path, into, args.records, stem=args.stem, config=args.config,
                seed=args.seed)
    return {"ledger": str(path), "into": str(into),
            "kept": [{"id": e["id"], "record": e["record"], "mrr": e["metrics"].get("mrr")}
                     for e in kept]}
