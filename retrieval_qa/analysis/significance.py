"""Paired statistics over per-question scores, in plain vectorised numpy with fixed seeds (the
same input gives the same numbers).

* :func:`paired_bootstrap` - percentile interval of the mean difference, resampling questions;
* :func:`randomisation_test` - Fisher's paired randomisation (sign-flip) test, two-sided;
* :func:`holm` - Holm's step-down correction of a family of p-values;
* :func:`seed_test` - Welch's t-test and an exact permutation test over per-seed metrics.

Each takes ``diff`` as [Q] or [Q, M] (M metrics at once: one set of resamples serves all of
them). We feed our own per-question scores (the ReQA rank rules: average rank over ties, the
best gold copy, one-to-many answers) to our own tests rather than ranx's ``compare``, whose
metrics would re-derive ranks from a run with its own conventions; no dependency is added.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

BOOTSTRAP_SAMPLES = 2000
PERMUTATIONS = 10000
SEED = 0
CHUNK_CELLS = 4_000_000  # resample rows x questions held at once (about 32 MB of int64)


def _as_matrix(diff) -> tuple[np.ndarray, bool]:
    d = np.asarray(diff, dtype=np.float64)
    if d.ndim not in (1, 2) or d.shape[0] == 0:
        raise ValueError(f"per-question differences must be [Q] or [Q, M] with Q >= 1, got "
                         f"shape {d.shape}")
    return (d[:, None], True) if d.ndim == 1 else (d, False)


def _chunks(total: int, n: int):
    step = max(1, CHUNK_CELLS // max(n, 1))
    for lo in range(0, total, step):
        yield lo, min(lo + step, total)


def paired_bootstrap(diff, *, samples: int = BOOTSTRAP_SAMPLES, level: float = 0.95,
                     seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the ``level`` percentile interval of the mean of ``diff`` over
    ``samples`` resamples of the questions (with replacement); [M] arrays, or floats for a
    [Q] ``diff``.

    Args:
        diff: per-question differences, [Q] or [Q, M] (B minus A).
        samples: the resamples.
        level: the interval's coverage.
        seed: the generator's seed.

    Example:

        >>> paired_bootstrap([1.0, 1.0])  # a constant difference: the interval is the point
        (1.0, 1.0)
    """
    d, flat = _as_matrix(diff)
    n = d.shape[0]
    rng = np.random.default_rng(seed)
    means = np.empty((samples, d.shape[1]))
    for lo, hi in _chunks(samples, n):
        idx = rng.integers(0, n, size=(hi - lo, n))  # each row: one resample's questions
        flat_idx = (idx + n * np.arange(hi - lo)[:, None]).ravel()  # counts per row, one call
        counts = np.bincount(flat_idx, minlength=(hi - lo) * n).reshape(hi - lo, n)
        means[lo:hi] = counts @ d / n
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha], axis=0)
    exact = np.all(d == d[:1], axis=0)  # a constant difference: the interval is the point
    low, high = np.where(exact, d[0], low), np.where(exact, d[0], high)
    return (float(low[0]), float(high[0])) if flat else (low, high)


def randomisation_test(diff, *, permutations: int = PERMUTATIONS,
                       seed: int = SEED) -> np.ndarray | float:
    """Two-sided p-value of Fisher's paired randomisation test: each question's difference
    keeps or flips its sign at random; p = (1 + #{|mean flipped| >= |mean observed|}) /
    (1 + permutations). Identical runs (all differences 0) give p = 1.

    Args:
        diff: per-question differences, [Q] or [Q, M].
        permutations: the random sign flips drawn.
        seed: the generator's seed.

    Example:

        >>> randomisation_test([0.0, 0.0])
        1.0
    """
    d, flat = _as_matrix(diff)
    n = d.shape[0]
    observed = np.abs(d.mean(axis=0))
    tol = 1e-12 * np.maximum(1.0, np.abs(d).max(axis=0))
    rng = np.random.default_rng(seed)
    hits = np.zeros(d.shape[1])
    for lo, hi in _chunks(permutations, n):
        bits = np.unpackbits(rng.integers(0, 256, size=(hi - lo, (n + 7) // 8),
                                          dtype=np.uint8), axis=1, count=n)
        signs = 2.0 * bits - 1.0
        hits += (np.abs(signs @ d / n) >= observed - tol).sum(axis=0)
    p = (1 + hits) / (1 + permutations)
    return float(p[0]) if flat else p


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input's order.

    Args:
        p_values: the family's p-values.

    Example:

        >>> holm([0.01, 0.04, 0.03]).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return p
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def seed_test(a, b) -> dict:
    """Per-seed metrics of two settings (unpaired): Welch's t-test and the exact permutation
    test of the difference of means over all relabellings of the seeds; with fewer than two
    seeds on a side there is no test (``p`` None and the reason).

    Args:
        a: setting A's metric, one value per seed.
        b: setting B's metric, one value per seed (``mean_diff`` is B minus A).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = {"n_a": len(a), "n_b": len(b),
           "mean_diff": float(b.mean() - a.mean()) if len(a) and len(b) else None}
    if len(a) < 2 or len(b) < 2:
        return {**out, "welch_p": None, "permutation_p": None,
                "note": "one seed on a side: no seed-level test"}
    from scipy import stats

    welch = stats.ttest_ind(b, a, equal_var=False)
    pooled = np.concatenate([a, b])
    observed = abs(b.mean() - a.mean())
    idx = np.arange(len(pooled))
    splits = np.array([c for c in combinations(idx, len(b))])
    mask = np.zeros((len(splits), len(pooled)), dtype=bool)
    mask[np.arange(len(splits))[:, None], splits] = True
    diffs = np.abs((mask * pooled).sum(1) / len(b) - (~mask * pooled).sum(1) / len(a))
    perm_p = float((diffs >= observed - 1e-12).mean())
    welch_p = float(welch.pvalue) if np.isfinite(welch.pvalue) else (
        1.0 if observed == 0 else 0.0)
    # the observed split (and, with equal sides, its mirror) is always counted
    smallest = (2 if len(a) == len(b) else 1) / len(splits)
    return {**out, "welch_p": welch_p, "permutation_p": perm_p,
            "permutation_relabellings": len(splits), "permutation_p_min": smallest}
