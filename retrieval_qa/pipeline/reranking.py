"""Reranking the fused lists: the reranker's scores of each question's head (its fused top k,
kept per shard in :mod:`.reranker_scores`), the head placed above the rest of its list with
the reranker's share of its score, and the depth, share and confidence gate chosen on the
validation side (:func:`tune_rerank`): the setting of best validation MRR, or
(``select: least_reliance``) the one that relies least on the reranker among those the
validation side cannot tell from the best."""

from __future__ import annotations

import time

import numpy as np

from ..data.types import RetrievalPool
from ..evaluation.evaluator import _question_name
from ..evaluation.metrics import metrics_from_ranks
from .fused_ranks import ordered, rank_lists
from .fusion import normalise
from .gate import confidences, gate_candidates, gated_weights
from .reranker_scores import RerankerScores
from .rerankers import SELECT

__all__ = ["SHARD_QUESTIONS", "head_scores", "place", "rerank", "select_setting", "tune_rerank"]

#: questions per call of the reranker and per shard of its scores (a crash loses at most one)
SHARD_QUESTIONS = 256


def head_scores(pool: RetrievalPool, fused: list[tuple], score_pairs, top_k: int,
                progress: bool = False, cache: RerankerScores | None = None
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per question: the positions of its fused list's ``top_k`` best (fused order) and their
    reranker scores, ``score_pairs`` called once per shard of :data:`SHARD_QUESTIONS`
    questions (the reranker takes a call's pairs in length order: less padding than a call
    per question).

    Args:
        pool: the pool whose candidates the lists index.
        fused: per question ``(ids, scores)``, the fused list.
        score_pairs: ``(questions, sentences) -> scores``; its ``text_of`` (candidate -> text),
            when it has one, gives the texts, else each candidate's sentence.
        top_k: the head's depth.
        progress: a bar over the questions.
        cache: where each finished shard is written and read back from
            (:mod:`.reranker_scores`); None: nowhere.
    """
    from tqdm.auto import tqdm

    heads = [ordered(np.asarray(ids), np.asarray(scores, dtype=np.float64))[:top_k]
             for ids, scores in fused]
    out: list[tuple[np.ndarray, np.ndarray]] = []
    with tqdm(total=len(fused), desc=f"rerank top-{top_k} ({pool.pool})", unit="q",
              disable=not progress, leave=False) as bar:
        for lo in range(0, len(fused), SHARD_QUESTIONS):
            rows = range(lo, min(lo + SHARD_QUESTIONS, len(fused)))
            questions = [pool.questions[q] for q in rows]
            ids = [np.asarray(fused[q][0])[heads[q]] for q in rows]
            values = cache.read(lo, questions, ids) if cache is not None else None
            if values is None or any(np.isnan(v).any() for v in values):
                start = time.perf_counter()
                values = _score_heads(pool, rows, ids, score_pairs, values)
                if cache is not None:
                    cache.write(lo, questions, ids, values, time.perf_counter() - start)
            out += zip((heads[q] for q in rows), values, strict=True)
            bar.update(len(rows))
    return out


def _score_heads(pool: RetrievalPool, rows: range, ids: list[np.ndarray], score_pairs,
                 known: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """The scores of the heads ``ids`` of the questions ``rows``, in one call: of every pair,
    or of those that ``known`` (per question, its head's scores read back, NaN where none)
    lacks."""
    known = known or [np.full(len(head), np.nan) for head in ids]
    todo = [np.isnan(k) for k in known]
    counts = [int(t.sum()) for t in todo]
    values = [np.array(k, dtype=np.float64) for k in known]
    if sum(counts):
        text_of = getattr(score_pairs, "text_of", None) or (lambda c: c.text)
        flat = np.asarray(score_pairs(
            [pool.questions[q] for q, n in zip(rows, counts, strict=True) for _ in range(n)],
            [text_of(pool.candidates[c]) for head, t in zip(ids, todo, strict=True)
             for c in head[t]]), dtype=np.float64)
        for v, t, part in zip(values, todo, np.split(flat, np.cumsum(counts)[:-1]),
                              strict=True):
            v[t] = part
    for q, v in zip(rows, values, strict=True):
        if not np.isfinite(v).all():
            raise ValueError(f"the reranker gave a non-finite score for "
                             f"{_question_name(pool, q)}; check the reranker's export")
    return values


def place(fused: list[tuple], heads: list[tuple], weight: float | np.ndarray = 1.0
          ) -> list[tuple]:
    """The fused lists with each head rescored and placed above the rest of its list (tier
    1), which keeps its fused order; unretrieved candidates stay below both. The head's score:
    the reranker's (``weight`` 1), or ``weight * r + (1 - weight) * f`` with ``r`` and ``f``
    the reranker's and the fused scores of the head, each min-max normalised over the head.

    Args:
        fused: per question ``(ids, scores)``, the fused list.
        heads: per question ``(positions, reranker scores)`` (:func:`head_scores`).
        weight: the reranker's share: one for every question, or ``[Q]`` one per question
            (:func:`.gate.gated_weights`).
    """
    out = []
    weights = np.broadcast_to(np.asarray(weight, dtype=np.float64), (len(fused),))
    for (ids, scores), (head, values), weight in zip(fused, heads, weights, strict=True):
        ids, new = np.asarray(ids), np.asarray(scores, dtype=np.float64).copy()
        tiers = np.zeros(len(ids))
        if len(head):
            mixed = values if weight == 1 else (
                weight * normalise(values, "minmax")
                + (1 - weight) * normalise(new[head], "minmax"))
            new[head] = mixed
            tiers[head] = 1
        out.append((ids, new, tiers))
    return out


def rerank(pool: RetrievalPool, fused: list[tuple], score_pairs, top_k: int,
           weight: float = 1.0, gate: float | None = None, progress: bool = False,
           cache: RerankerScores | None = None) -> tuple[list[tuple], np.ndarray]:
    """The fused lists with their ``top_k`` best reranked (:func:`head_scores`,
    :func:`place`), a question whose reranker's confidence is below ``gate`` keeping its
    fused order (:mod:`.gate`); and each question's confidence.

    Args:
        pool: the pool whose candidates the lists index.
        fused: per question ``(ids, scores)``, the fused list.
        score_pairs: the reranker, as :func:`head_scores`.
        top_k: the head's depth.
        weight: the reranker's share of the head's score.
        gate: the confidence threshold; None: no gate.
        progress: a bar over the questions.
        cache: the shards of reranker scores (:func:`head_scores`); None: none.
    """
    heads = head_scores(pool, fused, score_pairs, top_k, progress, cache)
    conf = confidences(pool, fused, heads)
    return place(fused, heads, gated_weights(conf, weight, gate)), conf


def tune_rerank(val: RetrievalPool, val_fused: list[tuple], score_pairs, depths: list[int],
                weight: float | str, grid_step: float, memory_mb: float,
                gate: float | str | None = None, gate_quantiles=(),
                progress: bool = False, cache: RerankerScores | None = None,
                select: str = "best", select_se: float = 1.0) -> dict:
    """The reranking depth, head weight and confidence gate chosen on the validation
    lists by ``select`` (:func:`select_setting`); each pair scored once, at the deepest depth
    (a head of depth k is the first k of the deepest one: the same pairs in the same fused
    order).

    Args:
        val: the validation pool.
        val_fused: its fused lists, per question ``(ids, scores)``.
        score_pairs: the reranker, as :func:`head_scores`.
        depths: the head depths to try.
        weight: the reranker's share, or ``"tune"``: the grid ``0, grid_step, ..., 1``.
        grid_step: the step of that grid.
        memory_mb: the evaluator's memory budget, in MiB.
        gate: the confidence threshold (None: no gate), or ``"tune"``: no gate or one of the
            validation confidences' ``gate_quantiles`` (:mod:`.gate`).
        gate_quantiles: the quantiles ``"tune"`` tries.
        progress: a bar over the questions.
        cache: the shards of reranker scores (:func:`head_scores`); None: none.
        select: ``best`` or ``least_reliance`` (:func:`select_setting`).
        select_se: the standard errors of ``least_reliance``.
    """
    heads = head_scores(val, val_fused, score_pairs, max(depths), progress, cache)
    grid = np.round(np.arange(0, 1 + grid_step / 2, grid_step), 6) if weight == "tune" \
        else [weight]
    mrr: dict[int, dict[float, float]] = {}
    by_gate: dict[int, dict[float, dict[float, float]]] = {}
    conf_at: dict[int, np.ndarray] = {}
    rr: dict[tuple[int, float, float], np.ndarray] = {}
    for k in sorted(depths):
        top = [(h[:k], v[:k]) for h, v in heads]
        conf = conf_at[k] = confidences(val, val_fused, top)
        gates = gate_candidates(conf, gate_quantiles) if gate == "tune" else [gate or 0.0]
        by_gate[k] = {}
        for g in gates:
            by_gate[k][g] = {}
            for w in grid:
                ranks, _ = rank_lists(val, place(val_fused, top, gated_weights(conf, w, g)),
                                      doc_level=False, memory_mb=memory_mb)
                by_gate[k][g][float(w)] = round(float(metrics_from_ranks(ranks, (1,))["mrr"]), 4)
                rr[k, g, float(w)] = 100.0 / np.asarray(ranks, dtype=np.float64)
        mrr[k] = by_gate[k][gates[0]]
    chosen = select_setting(rr, select, select_se,
                            {s: by_gate[s[0]][s[1]][s[2]] for s in rr})
    k, g, w = chosen["setting"]
    found = {"top_k": k, "weight": w, "gate": g or None, "val_mrr": by_gate[k][g][w],
             "select": select, **{key: v for key, v in chosen.items() if key != "setting"},
             "val_mrr_by_depth_and_weight": mrr,
             "val_pairs_scored": int(sum(len(h) for h, _ in heads))}
    conf = conf_at[k]
    found["val_confidence_mean"] = round(float(np.mean(conf)), 4) if len(conf) else None
    found["val_gated_share"] = round(float(np.mean(conf < g)), 4) if g and len(conf) else 0.0
    if gate == "tune":
        found["val_mrr_by_depth_gate_and_weight"] = by_gate
    return found


def select_setting(rr: dict[tuple[int, float, float], np.ndarray], select: str = "best",
                   select_se: float = 1.0, mrr: dict | None = None) -> dict:
    """The chosen ``(depth, gate, weight)`` of validation settings and what the choice saw, by the rule of
    ``select``:

    - ``best``: the setting of best MRR; ties: the shallowest depth, then the least weight,
      then the lowest gate.
    - ``least_reliance``: among the settings whose MRR is within ``select_se`` standard errors
      of the best's (the standard error of the mean of their per-question differences, a
      paired comparison on the same questions), the one that relies least on the reranker:
      the least weight, then the shallowest depth, then the highest gate. The validation side
      cannot tell these settings from the best; the one that trusts the reranker least loses
      least where the reranker is wrong, such as out of domain.

    Args:
        rr: per setting ``(depth, gate, weight)``, its validation questions' reciprocal ranks
            (%), the same questions in the same order.
        select: ``best`` or ``least_reliance`` (above).
        select_se: the standard errors of ``least_reliance``.
        mrr: per setting, the MRR that ranks them; None: the mean of ``rr`` (the caller's
            rounded figures keep its ties).

    Example:

        >>> import numpy as np
        >>> rr = {(10, 0.0, 0.5): np.array([100.0, 100, 100, 50]),   # MRR 87.5
        ...       (10, 0.0, 0.2): np.array([100.0, 100, 50, 50]),    # 75: 12.5 +- 12.5 below
        ...       (10, 0.0, 0.0): np.array([50.0, 50, 50, 50])}      # 50: 37.5 +- 12.5 below
        >>> select_setting(rr)["setting"], select_setting(rr, "least_reliance")["setting"]
        ((10, 0.0, 0.5), (10, 0.0, 0.2))
    """
    if select not in SELECT:
        raise ValueError(f"select={select!r} is not one of {list(SELECT)}")
    if not rr:
        raise ValueError("no validation setting to select from")
    mrr = mrr if mrr is not None else {s: float(np.mean(v)) for s, v in rr.items()}
    best = max(rr, key=lambda s: (mrr[s], -s[0], -s[2], -s[1]))
    if select == "best":
        return {"setting": best}
    gaps = {}
    for s, v in rr.items():
        d = rr[best] - v
        se = float(np.std(d, ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
        gaps[s] = (float(np.mean(d)), se)
    within = [s for s, (gap, se) in gaps.items() if gap <= select_se * se]
    chosen = min(within, key=lambda s: (s[2], s[0], -s[1]))
    gap, se = gaps[chosen]
    return {"setting": chosen, "select_se": select_se,
            "best": {"top_k": best[0], "weight": best[2], "gate": best[1] or None,
                     "val_mrr": mrr[best]},
            "val_gap_to_best": round(gap, 4), "val_gap_se": round(se, 4),
            "val_settings_within_se": len(within)}
