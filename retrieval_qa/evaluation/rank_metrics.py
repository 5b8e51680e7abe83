"""torchmetrics ``Metric`` classes for validation inside training.

They apply the same rank rules as the batch evaluator (average rank on ties, minimum over gold
copies and over repeated questions) and synchronise across processes by concatenating the
per-question ranks and keys, so the numbers equal the evaluator's on the same scores.

``update(scores[B, C], gold_mask[B, C], question_ids[B])``: one row per evaluation input;
rows that share a ``question_id`` (a repeated question string) keep the minimum rank.
``update_ranks(ranks[B], question_ids[B], doc_ranks[B] | None)``: ranks already computed by
the evaluator's core (:func:`~.evaluator.rank_questions`), as the training modules do; the
metric then only gathers them across processes and computes the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from .metrics import metrics_from_ranks
from .ranking import aggregate_min, gold_ranks


class ReQARankMetric(Metric):
    """All ReQA metrics at once: ``compute()`` returns a dict of percentages (0-dim tensors).

    Args:
        ks: the cut-offs of R@k / P@k (the ``eval`` group's ``ks``).
        kwargs: torchmetrics' ``Metric`` arguments.

    Example:

        >>> import torch
        >>> metric = ReQARankMetric(ks=(1,))
        >>> scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.9, 0.1]])
        >>> gold = torch.tensor([[True, False], [True, False], [False, True]])
        >>> metric.update(scores, gold, question_ids=torch.tensor([0, 1, 1]))  # q1 twice
        >>> {k: float(v) for k, v in metric.compute().items() if k in ("mrr", "r@1")}
        {'mrr': 75.0, 'r@1': 50.0}
    """

    full_state_update = False
    higher_is_better = True

    def __init__(self, ks: Sequence[int], **kwargs) -> None:
        super().__init__(**kwargs)
        self.ks = tuple(ks)
        self.add_state("ranks", default=[], dist_reduce_fx="cat")
        self.add_state("keys", default=[], dist_reduce_fx="cat")
        self.add_state("doc_ranks", default=[], dist_reduce_fx="cat")

    def update(self, scores: torch.Tensor, gold_mask: torch.Tensor,
               question_ids: torch.Tensor) -> None:
        bad = ~torch.isfinite(scores)
        if bool(bad.any()):
            r, c = (int(x) for x in bad.nonzero()[0])
            raise ValueError(f"non-finite score {float(scores[r, c])} for question "
                             f"{int(question_ids[r])} at candidate {c}; ranks need finite "
                             "scores: check the model's embeddings for NaN/inf")
        self.ranks.append(gold_ranks(scores.float(), gold_mask.bool()))
        self.keys.append(question_ids.long().to(scores.device))

    def update_ranks(self, ranks: torch.Tensor, question_ids: torch.Tensor,
                     doc_ranks: torch.Tensor | None = None) -> None:
        self._update_count += 1  # what torchmetrics' wrapped update() does
        self._computed = None
        self.ranks.append(ranks.double())
        self.keys.append(question_ids.long().to(ranks.device))
        if doc_ranks is not None:
            self.doc_ranks.append(doc_ranks.double())

    def question_ranks(self) -> torch.Tensor:
        return aggregate_min(dim_zero_cat(self.ranks).double(), dim_zero_cat(self.keys))

    @property
    def num_questions(self) -> int:
        return len(torch.unique(dim_zero_cat(self.keys)))

    def compute(self) -> dict[str, torch.Tensor]:
        out = metrics_from_ranks(self.question_ranks().cpu(), self.ks)
        has_docs = self.doc_ranks if isinstance(self.doc_ranks, list) else [self.doc_ranks]
        if any(t.numel() for t in has_docs):
            doc = aggregate_min(dim_zero_cat(self.doc_ranks).double(), dim_zero_cat(self.keys))
            out.update(metrics_from_ranks(doc.cpu(), self.ks, prefix="doc_"))
        return {k: torch.tensor(v) for k, v in out.items()}


class MeanReciprocalRank(ReQARankMetric):
    """The MRR alone (percent, a 0-dim tensor) under the ReQA rank rules.

    Args:
        kwargs: torchmetrics' ``Metric`` arguments.

    Example:

        >>> import torch
        >>> metric = MeanReciprocalRank()
        >>> metric.update(torch.tensor([[0.1, 0.9]]), torch.tensor([[True, False]]),
        ...               torch.tensor([0]))
        >>> float(metric.compute())
        50.0
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(ks=(), **kwargs)  # MRR needs no cut-offs

    def compute(self) -> torch.Tensor:  # type: ignore[override]
        return super().compute()["mrr"]


class RecallAtK(ReQARankMetric):
    """R@k alone (percent, a 0-dim tensor) under the ReQA rank rules.

    Args:
        k: the cut-off.
        kwargs: torchmetrics' ``Metric`` arguments.

    Example:

        >>> import torch
        >>> metric = RecallAtK(2)
        >>> metric.update(torch.tensor([[0.1, 0.9]]), torch.tensor([[True, False]]),
        ...               torch.tensor([0]))
        >>> float(metric.compute())
        100.0
    """

    def __init__(self, k: int, **kwargs) -> None:
        super().__init__(ks=(k,), **kwargs)
        self.k = k

    def compute(self) -> torch.Tensor:  # type: ignore[override]
        return super().compute()[f"r@{self.k}"]
