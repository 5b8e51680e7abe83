"""Commit one seed of the pipeline aimed past 86 (results/distill_plus/README.md, part 2) after
``make reproduce-pipeline-plus SEED=S``: the seed's two looks (the ReQA SQuAD dev pool and
MultiReQA RelationExtraction test, the newest of each in the working ledger) with their
records through ``rqa ledger --keep``, the same runs' fused records (the paired baselines), each
look's JSON (``--result``) and the seed's times. The claims (``claims.yaml``) are edited by
hand, then ``rqa results``.

    python experiments/collect_pipeline_plus.py --seed S [--ledger runs/ledger.jsonl]
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
POOLS = (("reqa_squad", "dev"), ("multireqa_relationextraction", "test"))
HEADER = "start\tstep\tseconds\tstatus\tthreads\n"


def collect(seed: int, ledger: Path, runs: Path, results: Path) -> dict:
    """Copy seed ``seed``'s looks, baselines, JSONs and times from ``runs`` (the pipeline's
    folders, ``runs/pipeline_plus``) into ``results`` (``results/distill_plus``); the looks'
    lines go to ``results``' parent's ``ledger.jsonl``."""
    folder, records = runs / f"seed{seed}", results / "records"
    ids, copies = [], []
    mine = [e for e in read(ledger) if e["family"] == FAMILY and e.get("record")
            and Path(e["record"]).resolve().parent.parent == folder.resolve()]
    for dataset, pool in POOLS:
        where = f"{dataset}-{pool}"
        looks = [e for e in mine if e["dataset"] == dataset and e["pool"] == pool]
        if not looks:
            raise InputFileError("ledger", ledger, f"holds no {FAMILY} look of seed {seed} on "
                                 f"{dataset}/{pool}", f"run make reproduce-pipeline-plus SEED={seed}")
        ids.append(looks[-1]["id"])
        name = f"{dataset}_{pool}"
        copies += [(folder / where / "fused.run.questions.jsonl.gz",
                    records / f"fused_plus_seed{seed}.{name}.questions.jsonl.gz"),
                   (folder / f"{where}.json", results / f"{FAMILY}_seed{seed}.{name}.json")]
    missing = [str(src) for src, _ in copies if not src.is_file()]
    if missing:
        raise InputFileError("pipeline run", missing[0], "is missing",
                             f"run make reproduce-pipeline-plus SEED={seed} to its end")
    kept = keep(ids, ledger, results.parent / "ledger.jsonl", records,
                stem=f"{FAMILY}_seed{seed}", config=CONFIG, seed=seed)
    for src, dst in copies:
        shutil.copyfile(src, dst)
    times = runs / f"times-seed{seed}.tsv"
    if times.is_file():
        text = times.read_text(encoding="utf-8")
        (results / f"times_pipeline_seed{seed}.tsv").write_text(
            text if text.startswith(HEADER) else HEADER + text, encoding="utf-8")
    return {"seed": seed, "kept": [(e["id"], e["dataset"], e["metrics"].get("mrr"))
                                   for e in kept], "copied": [str(d) for _, d in copies]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--ledger", type=Path, default=Path("runs/ledger.jsonl"))
    ap.add_argument("--runs", type=Path, default=Path("runs/pipeline_plus"))
    ap.add_argument("--results", type=Path, default=Path("results/distill_plus"))
    args = ap.parse_args(argv)
    try:
        print(json.dumps(collect(args.seed, args.ledger, args.runs, args.results)))
    except InputFileError as e:
        print(f"collect_pipeline_plus: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
