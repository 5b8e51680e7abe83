"""Table 2 beyond the classifier's own report, on its examples folder:

* **per source**: the classifier's test examples scored again, its accuracy and mean p per
  example source (gold, BM25, dense, same paragraph): which negatives it takes for answers;
* **dual encoders as classifiers** (``--dual NAME=MODEL``, repeatable): an exported dual
  encoder's similarity of question and answer (+ context, as it encodes them) as the score,
  the threshold with the best accuracy on the training examples (as the classifier's own
  dual-encoder baseline), ACC and AUC-PR on the test examples. The paper's row is a BERT dual
  encoder trained on the gold pairs: pass the model folder of a gold-trained run.

Written to ``results/mining/cpu/classifier_table.json``.

Usage: python experiments/mining_classifier_table.py --examples EXAMPLES_DIR
    --classifier runs/mining/mining_classifier/cpu-seed42/model [--dual NAME=MODEL ...]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import torch

from retrieval_qa.data.types import Candidate
from retrieval_qa.mining.classifier_data import best_threshold, binary_metrics
from retrieval_qa.mining.examples import ClassifierExample, read_examples

ROOT = Path(__file__).resolve().parents[1]


def by_source(classifier: Path, examples: list[ClassifierExample], threshold: float = 0.5
              ) -> dict:
    """The classifier's accuracy and mean probability per source of the example."""
    from retrieval_qa.mining.scorer import ClassifierScorer

    p = ClassifierScorer.from_path(classifier)([e.question for e in examples],
                                               [e.answer for e in examples],
                                               [e.context for e in examples])
    table: dict[str, Counter] = {}
    for e, prob in zip(examples, p.tolist(), strict=True):
        c = table.setdefault(e.source, Counter())
        c["examples"] += 1
        c["correct"] += (prob >= threshold) == bool(e.label)
        c["p_sum"] += prob
    total = sum(c["correct"] for c in table.values())
    return {"classifier": str(classifier), "threshold": threshold,
            "acc": round(100 * total / len(examples), 2),
            "by_source": {k: {"examples": c["examples"],
                              "accuracy": round(100 * c["correct"] / c["examples"], 2),
                              "mean_p": round(c["p_sum"] / c["examples"], 4)}
                          for k, c in sorted(table.items())}}


def dual_scores(model, examples: list[ClassifierExample]) -> torch.Tensor:
    """The model's similarity of each example's question and answer (each text encoded once)."""
    questions = sorted({e.question for e in examples})
    answers = sorted({(e.answer, e.context) for e in examples})
    q = model.encode_questions(questions)
    a = model.encode_answers([Candidate(str(i), text, context, "")
                              for i, (text, context) in enumerate(answers)])
    qi = {t: i for i, t in enumerate(questions)}
    ai = {t: i for i, t in enumerate(answers)}
    rows = torch.tensor([qi[e.question] for e in examples])
    cols = torch.tensor([ai[(e.answer, e.context)] for e in examples])
    return (q[rows] * a[cols]).sum(-1)


def dual_as_classifier(model_dir: Path, train: list[ClassifierExample],
                       test: list[ClassifierExample]) -> dict:
    from retrieval_qa.models.artifact import load_artifact

    model = load_artifact(model_dir)
    t = best_threshold(dual_scores(model, train), torch.tensor([e.label for e in train]))
    metrics = binary_metrics(dual_scores(model, test), torch.tensor([e.label for e in test]), t)
    return {**metrics, "threshold": round(t, 6), "model": str(model_dir),
            "threshold_from": "best accuracy on the training examples"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, required=True,
                        help="the classifier's examples folder (train.jsonl, test.jsonl)")
    parser.add_argument("--classifier", type=Path, required=True)
    parser.add_argument("--dual", action="append", default=[], metavar="NAME=MODEL")
    parser.add_argument("--output", type=Path,
                        default=ROOT / "results/mining/cpu/classifier_table.json")
    args = parser.parse_args(argv)
    duals = {}
    for spec in args.dual:
        name, sep, path = spec.partition("=")
        if not sep:
            parser.error(f"--dual {spec!r}: expected NAME=MODEL_FOLDER")
        duals[name] = Path(path)
    train = read_examples(args.examples / "train.jsonl")
    test = read_examples(args.examples / "test.jsonl")
    out = {"examples": str(args.examples), "test_examples": len(test),
           "classifier": by_source(args.classifier, test),
           "dual_encoders": {name: dual_as_classifier(path, train, test)
                             for name, path in duals.items()}}
    args.output.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
