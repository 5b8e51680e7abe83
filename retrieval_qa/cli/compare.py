"""``rqa compare``: paired tests between settings, question by question
(:mod:`retrieval_qa.analysis.compare`)."""

from __future__ import annotations

from .parsing import add_command

EXAMPLES = """\
examples:
  rqa compare results/compare/bm25.questions.jsonl.gz \\
      results/compare/bm25_context.questions.jsonl.gz
  rqa compare Dual=runs/dual_gru/cpu-seed1 Dual=runs/dual_gru/cpu-seed2 \\
      ENDX=runs/endx_gru/cpu-seed1 ENDX=runs/endx_gru/cpu-seed2   # seeds averaged
  rqa compare runs/sweeps/endx_confounds --pairs all
  rqa compare runs/bm25.trec runs/dense.trec --trec-qrels runs/reqa-dev.qrels   # TREC runs"""


def add_parser(sub) -> None:
    """``rqa compare``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    co = add_command(sub, "compare", run=run, threads="check", epilog=EXAMPLES,
                     help="paired tests between runs: MRR / R@k differences, bootstrap "
                          "intervals, randomisation p (Holm)",
                     description="Compare settings question by question on one pool: the "
                                 "MRR / R@k difference with its paired bootstrap 95% interval, "
                                 "the paired randomisation (sign-flip) p-value Holm-corrected "
                                 "across the pairs, wins/ties/losses, and with seeds a "
                                 "seed-level test (retrieval_qa/analysis/compare.py).")
    co.add_argument("inputs", nargs="+", metavar="[NAME=]PATH",
                    help="per-question records (*.questions.jsonl.gz, per_question.jsonl.gz), "
                         "run files (*.jsonl), run folders, sweep folders, or TREC runs (with "
                         "--trec-qrels; compared with TREC runs only); the first is the "
                         "baseline; a NAME repeated = seeds of one setting")
    co.add_argument("--trec-qrels", default=None, metavar="FILE",
                    help="the judgements of the TREC runs given (TREC qrels or a collection's "
                         "qrels/SPLIT.tsv): their MRR@k / R@k over the top k they list, cut "
                         "to the smallest depth among them (retrieval_qa/evaluation/trec.py)")
    co.add_argument("--pairs", choices=["first", "all"], default="first",
                    help="first: each setting vs the first; all: every pair")
    co.add_argument("--metrics", default=None, metavar="M,M,...",
                    type=lambda t: [m.strip() for m in t.split(",") if m.strip()],
                    help="mrr, r@K, doc_mrr, doc_r@K (default: mrr, the records' r@k and "
                         "doc_mrr when every input has doc ranks)")
    co.add_argument("--output", default=None, metavar="FILE.md",
                    help="write the markdown table here and its JSON beside (FILE.json)")
    co.add_argument("--samples", type=int, default=2000, help="bootstrap resamples")
    co.add_argument("--permutations", type=int, default=10000,
                    help="sign flips of the randomisation test")
    co.add_argument("--seed", type=int, default=0, help="seed of the resampling")


def run(args) -> dict:
    """The paired comparison of the inputs (:func:`~retrieval_qa.analysis.compare.run_compare`).

    Args:
        args: the parsed options.
    """
    from ..analysis.compare import run_compare
    from .files import input_file

    if args.trec_qrels:
        input_file("--trec-qrels", args.trec_qrels)
    return run_compare(args.inputs, metrics=args.metrics, pairs=args.pairs, output=args.output,
                       samples=args.samples, permutations=args.permutations, seed=args.seed,
                       trec_qrels=args.trec_qrels)
