"""Carry a pipeline run's reranker scores of format 1 (shards written before they kept their
heads' candidates) into another pipeline folder as format 2, so that a run over other heads of
the same pool (another first stage, another depth) reads back the pairs they hold and scores
only the others (``retrieval_qa/pipeline/reranker_scores.py``). Each shard's heads are rebuilt
from the earlier run's fused run file (each question's first candidates, as many as the shard
scored) and checked against the shard's digest of its heads; a shard that does not match is
left behind. The scores themselves are copied unchanged.

    python experiments/carry_reranker_scores.py --from runs/pipeline_plus/seed2/reqa_squad-dev \\
        --to runs/pipeline_plus6/seed2/reqa_squad-dev --dataset reqa_squad --pool dev
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval_qa.data.types import RetrievalPool  # noqa: E402
from retrieval_qa.errors import DataFormatError, InputFileError  # noqa: E402
from retrieval_qa.evaluation.runfile import read_run_file  # noqa: E402
from retrieval_qa.pipeline.reranker_scores import (  # noqa: E402
    FOLDER,
    RerankerScores,
    heads_digest,
)


def carry(source: Path, target: Path, pool: RetrievalPool) -> dict:
    """Copy ``source``'s format-1 shards (``<source>/reranker_scores/<reranker>/``) into
    ``target`` as format 2; shards already there are kept. Returns the counts per reranker.

    Args:
        source: the earlier run's pool folder (``<pipeline-dir>/<dataset>-<pool>``), holding
            ``fused.run.jsonl`` and the shards.
        target: the new run's pool folder.
        pool: the pool both runs ranked.
    """
    run_file = source / "fused.run.jsonl"
    if not run_file.is_file():
        raise InputFileError("fused run file", run_file, "is missing",
                             "give the pool folder of a finished pipeline run with a reranker")
    fused = read_run_file(run_file)
    if [r["question"] for r in fused] != list(pool.questions):
        raise InputFileError("fused run file", run_file, f"does not rank the questions of "
                             f"{pool.dataset}/{pool.pool} in order",
                             "give the --dataset and --pool the run was made on")
    index = {c.id: i for i, c in enumerate(pool.candidates)}
    counts = {}
    for folder in sorted((source / FOLDER).iterdir()):
        carried = left = kept = 0
        for path in sorted(folder.glob("*.json")):
            shard = json.loads(path.read_text(encoding="utf-8"))
            first, scores = shard["first"], shard["scores"]
            questions = pool.questions[first:first + len(scores)]
            heads = [np.asarray([index[c] for c in r["top_ids"][:len(s)]], dtype=np.int64)
                     for r, s in zip(fused[first:first + len(scores)], scores, strict=True)]
            if shard.get("format") != 1 or shard["heads"] != heads_digest(questions, heads):
                left += 1
                continue
            cache = RerankerScores(target, shard["reranker"])
            if cache.path(first).exists():
                kept += 1
                continue
            cache.write(first, questions, heads, scores, float(shard.get("seconds") or 0.0))
            carried += 1
        counts[folder.name] = {"carried": carried, "left_behind": left, "already_there": kept}
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", type=Path, required=True,
                    help="the earlier run's pool folder (<pipeline-dir>/<dataset>-<pool>)")
    ap.add_argument("--to", dest="target", type=Path, required=True,
                    help="the new run's pool folder")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--data-dir", help="the data folder (default: $RQA_DATA_DIR, ../shared/data)")
    args = ap.parse_args(argv)
    from retrieval_qa.data.loading import load_pool

    try:
        pool, _ = load_pool(args.dataset, args.pool, args.data_dir)
        print(json.dumps(carry(args.source, args.target, pool)))
    except (InputFileError, DataFormatError) as e:
        print(f"carry_reranker_scores: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
