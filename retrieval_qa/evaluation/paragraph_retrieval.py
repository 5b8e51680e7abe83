"""Metrics of the paragraph retrieval task (residual-embedding paper, 3.1 and 4.2): every
question against every paragraph, scored by the dot product of l2-normalised embeddings
(the same order as the paper's Euclidean distance between them).

- recall@k: share of questions whose paragraph ranks within the top k (average-tie ranks,
  as the ReQA evaluator);
- average precision and the precision-recall curve over all question-paragraph pairs sorted
  by score (a pair is positive when the paragraph is the question's): the paper's Figures
  4-7 and Table 7; computed with torchmetrics' exact (unbinned) binary metrics.
- the other direction, retrieving questions from paragraphs (Table 10, "the closest question
  embedding would be the true pair for the corresponding paragraph embedding"): every
  (question, paragraph) pair is a query, its paragraph ranking all the pool's questions, and
  recall@k counts the pairs whose question ranks within the top k (the paragraph's other
  questions compete: a paragraph with n questions puts at most one at rank 1). Also per
  paragraph: the rank of its best-ranked question (``any``), the ReQA rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torchmetrics.functional.classification import (
    binary_average_precision,
    binary_precision_recall_curve,
)

from .ranking import gold_ranks, rank_of_score

PARAGRAPH_KS = (1, 2, 5, 10, 20, 50)
MAX_PAIRS = 60_000_000   # AP/P-R over all pairs holds ~4 x 8 bytes per pair


def paragraph_ranks(q: torch.Tensor, p: torch.Tensor, gold: Sequence[int] | torch.Tensor,
                    block: int = 2048) -> torch.Tensor:
    """[Q] average-tie rank (1-based) of each question's paragraph.

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        block: questions scored at once.
    """
    gold = torch.as_tensor(gold, dtype=torch.long)
    if q.shape[0] != gold.shape[0]:
        raise ValueError(f"{q.shape[0]} question vectors for {gold.shape[0]} gold paragraphs")
    out = []
    for lo in range(0, q.shape[0], block):
        s = q[lo:lo + block].float() @ p.float().T
        g = gold[lo:lo + block]
        out.append(rank_of_score(s, s.gather(1, g[:, None])))
    return torch.cat(out)


def question_ranks(q: torch.Tensor, p: torch.Tensor, gold: Sequence[int] | torch.Tensor,
                   block: int = 2048) -> torch.Tensor:
    """[Q] rank of question i among all questions for its paragraph ``p[gold[i]]``.

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        block: questions ranked at once.
    """
    gold = torch.as_tensor(gold, dtype=torch.long)
    return paragraph_ranks(p[gold], q, torch.arange(q.shape[0]), block)


def first_question_ranks(q: torch.Tensor, p: torch.Tensor, gold: Sequence[int] | torch.Tensor,
                         block: int = 512) -> torch.Tensor:
    """[P'] per paragraph with at least one question: the rank of its best-ranked question.

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        block: paragraphs scored at once.
    """
    gold = torch.as_tensor(gold, dtype=torch.long)
    have = torch.unique(gold)
    out = []
    for lo in range(0, have.numel(), block):
        ids = have[lo:lo + block]
        s = p[ids].float() @ q.float().T
        out.append(gold_ranks(s, gold[None, :] == ids[:, None]))
    return torch.cat(out)


def evaluate_questions_from_paragraphs(q, p, gold, ks: Sequence[int] = PARAGRAPH_KS) -> dict:
    """Table 10's direction: recall@k over the (question, paragraph) pairs (``pairs`` is
    their number, ``r@k`` their recall), and per paragraph its best question (``any``).

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        ks: the cut-offs.
    """
    out = recall_at_k(question_ranks(q, p, gold), ks)
    out["pairs"] = out.pop("questions")
    out["any"] = recall_at_k(first_question_ranks(q, p, gold), ks)
    out["any"]["paragraphs"] = out["any"].pop("questions")
    return out


def recall_at_k(ranks: torch.Tensor, ks: Sequence[int] = PARAGRAPH_KS) -> dict:
    """``r@k`` in % and ``hits@k`` (the paper's "# of docs"), plus ``avg_recall`` (mean of the
    recall@k, the paper's "avg recalls" of Tables 2, 9, 10 with ks 1/2/5/10/20/50).

    Args:
        ranks: the ranks (1-based).
        ks: the cut-offs.
    """
    out: dict = {"questions": int(ranks.numel())}
    for k in ks:
        hits = int((ranks <= k).sum())
        out[f"hits@{k}"] = hits
        out[f"r@{k}"] = round(100.0 * hits / ranks.numel(), 2)
    out["avg_recall"] = round(sum(out[f"r@{k}"] for k in ks) / len(ks), 2)
    return out


def _pair_scores(q, p, gold, max_pairs):
    n = q.shape[0] * p.shape[0]
    if n > max_pairs:
        raise ValueError(f"{q.shape[0]} x {p.shape[0]} = {n:,} pairs is over the {max_pairs:,} "
                         f"that AP/P-R hold in memory; evaluate on the dev pool or fewer "
                         f"questions")
    scores = (q.float() @ p.float().T).flatten()
    target = torch.zeros(q.shape[0], p.shape[0], dtype=torch.long)
    target[torch.arange(q.shape[0]), torch.as_tensor(gold, dtype=torch.long)] = 1
    return scores, target.flatten()


def average_precision(q, p, gold, max_pairs: int = MAX_PAIRS) -> float:
    """AP over every (question, paragraph) pair, ranked by score (a pair is positive
    when the paragraph is the question's).

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        max_pairs: the most pairs held in memory (more is a ValueError).
    """
    scores, target = _pair_scores(q, p, gold, max_pairs)
    return float(binary_average_precision(scores, target, thresholds=None))


def precision_recall_points(q, p, gold, points: int = 500, max_pairs: int = MAX_PAIRS
                            ) -> tuple[list[float], list[float]]:
    """The exact P-R curve, thinned to about ``points`` points for plotting.

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        points: about how many points to keep.
        max_pairs: the most pairs held in memory (more is a ValueError).
    """
    scores, target = _pair_scores(q, p, gold, max_pairs)
    precision, recall, _ = binary_precision_recall_curve(scores, target, thresholds=None)
    idx = torch.linspace(0, precision.numel() - 1, min(points, precision.numel())).long()
    return precision[idx].tolist(), recall[idx].tolist()


def evaluate_paragraphs(q, p, gold, ks: Sequence[int] = PARAGRAPH_KS, with_ap: bool = True,
                        max_pairs: int = MAX_PAIRS) -> dict:
    """The paragraph task's metrics: recall@k of each question's paragraph
    (:func:`recall_at_k`), the paragraph count and, with ``with_ap``, the AP.

    Args:
        q: ``[Q, D]`` question embeddings.
        p: ``[P, D]`` paragraph embeddings.
        gold: ``[Q]``, each question's paragraph (row of ``p``).
        ks: the cut-offs.
        with_ap: also the average precision over all pairs.
        max_pairs: the most pairs the AP holds in memory (more is a ValueError).
    """
    out = recall_at_k(paragraph_ranks(q, p, gold), ks)
    out["paragraphs"] = int(p.shape[0])
    if with_ap:
        out["ap"] = round(average_precision(q, p, gold, max_pairs), 4)
    return out


def plot_pr_curves(curves: dict[str, tuple[list[float], list[float], float]],
                   path: str | Path, title: str = "") -> Path:
    """One PNG with a P-R curve per name.

    Args:
        curves: ``{name: (precision, recall, ap)}``.
        path: the PNG to write.
        title: the plot's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for name, (precision, recall, ap) in curves.items():
        ax.plot(recall, precision, label=f"{name} (AP {ap:.3f})")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
