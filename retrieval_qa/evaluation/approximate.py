"""Approximate search with FAISS (``faiss-cpu``, the ``search`` extra): an option of the
evaluator for pools where exact search is too slow (``index`` in conf/search.yaml,
``rqa evaluate --checkpoint DIR --index faiss-ivf``).

What the numbers mean in this mode. The index returns, for each question, its
``list_size`` best candidates as the index sees them (inner products; IVF probes
``nprobe`` of ``nlist`` clusters, HNSW walks a graph). The ReQA rank rules apply to that list;
a candidate the index did not return ties below the list, as the pipeline's unretrieved
candidates do (retrieval_qa/pipeline/fused_ranks.py): with ``n`` returned and ``C``
candidates, a gold candidate not returned ranks ``n + (C - n + 1) / 2``. So R@k and P@k for
``k <= list_size`` are those of the returned lists, MRR@100 (``list_size >= 100``) counts a
gold not returned as 0, and MRR counts it as ``2 / (C + n + 1)``: about zero, not the
protocol's exact rank, which approximate search cannot give. A gold that exact search would
rank inside the list but the index missed is what the index's recall@k (of the exact top-k,
``bench/bench_large_pool.py``) measures.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from ..errors import UsageError
from .sparse import SparseScores

INDEXES = ("exact", "faiss-ivf", "faiss-hnsw")


#: the settings of conf/search.yaml and the least value of each whole-number one
_COUNTS = {"min_block_rows": 1, "list_size": 1, "ivf.nlist": 1, "ivf.nprobe": 1,
           "ivf.train_size": 1, "hnsw.m": 2, "hnsw.ef_construction": 1, "hnsw.ef_search": 1}


def check_search_settings(given: Mapping) -> dict:
    """The search settings (conf/search.yaml's keys) as a plain dict; a missing key, an
    unknown index or a count out of range is a :class:`~retrieval_qa.errors.UsageError`
    naming the key and the fix.

    Args:
        given: the settings (``index``, ``min_block_rows``, ``list_size`` and the indexes' counts).
    """
    out = dict(given)
    for key, least in _COUNTS.items():
        value = out
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise UsageError(f"search setting {key}={value!r}: expected a whole number >= "
                             f"{least} (fix: set it in conf/search.yaml)")
    if out.get("index") not in INDEXES:
        raise UsageError(f"search setting index={out.get('index')!r}: expected one of "
                         f"{list(INDEXES)} (fix: index=exact for the protocol's exact ranks)")
    return out


def _faiss():
    try:
        import faiss
    except ImportError:
        raise UsageError("search index faiss-*: approximate search needs faiss-cpu, which is "
                         "not installed (fix: pip install -e '.[search]', or index=exact)") \
            from None
    return faiss


def build_index(candidates: np.ndarray, index: str, settings: Mapping, seed: int = 0):
    """A FAISS inner-product index over ``candidates`` ([C, D] float32).

    Args:
        candidates: the candidate embeddings.
        index: ``faiss-ivf`` (IndexIVFFlat: ``ivf.nlist`` clusters trained by k-means on
            ``ivf.train_size`` candidates, ``ivf.nprobe`` searched) or ``faiss-hnsw``
            (IndexHNSWFlat: ``hnsw.m`` links, ``hnsw.ef_construction``, ``hnsw.ef_search``).
        settings: the search settings (conf/search.yaml).
        seed: the k-means sample's and clustering's seed.
    """
    faiss = _faiss()
    x = np.ascontiguousarray(candidates, dtype=np.float32)
    n, dim = x.shape
    if index == "faiss-ivf":
        ivf = settings["ivf"]
        nlist = max(1, min(int(ivf["nlist"]), n // 39 or 1))  # faiss wants 39 points a cluster
        out = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        out.cp.seed = seed
        sample = x
        if n > int(ivf["train_size"]):
            sample = x[np.random.default_rng(seed).choice(n, int(ivf["train_size"]),
                                                          replace=False)]
        out.train(sample)
        out.add(x)
        out.nprobe = min(int(ivf["nprobe"]), nlist)
        return out
    if index == "faiss-hnsw":
        hnsw = settings["hnsw"]
        out = faiss.IndexHNSWFlat(dim, int(hnsw["m"]), faiss.METRIC_INNER_PRODUCT)
        out.hnsw.efConstruction = int(hnsw["ef_construction"])
        out.add(x)
        out.hnsw.efSearch = int(hnsw["ef_search"])
        return out
    raise UsageError(f"search index={index!r}: expected one of {list(INDEXES)} (fix: "
                     "index=exact in conf/search.yaml for the protocol's exact ranks)")


class ApproximateScorer:
    """A scorer over a FAISS index: each question's ``list_size`` returned candidates with
    their inner products, every other candidate below them (``score_sparse``: the evaluator's
    sparse path ranks the lists with the usual rules; see the module docstring).

    Args:
        questions: ``[Q, D]`` question embeddings.
        index: the index over the ``[C, D]`` candidate embeddings (:func:`build_index`).
        num_candidates: C.
        list_size: candidates returned per question.
    """

    def __init__(self, questions: torch.Tensor | np.ndarray, index, num_candidates: int,
                 list_size: int) -> None:
        q = questions.detach().float().cpu().numpy() if torch.is_tensor(questions) \
            else np.asarray(questions, dtype=np.float32)
        self.questions = np.ascontiguousarray(q, dtype=np.float32)
        self.index = index
        self.num_questions, self.num_candidates = len(q), num_candidates
        self.list_size = min(int(list_size), num_candidates)

    def search(self, rows: range) -> tuple[np.ndarray, np.ndarray]:
        """``([R, n] scores, [R, n] candidate ids)`` of questions ``rows`` (id -1: none)."""
        return self.index.search(self.questions[rows.start:rows.stop], self.list_size)

    def score_sparse(self, rows: range) -> SparseScores:
        scores, ids = self.search(rows)
        keep = ids >= 0
        row = np.repeat(np.arange(len(rows)), keep.sum(1))
        values = scores[keep].astype(np.float32)
        base = np.zeros(len(rows), dtype=np.float32)
        for r in range(len(rows)):  # below the row's lowest returned score
            listed = scores[r][keep[r]]
            low = float(listed.min()) if len(listed) else 0.0
            base[r] = low - max(1.0, abs(low) * 1e-3)
        return SparseScores.from_entries(row, ids[keep].astype(np.int64), values, base,
                                         self.num_candidates)

    def score(self, rows: range) -> torch.Tensor:
        """The full rows the lists stand for (small pools and tests)."""
        return torch.from_numpy(self.score_sparse(rows).dense()).float()


def approximate_scorer(scorer, settings: Mapping, list_size: int):
    """The :class:`ApproximateScorer` of a :class:`~.search.DenseScorer` under
    ``settings["index"]``; ``scorer`` itself for ``exact``.

    Args:
        scorer: the exact scorer (a :class:`~.search.DenseScorer`).
        settings: the search settings (conf/search.yaml); ``index``: ``exact`` or a FAISS index.
        list_size: candidates returned per question.
    """
    index = settings.get("index", "exact")
    if index == "exact":
        return scorer
    if not hasattr(scorer, "candidates") or not hasattr(scorer, "questions"):
        raise UsageError(f"search index={index}: approximate search is for embeddings "
                         "(--checkpoint, a DenseScorer), not this scorer (fix: index=exact)")
    built = build_index(scorer.candidates.cpu().numpy(), index, settings)
    return ApproximateScorer(scorer.questions, built, scorer.num_candidates, list_size)
