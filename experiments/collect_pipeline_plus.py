"""Commit one seed of the pipeline aimed past 86 (results/distill_plus/README.md, part 2) after
``make reproduce-pipeline-plus SEED=S``: the seed's two looks (the ReQA SQuAD dev pool and
MultiReQA RelationExtraction test, the newest of each in the working ledger) with their
records through ``rqa ledger --keep``, the same runs' fused records (the paired baselines), each
look's JSON (``--result``) and the seed's times. The claims (``claims.yaml``) are edited by
hand, then ``rqa results``. ``--plus distill_plus6`` collects attempt 2 (candidate 4's student,
``make reproduce-pipeline-plus PLUS=distill_plus6``) under names of its own.

    python experiments/collect_pipeline_plus.py --seed S [--plus distill_plus6]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval_qa.errors import InputFileError  # noqa: E402
from retrieval_qa.evaluation.ledger import read  # noqa: E402
from retrieval_qa.evaluation.ledger_keep import keep  # noqa: E402

FAMILY = "pipeline_plus"
CONFIG = "hybrid_plus_reader (paragraph reader on 12,000 questions, least_reliance)"
#: per student (make's PLUS): the runs' folder, the kept files' names, the looks' label
ATTEMPTS = {
    "distill_plus": {"runs": "runs/pipeline_plus", "stem": "pipeline_plus",
                     "fused": "fused_plus", "times": "times_pipeline", "config": CONFIG},
    "distill_plus6": {"runs": "runs/pipeline_plus6", "stem": "pipeline_plus6",
                      "fused": "fused_plus6", "times": "times_pipeline6",
                      "config": f"{CONFIG}, candidate 4's student (attempt 2)"},
}
POOLS = (("reqa_squad", "dev"), ("multireqa_relationextraction", "test"))
HEADER = "start\tstep\tseconds\tstatus\tthreads\n"


def collect(seed: int, ledger: Path, runs: Path, results: Path, plus: str = "distill_plus"
            ) -> dict:
    """Copy seed ``seed``'s looks, baselines, JSONs and times from ``runs`` (the pipeline's
    folders, ``runs/pipeline_plus``) into ``results`` (``results/distill_plus``) under the
    names of ``plus``'s attempt (:data:`ATTEMPTS`); the looks' lines go to ``results``'
    parent's ``ledger.jsonl``."""
    names = ATTEMPTS[plus]
    make = f"make reproduce-pipeline-plus{'' if plus == 'distill_plus' else f' PLUS={plus}'}"
    folder, records = runs / f"seed{seed}", results / "records"
    ids, copies = [], []
    mine = [e for e in read(ledger) if e["family"] == FAMILY and e.get("record")
            and Path(e["record"]).resolve().parent.parent == folder.resolve()]
    for dataset, pool in POOLS:
        where = f"{dataset}-{pool}"
        looks = [e for e in mine if e["dataset"] == dataset and e["pool"] == pool]
        if not looks:
            raise InputFileError("ledger", ledger, f"holds no {FAMILY} look of seed {seed} on "
                                 f"{dataset}/{pool}", f"run {make} SEED={seed}")
        ids.append(looks[-1]["id"])
        name = f"{dataset}_{pool}"
        copies += [(folder / where / "fused.run.questions.jsonl.gz",
                    records / f"{names['fused']}_seed{seed}.{name}.questions.jsonl.gz"),
                   (folder / f"{where}.json", results / f"{names['stem']}_seed{seed}.{name}.json")]
    missing = [str(src) for src, _ in copies if not src.is_file()]
    if missing:
        raise InputFileError("pipeline run", missing[0], "is missing",
                             f"run {make} SEED={seed} to its end")
    kept = keep(ids, ledger, results.parent / "ledger.jsonl", records,
                stem=f"{names['stem']}_seed{seed}", config=names["config"], seed=seed)
    for src, dst in copies:
        shutil.copyfile(src, dst)
    times = runs / f"times-seed{seed}.tsv"
    if times.is_file():
        text = times.read_text(encoding="utf-8")
        (results / f"{names['times']}_seed{seed}.tsv").write_text(
            text if text.startswith(HEADER) else HEADER + text, encoding="utf-8")
    return {"seed": seed, "kept": [(e["id"], e["dataset"], e["metrics"].get("mrr"))
                                   for e in kept], "copied": [str(d) for _, d in copies]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ledger", type=Path, default=Path("runs/ledger.jsonl"))
    ap.add_argument("--plus", choices=sorted(ATTEMPTS), default="distill_plus",
                    help="the student the pipeline ran with (make's PLUS)")
    ap.add_argument("--runs", type=Path, help="the pipeline's folders (default: the attempt's)")
    ap.add_argument("--results", type=Path, default=Path("results/distill_plus"))
    args = ap.parse_args(argv)
    runs = args.runs or Path(ATTEMPTS[args.plus]["runs"])
    try:
        print(json.dumps(collect(args.seed, args.ledger, runs, args.results, args.plus)))
    except InputFileError as e:
        print(f"collect_pipeline_plus: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
