"""ENDX Figure 4: a 2-D t-SNE of several questions sharing one answer, with that answer, per
model.

Each model's question embeddings (question tower) and the answer's embedding (answer tower),
as the model scores them (l2-normalised for cosine models), go through
``sklearn.manifold.TSNE`` on their own (one panel per model, coordinates scaled to [0, 1]
as in the paper's figure). t-SNE needs perplexity < number of points; the default is
``max(1, min(30, (n - 1) / 3))`` for the n points. Because a t-SNE picture of 7 points says
little by itself, ``figure4.json`` also gives, per model, the compactness in the original
space: mean question-answer and question-question inner products and distances.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..data.types import RetrievalPool
from .common import (
    DEFAULT_OUTPUT_DIR,
    first_per_name,
    load_models,
    output_name,
    pick_answer,
    pyplot,
    write_json,
)


def default_perplexity(n_points: int) -> float:
    """t-SNE's default perplexity, ``max(1, min(30, (n - 1) / 3))``.

    Args:
        n_points: the points embedded.

    Example:

        >>> default_perplexity(7), default_perplexity(800)
        (2.0, 30.0)
    """
    return float(max(1.0, min(30.0, (n_points - 1) / 3)))


def tsne_2d(x: np.ndarray, perplexity: float | None = None, seed: int = 0) -> np.ndarray:
    """[n, D] -> [n, 2] scaled to [0, 1] per axis.

    Args:
        x: the points ``[n, D]``.
        perplexity: t-SNE's perplexity (0 < perplexity < n); None: :func:`default_perplexity`.
        seed: t-SNE's ``random_state``.
    """
    from sklearn.manifold import TSNE

    n = len(x)
    perplexity = default_perplexity(n) if perplexity is None else float(perplexity)
    if not 0 < perplexity < n:
        raise ValueError(f"perplexity must be in (0, {n}) for {n} points, got {perplexity}")
    y = TSNE(n_components=2, perplexity=perplexity, init="random", learning_rate="auto",
             random_state=seed).fit_transform(x.astype(np.float64))
    lo, span = y.min(axis=0), np.ptp(y, axis=0)
    return (y - lo) / np.where(span > 0, span, 1.0)


def compactness(q: torch.Tensor, a: torch.Tensor) -> dict:
    """Mean question-answer and question-question inner products and distances (the
    question-question ones None for one question).

    Args:
        q: the questions' embeddings ``[n, D]``.
        a: the answer's embedding ``[1, D]`` (its row 0 is used).
    """
    q, a = q.double(), a.double()
    n = len(q)
    off = ~torch.eye(n, dtype=torch.bool)
    qq = q @ q.T
    return {"mean_qa_inner_product": round((q @ a[0]).mean().item(), 6),
            "mean_qa_distance": round((q - a[0]).norm(dim=-1).mean().item(), 6),
            "mean_qq_inner_product": round(qq[off].mean().item(), 6) if n > 1 else None,
            "mean_qq_distance": round(torch.cdist(q, q)[off].mean().item(), 6)
            if n > 1 else None}


def tsne_analysis(pool: RetrievalPool, models: Sequence[tuple[str, str]], *,
                  answer: str | None = None, num_questions: int = 6,
                  perplexity: float | None = None, seed: int = 0,
                  output_dir: str | Path = DEFAULT_OUTPUT_DIR, tag: str | None = None) -> dict:
    """Figure 4 (see the module docstring): writes ``figure4[_TAG].{png,json}``.

    Args:
        pool: the pool the answer and its questions come from.
        models: ``(name, exported folder)``; with a repeated name the first folder is used.
        answer: a candidate id or sentence text; None: the sentence with the most questions
            (:func:`~.common.pick_answer`).
        num_questions: the most questions shown.
        perplexity: t-SNE's perplexity; None: :func:`default_perplexity`.
        seed: t-SNE's seed.
        output_dir: where the figure is written.
        tag: added to the files' names; None: none.
    """
    start = time.perf_counter()
    out = Path(output_dir)
    candidate, questions = pick_answer(pool, answer, num_questions)
    chosen = first_per_name(models)
    loaded = load_models(chosen)
    panels = []
    for name, folder in chosen:
        model = loaded[folder]
        q = model.encode_questions(questions, progress=False)
        a = model.encode_answers([candidate], progress=False)
        pts = tsne_2d(torch.cat([q, a]).numpy(), perplexity, seed)
        panels.append({"model": name, "folder": folder,
                       "perplexity": default_perplexity(len(pts)) if perplexity is None
                       else perplexity,
                       "questions_xy": pts[:-1].round(6).tolist(),
                       "answer_xy": pts[-1].round(6).tolist(),
                       "mean_question_answer_distance_2d": round(float(
                           np.linalg.norm(pts[:-1] - pts[-1], axis=1).mean()), 6),
                       "original_space": compactness(q, a)})
    stem = output_name("figure4", tag)
    png = _figure4(panels, out / f"{stem}.png")
    js = write_json(out / f"{stem}.json", {
        "answer": {"id": candidate.id, "text": candidate.text}, "questions": questions,
        "dataset": pool.dataset, "pool": pool.pool, "seed": seed, "panels": panels})
    return {"analysis": "tsne", "answer": candidate.id, "questions": len(questions),
            "compactness": {p["model"]: p["original_space"] for p in panels},
            "files": [png, js], "seconds": round(time.perf_counter() - start, 3)}


def _figure4(panels: list[dict], path: Path) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        q = np.asarray(p["questions_xy"])
        ax.scatter(q[:, 0], q[:, 1], c="tab:blue", s=45, label="question")
        for i, (x, y) in enumerate(q):
            ax.annotate(f"Q{i + 1}", (x, y), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
        ax.scatter([p["answer_xy"][0]], [p["answer_xy"][1]], c="tab:orange", marker="*",
                   s=220, edgecolors="black", label="answer")
        ax.set_xlim(-0.1, 1.1)
        ax.set_ylim(-0.1, 1.3)  # the points lie in [0, 1]: the legend above them hides none
        ax.set_xlabel("t-SNE 1 (scaled to [0, 1])", fontsize=8)
        ax.set_ylabel("t-SNE 2 (scaled to [0, 1])", fontsize=8)
        ax.set_title(p["model"])
        ax.legend(fontsize=7, loc="upper center", ncol=2)
    fig.suptitle("t-SNE of questions sharing one answer", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
