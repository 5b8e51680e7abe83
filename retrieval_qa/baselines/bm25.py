"""BM25 baseline (bm25s) as an evaluator scorer, with the protocol's average-rank tie rule
applied to exact scores.

Two ways to get the same scores: ``score(rows)`` gives full rows from bm25s's own
``get_scores`` (the reference path); ``score_sparse(rows)`` gives only the candidates that
share a term with each question, summed from bm25s's precomputed (term, document) scores in
the same order and precision as ``get_scores`` (float32, one query token after the other,
see ``score_sparse``), so every score is bit-identical; every other candidate scores the
query's non-occurrence sum (0 for Lucene). The evaluator ranks from that without full rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import bm25s
import numpy as np
import scipy.sparse as sp
import Stemmer
import torch

from ..data.types import RetrievalPool
from ..evaluation.sparse import SparseScores
from ..progress import stage


@dataclass(frozen=True)
class BM25Settings:
    """The BM25 settings (conf/model/bm25.yaml, :meth:`from_config`).

    Attributes:
        k1: BM25's term-frequency saturation.
        b: BM25's length normalisation.
        method: the bm25s variant: ``lucene``, ``robertson``, ``atire``, ``bm25l`` or
            ``bm25+``.
        stopwords: ``"english"`` or None (none removed).
        stemmer: a PyStemmer language, e.g. ``"english"``; None: no stemming.
        lowercase: lower-case the texts before tokenising.
        with_context: index "sentence + paragraph" instead of the sentence alone.
    """

    k1: float
    b: float
    method: str            # bm25s variant: lucene, robertson, atire, bm25l, bm25+
    stopwords: str | None  # "english" or None
    stemmer: str | None    # a PyStemmer language, e.g. "english", or None
    lowercase: bool
    with_context: bool     # index "sentence + paragraph" instead of the sentence alone

    @classmethod
    def from_config(cls, cfg) -> BM25Settings:
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict:
        return {"tokenizer": "bm25s regex \\b\\w\\w+\\b", **asdict(self)}


class BM25Scorer:
    def __init__(self, pool: RetrievalPool, settings: BM25Settings, progress: bool = False):
        """Index the candidates and tokenise the questions.

        Args:
            pool: the pool whose candidates are indexed and whose questions are scored.
            settings: the :class:`BM25Settings`.
            progress: one stage line on stderr (bm25s's own dozen bars are always off).
        """
        self.settings = settings
        self._stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
        docs = [f"{c.text} {c.context}" if settings.with_context else c.text
                for c in pool.candidates]
        with stage("BM25 index", enabled=progress) as s:
            self.index = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
            self.index.index(self._tokenize(docs), show_progress=False)
            self._queries = self._tokenize(pool.questions)
            s.done, s.detail = "built", f"{len(docs)} candidates, {len(pool.questions)} questions"
        self.num_questions = len(pool.questions)
        self.num_candidates = len(pool.candidates)
        self._token_ids: list[np.ndarray] | None = None
        self._matrix: sp.csr_array | None = None

    def _tokenize(self, texts: list[str]):
        return bm25s.tokenize(texts, lower=self.settings.lowercase,
                              stopwords=self.settings.stopwords or [],
                              stemmer=self._stemmer.stemWords if self._stemmer else None,
                              return_ids=False, show_progress=False)

    def scores_for(self, tokens: list[str]) -> np.ndarray:
        known = [t for t in tokens if t in self.index.vocab_dict]
        if not known:
            return np.zeros(self.num_candidates, dtype=np.float32)
        return self.index.get_scores(known)

    def score(self, rows: range) -> torch.Tensor:
        return torch.from_numpy(np.stack([self.scores_for(self._queries[q]) for q in rows]))

    def _ids(self) -> list[np.ndarray]:
        """Each query's known token ids, in query order, repeats kept (as ``get_scores``)."""
        if self._token_ids is None:
            int_dtype = np.dtype(self.index.int_dtype)
            self._token_ids = [np.asarray(self.index.get_tokens_ids(q), dtype=int_dtype)
                               for q in self._queries]
        return self._token_ids

    def _base(self, ids: np.ndarray, dtype) -> np.ndarray:
        """The score of a candidate with none of the query's terms (as ``get_scores``)."""
        non = self.index.nonoccurrence_array
        if non is None or len(ids) == 0:
            return np.zeros((), dtype=dtype)
        return np.zeros((), dtype=dtype) + non[ids].sum()

    def _term_scores(self) -> sp.csr_array:
        """bm25s's precomputed scores as a [vocabulary, candidates] CSR matrix (its CSC
        arrays as they are: row t lists the candidates holding term t)."""
        if self._matrix is None:
            sc = self.index.scores
            self._matrix = sp.csr_array((sc["data"], sc["indices"], sc["indptr"]),
                                        shape=(len(sc["indptr"]) - 1, sc["num_docs"]))
        return self._matrix

    def score_sparse(self, rows: range) -> SparseScores:
        """Scores of ``rows`` as a :class:`SparseScores` block (see the module docstring).

        One sparse product (queries x vocabulary) @ (vocabulary x candidates): each query row
        holds its token ids in query order, repeats kept, each with weight 1, so scipy's
        product adds a candidate's term scores one token after the other in float32 from 0,
        exactly as ``get_scores`` does; sums that are exactly 0 are left out (such a
        candidate scores the base, as every unlisted one)."""
        matrix = self._term_scores()
        ids = self._ids()[rows.start:rows.stop]
        sizes = np.fromiter((len(t) for t in ids), dtype=np.int64, count=len(ids))
        indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(matrix.indptr.dtype)
        tokens = (np.concatenate(ids) if ids else np.zeros(0)).astype(matrix.indices.dtype)
        queries = sp.csr_array((np.ones(len(tokens), dtype=matrix.dtype), tokens, indptr),
                               shape=(len(ids), matrix.shape[0]))
        block = queries @ matrix
        values = block.data
        base = np.stack([self._base(t, matrix.dtype) for t in ids]) if ids else \
            np.zeros(0, dtype=matrix.dtype)
        if self.index.nonoccurrence_array is not None:
            values = values + np.repeat(base, np.diff(block.indptr))
        return SparseScores(block.indptr.astype(np.int64), block.indices,
                            values, base, self.num_candidates)
