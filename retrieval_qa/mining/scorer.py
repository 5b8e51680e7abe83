"""What the miner asks of a classifier: probabilities of (question, answer, context) triples.

A :class:`PairScorer` is any object with ``__call__(questions, answers, contexts) ->
FloatTensor[N]`` (probabilities in [0, 1], one per triple, deterministic) and ``describe() ->
dict`` (what it is, for the mining manifest: a different scorer is a different job).
:class:`ClassifierScorer` wraps the trained classifier
(:class:`~retrieval_qa.mining.classifier.MiningClassifier`); tests use small stand-ins.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class PairScorer(Protocol):
    def __call__(self, questions: Sequence[str], answers: Sequence[str],
                 contexts: Sequence[str]) -> torch.Tensor: ...

    def describe(self) -> dict: ...


def _digest(path: Path) -> str:
    from .classifier_data import artifact_digest, file_digest

    return artifact_digest(path) if path.is_dir() else file_digest(path)


class ClassifierScorer:
    """The classifier of ``rqa train experiment=mining_classifier`` as a :class:`PairScorer`:
    its probabilities in batches of ``batch_size`` triples, in eval mode, on ``device``.

    Args:
        classifier: the :class:`~retrieval_qa.mining.classifier.MiningClassifier`.
        batch_size: triples per forward pass.
        source: the file or folder the classifier was read from (its digest identifies the
            classifier in the mining manifest); None: no digest.
        device: where to move the classifier; None: where it is.
    """

    def __init__(self, classifier, batch_size: int = 64, source: str | Path | None = None,
                 device: str | None = None) -> None:
        self.classifier = classifier.eval()
        if device:
            self.classifier.to(device)
        self.batch_size = int(batch_size)
        self.source = str(source) if source is not None else None
        self.digest = _digest(Path(source)) if source is not None else None

    @classmethod
    def from_path(cls, path: str | Path, batch_size: int = 64, device: str | None = None
                  ) -> ClassifierScorer:
        from .classifier import load_classifier

        return cls(load_classifier(path), batch_size, path, device)

    def __call__(self, questions, answers, contexts) -> torch.Tensor:
        return self.classifier.probabilities(list(questions), list(answers), list(contexts),
                                             self.batch_size)

    def describe(self) -> dict:
        c = self.classifier
        return {"scorer": "cross-attention classifier", "digest": self.digest,
                "pretrained": c.pretrained_label, "with_context": c.with_context,
                "max_length": c.max_length, "max_question_length": c.max_question_length,
                "context_segment": c.context_segment}
