"""SDE/ADE Figure 2: do the two towers embed questions and answers into one space?

For each model, ``n`` QA pairs drawn at random from the pool (the paper: 400 questions and 400
answers of the NaturalQuestions eval set) are encoded, questions by the question tower and
answers by the answer tower, as the model scores them; the 2n points go through one 2-D t-SNE
per model (blue questions, orange answers). The paper reads the figure by eye: ADEs without a
shared projection layer give two disjoint clouds, SDE and ADE-SPL one mixed cloud.
``figure2.json`` puts numbers on it, per model:

- ``knn_same_tower``: the mean share of each point's ``k`` nearest neighbours that come from
  its own tower, in the original space and in the t-SNE plane. About 0.5 when the towers mix
  (both sides have n points), 1.0 when they are disjoint.
- ``centroid_distance``: the distance between the mean question and the mean answer, beside
  ``mean_pair_distance`` (a question to its own answer) and ``mean_random_distance`` (a
  question to the answer of another pair).
"""

from __future__ import annotations

import random
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
    pyplot,
    write_json,
)
from .tsne import default_perplexity, tsne_2d


def knn_same_side(x: np.ndarray, side: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's ``k`` nearest other rows (euclidean) with the same ``side``.

    Args:
        x: points ``[N, D]``.
        side: ``[N]`` labels (0 question, 1 answer).
        k: the neighbours (0 < k < N).

    Example:

        >>> x = np.array([[0.0], [0.1], [5.0], [5.1]])
        >>> knn_same_side(x, np.array([0, 0, 1, 1]), k=1)
        1.0
    """
    if not 0 < k < len(x):
        raise ValueError(f"k must be in (0, {len(x)}) for {len(x)} points, got {k}")
    x = torch.as_tensor(x, dtype=torch.float64)
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    nearest = d.topk(k, largest=False).indices
    side = torch.as_tensor(side)
    return round((side[nearest] == side[:, None]).double().mean().item(), 6)


def tower_geometry(q: torch.Tensor, a: torch.Tensor) -> dict:
    """Distances between the question cloud and the answer cloud.

    Args:
        q: question embeddings ``[N, D]``.
        a: answer embeddings ``[N, D]``, row i answering question i.
    """
    q, a = q.double(), a.double()
    n = len(q)
    shifted = a.roll(1, dims=0) if n > 1 else a
    return {"centroid_distance": round((q.mean(0) - a.mean(0)).norm().item(), 6),
            "mean_pair_distance": round((q - a).norm(dim=-1).mean().item(), 6),
            "mean_random_distance": round((q - shifted).norm(dim=-1).mean().item(), 6)}


def sample_pairs(pool: RetrievalPool, n: int, seed: int = 0) -> tuple[list[str], list]:
    """``n`` distinct questions drawn at random, each with its gold answer sentence.

    Args:
        pool: the pool.
        n: the questions drawn (at most the pool's distinct questions).
        seed: the draw's seed.
    """
    by_id = {c.id: c for c in pool.candidates}
    firsts: dict[str, str] = {}
    for p in pool.pairs:
        firsts.setdefault(p.question, p.answer_id)
    if len(firsts) < n:
        raise ValueError(f"{pool.dataset}/{pool.pool} has {len(firsts)} distinct questions; "
                         f"asked for {n} (lower --pairs)")
    questions = random.Random(seed).sample(sorted(firsts), n)
    return questions, [by_id[firsts[q]] for q in questions]


def towers_analysis(pool: RetrievalPool, models: Sequence[tuple[str, str]], *, pairs: int = 400,
                    k: int = 10, perplexity: float | None = None, seed: int = 0,
                    output_dir: str | Path = DEFAULT_OUTPUT_DIR, tag: str | None = None,
                    label: str | None = None) -> dict:
    """Figure 2 (see the module docstring): writes ``figure2[_TAG].{png,json}``.

    Args:
        pool: the pool the QA pairs are drawn from.
        models: ``(name, exported folder)``; a repeated name keeps its first folder.
        pairs: the QA pairs drawn.
        k: the neighbours of :func:`knn_same_side`.
        perplexity: t-SNE's perplexity; None: :func:`~.tsne.default_perplexity`.
        seed: the draw's and t-SNE's seed.
        output_dir: where the figure is written.
        tag: added to the files' names; None: none.
        label: what the models are (e.g. "trained", "off-the-shelf MiniLM"), in the title.
    """
    start = time.perf_counter()
    questions, answers = sample_pairs(pool, pairs, seed)
    chosen = first_per_name(models)
    loaded = load_models(chosen)
    side = np.array([0] * pairs + [1] * pairs)
    panels = []
    for name, folder in chosen:
        model = loaded[folder]
        q = model.encode_questions(questions, progress=False)
        a = model.encode_answers(answers, progress=False)
        x = torch.cat([q, a]).numpy()
        pts = tsne_2d(x, perplexity, seed)
        panels.append({
            "model": name, "folder": folder,
            "sharing": (getattr(model, "meta", {}).get("towers") or {}).get("sharing"),
            "perplexity": default_perplexity(len(pts)) if perplexity is None else perplexity,
            "knn_same_tower": {"original": knn_same_side(x, side, k),
                               "tsne": knn_same_side(pts, side, k)},
            "original_space": tower_geometry(q, a),
            "questions_xy": pts[:pairs].round(5).tolist(),
            "answers_xy": pts[pairs:].round(5).tolist()})
    stem = output_name("figure2", tag)
    title = (f"t-SNE of {pairs} questions (question tower) and their answers (answer tower), "
             f"{pool.dataset}/{pool.pool}" + (f" ({label})" if label else ""))
    png = _figure2(panels, Path(output_dir) / f"{stem}.png", title, k)
    js = write_json(Path(output_dir) / f"{stem}.json", {
        "dataset": pool.dataset, "pool": pool.pool, "pairs": pairs, "k": k, "seed": seed,
        "label": label, "panels": panels})
    return {"analysis": "towers", "pairs": pairs, "k": k,
            "models": {p["model"]: {key: p[key] for key in
                                    ("sharing", "knn_same_tower", "original_space")}
                       for p in panels},
            "files": [png, js], "seconds": round(time.perf_counter() - start, 3)}


def _figure2(panels: list[dict], path: Path, title: str, k: int) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.9), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        for key, colour, label in (("questions_xy", "tab:blue", "question"),
                                   ("answers_xy", "tab:orange", "answer")):
            xy = np.asarray(p[key])
            ax.scatter(xy[:, 0], xy[:, 1], c=colour, s=6, alpha=0.7, label=label)
        ax.set_title(f"{p['model']}\nsame-tower {k}-NN share {p['knn_same_tower']['tsne']:.2f}",
                     fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("t-SNE 1", fontsize=8)
        ax.set_ylabel("t-SNE 2", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()  # below the panels: over no point
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, markerscale=2,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
