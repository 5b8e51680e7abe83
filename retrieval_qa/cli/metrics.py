"""``rqa metrics``: the metrics of ``rqa evaluate`` again, from the run file it wrote or from a
per-question record (``rqa evaluate``'s beside the run file, ``rqa train``'s in its run
folder); or the metrics of a TREC run with its qrels (:mod:`retrieval_qa.evaluation.trec`:
MRR@k and R@k over the listed top k, not the protocol's exact MRR)."""

from __future__ import annotations

from ..errors import ConflictingOptionsError, UsageError
from .files import input_file
from .parsing import add_command, ks

EXAMPLES = """\
examples:
  rqa evaluate --model bm25 --run-file runs/bm25-dev.jsonl
  rqa metrics --run-file runs/bm25-dev.jsonl
  rqa metrics --run-file runs/bm25-dev.questions.jsonl.gz   # the per-question record beside it
  rqa metrics --run-file runs/dual_gru/cpu-seed42/per_question.jsonl.gz   # rqa train's
  rqa metrics --run-file runs/bm25-dev.trec --trec-qrels runs/reqa-dev.qrels   # a TREC run"""

GZIP_MAGIC = b"\x1f\x8b"


def add_parser(sub) -> None:
    """``rqa metrics``'s parser.

    Args:
        sub: the subparsers of ``rqa``.
    """
    from ..config import eval_settings

    met = add_command(sub, "metrics", run=run, epilog=EXAMPLES,
                      help="recompute metrics from a run file, a per-question record or a "
                           "TREC run",
                      description="Recompute the metrics of rqa evaluate from the run file it "
                                  "wrote (--run-file) or from a per-question record (gzipped: "
                                  "X.questions.jsonl.gz beside a run file, per_question.jsonl.gz "
                                  "in a run folder of rqa train), rounded as rqa evaluate "
                                  "rounds them. A TREC run (qid Q0 docid rank score tag; with "
                                  "--trec-qrels) gives MRR@K and R@k over the top K it lists, "
                                  "in trec_eval's order (ties by descending docid): not the "
                                  "protocol's exact MRR, which only rqa's own files keep. To "
                                  "test two of them against each other: rqa compare.")
    met.add_argument("--run-file", required=True, metavar="FILE",
                     help="a run file written by rqa evaluate --run-file (one JSON line per "
                          "question, with its gold rank), a per-question record, or a TREC run "
                          "(with --trec-qrels)")
    met.add_argument("--trec-qrels", default=None, metavar="FILE",
                     help="the judgements of a TREC run: TREC qrels (qid 0 docid rel, e.g. "
                          "rqa evaluate --trec-qrels) or a collection's qrels/SPLIT.tsv")
    met.add_argument("--ks", type=ks, default=list(eval_settings().ks),
                     metavar="K,K,...",
                     help="the cut-offs of R@k / P@k (default: ks of conf/eval/default.yaml, "
                          "%(default)s)")


def run(args) -> dict:
    """``rqa metrics``: the metrics recomputed from a run file, a per-question record or
    a TREC run.

    Args:
        args: the parsed options.
    """
    from ..evaluation.trec import is_trec_run

    path = input_file("--run-file", args.run_file)
    with open(path, "rb") as f:
        record = f.read(2) == GZIP_MAGIC
    trec = not record and is_trec_run(path)
    if trec:
        return _trec(args, path)
    if args.trec_qrels:
        raise ConflictingOptionsError(
            f"--trec-qrels {args.trec_qrels}: --run-file {args.run_file} is no TREC run but "
            "rqa's own file, whose ranks are the protocol's exact ones (fix: drop --trec-qrels)")
    if record:  # a per-question record: the exact ranks, the same metrics
        from ..evaluation.per_question import read_per_question

        read = read_per_question(path)
        unit, metrics = read.header.get("question_unit", "unknown"), read.metrics(tuple(args.ks))
    else:
        from ..evaluation.runfile import metrics_from_run_file, read_run_file

        first = next(iter(read_run_file(path)), {})
        unit = first.get("question_unit", "unknown")
        metrics = metrics_from_run_file(path, ks=tuple(args.ks))
    return {"run_file": args.run_file, "kind": "per-question record" if record else "run file",
            "question_unit": unit,
            "metrics": {k: round(v, 4) for k, v in metrics.items()}}  # as evaluate rounds


def _trec(args, path) -> dict:
    """A TREC run's metrics under :data:`~retrieval_qa.evaluation.trec.PROTOCOL`."""
    from ..evaluation.trec import trec_metrics, trec_record

    if not args.trec_qrels:
        raise UsageError(f"--run-file {args.run_file} is a TREC run: its metrics need the "
                         "judgements (fix: add --trec-qrels FILE, e.g. the file rqa evaluate "
                         "--trec-qrels wrote, or a collection's qrels/SPLIT.tsv)")
    record = trec_record(path, input_file("--trec-qrels", args.trec_qrels), tuple(args.ks))
    header = record.header
    return {"run_file": args.run_file, "kind": "TREC run", "qrels": args.trec_qrels,
            "questions": header["questions"], "depth": header["depth"],
            **{k: header[k] for k in ("ks_beyond_depth", "questions_not_in_run",
                                      "run_questions_without_judgements",
                                      "judged_questions_without_relevant")},
            "protocol": header["protocol"],
            "metrics": {k: round(v, 4) for k, v in trec_metrics(record).items()}}
