"""experiments/mining_classifier_table.py on stand-in models: the classifier's accuracy per
example source, and a dual encoder's similarity as a classifier score (each text encoded
once, threshold from the training examples)."""

from __future__ import annotations

import pytest
import torch

from experiments import mining_classifier_table as T
from retrieval_qa.mining.examples import ClassifierExample


def ex(q, a, label, source):
    return ClassifierExample(q, a, f"context of {a}", label, source, q, a)


EXAMPLES = [ex("q1", "a1", 1, "gold"), ex("q1", "a2", 0, "bm25"),
            ex("q2", "a1", 0, "same_document"), ex("q2", "a3", 1, "gold")]
Q = {"q1": [1.0, 0.0], "q2": [0.0, 1.0]}
A = {"a1": [0.9, 0.1], "a2": [0.2, 0.3], "a3": [0.4, 0.8]}


class FakeDual:
    def __init__(self):
        self.encoded = []

    def encode_questions(self, texts):
        self.encoded += texts
        return torch.tensor([Q[t] for t in texts])

    def encode_answers(self, candidates):
        assert all(c.context == f"context of {c.text}" for c in candidates)
        self.encoded += [c.text for c in candidates]
        return torch.tensor([A[c.text] for c in candidates])


def test_dual_scores_are_the_pairs_similarities_with_each_text_encoded_once():
    model = FakeDual()
    scores = T.dual_scores(model, EXAMPLES)
    expected = [0.9, 0.2, 0.1, 0.8]
    torch.testing.assert_close(scores, torch.tensor(expected))
    assert sorted(model.encoded) == ["a1", "a2", "a3", "q1", "q2"]


def test_dual_as_classifier_takes_its_threshold_from_the_training_examples(monkeypatch):
    import retrieval_qa.models.artifact as artifact

    monkeypatch.setattr(artifact, "load_artifact", lambda folder: FakeDual())
    out = T.dual_as_classifier("model-dir", EXAMPLES, EXAMPLES)
    assert 0.2 < out["threshold"] <= 0.8 and out["acc"] == 100.0
    assert out["auc_pr"] == pytest.approx(100.0) and out["model"] == "model-dir"


def test_classifier_accuracy_per_source(monkeypatch):
    import retrieval_qa.mining.scorer as scorer

    probabilities = torch.tensor([0.9, 0.6, 0.2, 0.4])  # right, wrong, right, wrong

    class FakeScorer:
        @classmethod
        def from_path(cls, path):
            return lambda q, a, c: probabilities

    monkeypatch.setattr(scorer, "ClassifierScorer", FakeScorer)
    out = T.by_source("clf", EXAMPLES)
    assert out["acc"] == 50.0
    assert out["by_source"]["gold"] == {"examples": 2, "accuracy": 50.0, "mean_p": 0.65}
    assert out["by_source"]["bm25"]["accuracy"] == 0.0
    assert out["by_source"]["same_document"]["accuracy"] == 100.0
