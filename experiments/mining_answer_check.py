"""How plausible are the pairs `rqa mine` kept? A proxy without human labels.

Every neighbour the miner scored (the ``scored/`` table of its output folder) is checked
against the SQuAD train file the pool was rebuilt from:

* ``has_answer``: the sentence contains one of the question's SQuAD answer strings (case
  folded). A sentence that repeats the answer elsewhere can answer the question too, so this
  is the share of plausible extra positives; it misses paraphrased answers and counts a
  sentence that merely mentions the answer string;
* ``same_paragraph``: the sentence is part of the question's own paragraph.

Rows are counted by the miner's status (``mined``, ``below_threshold``, ``duplicate``) and,
for mined pairs, by the classifier's probability, written to
``results/mining/cpu/mined_answer_check.json``.

Usage: RQA_DATA_DIR=../shared/data python experiments/mining_answer_check.py [--mined DIR]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from retrieval_qa.data.sources import resolve_data_dir
from retrieval_qa.data.squad import read_squad

ROOT = Path(__file__).resolve().parents[1]
BINS = [(0.5, 0.7), (0.7, 0.9), (0.9, 1.0)]


def check(mined: Path, data: Path) -> dict:
    import datasets

    scored = datasets.load_from_disk(str(mined / "scored"))
    paragraphs, _ = read_squad(data / "squad/train-v1.1.json.gz")
    answers, context = {}, {}
    for paragraph in paragraphs:
        for qa in paragraph.qas:
            answers[qa.id] = {a.text.lower() for a in qa.answers}
            context[qa.id] = paragraph.context
    counts: dict[str, Counter] = {}
    unknown = []
    for row in scored:
        qid = row["question_id"]
        if qid not in answers:
            unknown.append(qid)
            continue
        sentence = row["answer"]
        has_answer = any(a in sentence.lower() for a in answers[qid])
        same_paragraph = sentence in context[qid]
        keys = [row["status"]]
        if row["status"] == "mined":
            p = row["probability"]
            keys += [f"mined, p in [{lo}, {hi})" for lo, hi in BINS
                     if lo <= p < hi or (hi == 1.0 and p == 1.0)]
        for key in keys:
            c = counts.setdefault(key, Counter())
            c["pairs"] += 1
            c["has_answer"] += has_answer
            c["same_paragraph"] += same_paragraph
    if unknown:
        raise ValueError(f"{mined / 'scored'}: {len(unknown)} rows have a question id that is not "
                         f"in {data / 'squad/train-v1.1.json.gz'} (first: {unknown[0]!r}); was "
                         "the pool built from another file?")
    table = {key: {"pairs": c["pairs"],
                   "has_answer_percent": round(100 * c["has_answer"] / c["pairs"], 2),
                   "same_paragraph_percent": round(100 * c["same_paragraph"] / c["pairs"], 2)}
             for key, c in sorted(counts.items())}
    summary = json.loads((mined / "summary.json").read_text())
    return {"mined": str(mined), "pool": summary["pool"], "classifier": summary["paths"],
            "rows": len(scored), "by_status": table,
            "note": "has_answer: the sentence contains a SQuAD answer string of the question "
                    "(case folded); same_paragraph: the sentence is in the question's paragraph"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mined", type=Path, default=Path("runs/mining/mined"))
    parser.add_argument("--output", type=Path,
                        default=ROOT / "results/mining/cpu/mined_answer_check.json")
    args = parser.parse_args(argv)
    out = check(args.mined, resolve_data_dir()[0])
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["by_status"], indent=2))


if __name__ == "__main__":
    main()
