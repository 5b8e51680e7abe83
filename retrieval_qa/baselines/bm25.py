"""BM25 baseline (bm25s) as an evaluator scorer: the full score row of every question, so the
protocol's average-rank tie rule is applied to exact scores."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import bm25s
import numpy as np
import Stemmer
import torch

from ..data.types import RetrievalPool


@dataclass(frozen=True)
class BM25Settings:
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
        self.settings = settings
        self._stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
        docs = [f"{c.text} {c.context}" if settings.with_context else c.text
                for c in pool.candidates]
        self.index = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
        self.index.index(self._tokenize(docs, progress), show_progress=progress)
        self._queries = self._tokenize(pool.questions, progress)
        self.num_questions = len(pool.questions)
        self.num_candidates = len(pool.candidates)

    def _tokenize(self, texts: list[str], progress: bool):
        return bm25s.tokenize(texts, lower=self.settings.lowercase,
                              stopwords=self.settings.stopwords or [],
                              stemmer=self._stemmer.stemWords if self._stemmer else None,
                              return_ids=False, show_progress=progress)

    def scores_for(self, tokens: list[str]) -> np.ndarray:
        known = [t for t in tokens if t in self.index.vocab_dict]
        if not known:
            return np.zeros(self.num_candidates, dtype=np.float32)
        return self.index.get_scores(known)

    def score(self, rows: range) -> torch.Tensor:
        return torch.from_numpy(np.stack([self.scores_for(self._queries[q]) for q in rows]))
