"""A whole pool's per-question record restricted to the questions `rqa evaluate --pipeline
--max-questions N` draws, so that `rqa compare` can pair it with a record of that subset.

A pipeline run on a seeded subset of the dev pool (``--max-questions 1000``, drawn by
:func:`retrieval_qa.pipeline.tuning.question_subset` with the pipeline's
``tuning.split_seed``) writes a record of those questions alone; a run of the whole pool
writes one of every question. This keeps the whole pool's ranks at the subset's questions and
writes them as the subset's record (its fingerprint and question digest the subset's), so both
pair question by question. Nothing is recomputed: each question keeps its gold rank.

    python experiments/record_subset.py WHOLE.questions.jsonl.gz --dataset reqa_squad \\
        --pool dev --max-questions 1000 --output SUBSET.questions.jsonl.gz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def restrict(record, pool, subset) -> tuple[dict, list[dict]]:
    """The header and rows of ``record`` (read from ``pool``, the whole pool) at the questions
    of ``subset`` (a question subset of ``pool``), as :func:`build_records` writes them."""
    from retrieval_qa.errors import InputFileError
    from retrieval_qa.evaluation.per_question import build_records, pool_fingerprint

    if record.header.get("pool_fingerprint") != pool_fingerprint(pool):
        raise InputFileError("record", record.path, f"is not a record of the whole "
                             f"{pool.dataset}/{pool.pool} pool (its fingerprint differs; "
                             f"{record.header.get('questions')} questions, "
                             f"{len(pool.questions)} in the pool)",
                             "give the record of a run over every question of that pool")
    row_of = {key: i for i, key in enumerate(pool.question_keys)}
    rows = [row_of[key] for key in subset.question_keys]
    docs = None if record.doc_ranks is None else record.doc_ranks[rows]
    return build_records(subset, record.ranks[rows], docs, record.ks)


def main(argv: list[str] | None = None) -> dict:
    from retrieval_qa.data import load_pool
    from retrieval_qa.evaluation.per_question import read_per_question, write_records
    from retrieval_qa.pipeline.tuning import question_subset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("record", help="a per-question record of the whole pool")
    parser.add_argument("--dataset", default="reqa_squad")
    parser.add_argument("--pool", default=None, help="default: the dataset's evaluation pool")
    parser.add_argument("--max-questions", type=int, required=True,
                        help="the subset's size, as given to rqa evaluate --pipeline")
    parser.add_argument("--seed", type=int, default=0,
                        help="the pipeline's tuning.split_seed (default 0, conf/pipeline.yaml)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--output", required=True, help="the subset's record (.questions.jsonl.gz)")
    args = parser.parse_args(argv)
    pool, _ = load_pool(args.dataset, args.pool, args.data_dir)
    subset = question_subset(pool, args.max_questions, args.seed)
    header, rows = restrict(read_per_question(args.record), pool, subset)
    write_records(args.output, header, rows)
    out = {"record": args.record, "output": args.output, "questions": header["questions"],
           "of": len(pool.questions), "seed": args.seed, "mrr": header["metrics"]["mrr"]}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
