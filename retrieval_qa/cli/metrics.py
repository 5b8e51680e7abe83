"""``rqa metrics``: the metrics of ``rqa evaluate`` again, from the run file it wrote or from a
per-question record (``rqa evaluate``'s beside the run file, ``rqa train``'s in its run
folder)."""

from __future__ import annotations

from .files import input_file
from .parsing import add_command, ks

EXAMPLES = """\
examples:
  rqa evaluate --model bm25 --run-file runs/bm25-dev.jsonl
  rqa metrics --run-file runs/bm25-dev.jsonl
  rqa metrics --run-file runs/bm25-dev.questions.jsonl.gz   # the per-question record beside it
  rqa metrics --run-file runs/dual_gru/cpu-seed42/per_question.jsonl.gz   # rqa train's"""

GZIP_MAGIC = b"\x1f\x8b"


def add_parser(sub) -> None:
    from ..config import load_yaml

    met = add_command(sub, "metrics", run=run, epilog=EXAMPLES,
                      help="recompute metrics from a run file or a per-question record",
                      description="Recompute the metrics of rqa evaluate from the run file it "
                                  "wrote (--run-file) or from a per-question record (gzipped: "
                                  "X.questions.jsonl.gz beside a run file, per_question.jsonl.gz "
                                  "in a run folder of rqa train), rounded as rqa evaluate "
                                  "rounds them. To test two of them against each other: rqa "
                                  "compare.")
    met.add_argument("--run-file", required=True, metavar="FILE",
                     help="a run file written by rqa evaluate --run-file (one JSON line per "
                          "question, with its gold rank), or a per-question record")
    met.add_argument("--ks", type=ks, default=list(load_yaml("eval/default.yaml").ks),
                     metavar="K,K,...",
                     help="the cut-offs of R@k / P@k (default: ks of conf/eval/default.yaml, "
                          "%(default)s)")


def run(args) -> dict:
    path = input_file("--run-file", args.run_file)
    with open(path, "rb") as f:
        record = f.read(2) == GZIP_MAGIC
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
