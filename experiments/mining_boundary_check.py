"""Do the MultiReQA SQuAD train boundaries fit the SQuAD train file's text?

Two checks, written to ``results/mining/multireqa_train_check.json``:

* dev, where the MRQA file exists: the rebuild (MultiReQA dev boundaries over the SQuAD dev
  text, :mod:`retrieval_qa.data.multireqa_train`) against the pool built from the MRQA file:
  identical candidates (id, text, paragraph), and the QA pairs in common (the rebuild takes
  SQuAD's answer offsets and keeps the questions MRQA dropped; MRQA's detected spans can
  put an answer in more sentences);
* train: the rebuild's report on the whole file: contexts matched, what does not fit
  (unmatched contexts and their sentences, answers in no single sentence), soft checks.

Usage: RQA_DATA_DIR=../shared/data python experiments/mining_boundary_check.py
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from retrieval_qa.data import load_pool
from retrieval_qa.data.multireqa import read_boundaries
from retrieval_qa.data.multireqa_train import rebuild_multireqa_train
from retrieval_qa.data.sources import resolve_data_dir
from retrieval_qa.data.squad import read_squad
from retrieval_qa.portable_paths import portable

OUT = Path(__file__).resolve().parents[1] / "results" / "mining" / "multireqa_train_check.json"


def main() -> None:
    start = time.perf_counter()
    data = resolve_data_dir()[0]
    bounds, _ = read_boundaries(data / "multireqa/dev/SQuAD/candidates.json.gz")
    paragraphs, _ = read_squad(data / "squad/dev-v1.1.json.gz")
    rebuilt, notes = rebuild_multireqa_train(bounds, paragraphs, pool="test")
    reference, _ = load_pool("multireqa_squad", "test", data)
    squad_id = {}
    with gzip.open(data / "mrqa/dev/SQuAD.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in list(f)[1:]:
            for qa in json.loads(line)["qas"]:
                squad_id[qa["qid"]] = qa["id"]
    ref_c = {(c.id, c.text, c.context) for c in reference.candidates}
    new_c = {(c.id, c.text, c.context) for c in rebuilt.candidates}
    ref_p = {(squad_id[p.question_id], p.answer_id) for p in reference.pairs}
    new_p = {(p.question_id, p.answer_id) for p in rebuilt.pairs}
    kept = set(squad_id.values())
    dev = {"rebuild": {k: v for k, v in notes["rebuild"].items() if k != "unmatched_examples"},
           "candidates_rebuilt": len(new_c), "candidates_mrqa": len(ref_c),
           "candidates_identical": len(ref_c & new_c),
           "pairs_rebuilt": len(new_p), "pairs_mrqa": len(ref_p), "pairs_common": len(ref_p & new_p),
           "pairs_mrqa_only": len(ref_p - new_p), "pairs_rebuilt_only": len(new_p - ref_p),
           "pairs_rebuilt_only_of_questions_mrqa_dropped": sum(1 for q, _ in new_p - ref_p
                                                               if q not in kept),
           "questions_rebuilt": len(rebuilt.questions), "questions_mrqa": len(reference.questions)}
    train, train_notes = load_pool("multireqa_squad", "train", data)
    result = {
        "what": "MultiReQA SQuAD boundaries over SQuAD text (retrieval_qa/data/multireqa_train.py)",
        "dev_check_against_mrqa": dev,
        "train": {"source": train.source, "report": train_notes["rebuild"],
                  "candidates": len(train.candidates), "questions": len(train.questions),
                  "pairs": len(train.pairs), "paper_training_pairs": 87_133},
        "seconds": round(time.perf_counter() - start, 1)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(portable(result), indent=2) + "\n")  # $RQA_DATA_DIR/..., no machine paths
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
