"""Inverse document frequency, the paper's formula (3.1):
``IDF(t) = log_e(#documents / #documents containing t)``, computed on the corpus being
indexed. A term absent from that corpus gets the largest possible weight, ``log_e(N / 1)``
(it is as rare as a term can be); a term in every document gets 0."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

_TOKEN = re.compile(r"\w+|[^\w\s]")
IDF_CORPORA = ("paragraphs", "paragraphs+questions")  # what the IDF is computed on


def word_tokens(text: str) -> list[str]:
    """Lower-cased words and single punctuation marks (GloVe 6B is uncased).

    Args:
        text: the text.

    Example:

        >>> word_tokens("Who wrote Hamlet?")
        ['who', 'wrote', 'hamlet', '?']
    """
    return _TOKEN.findall(text.lower())


class IDF:
    """``idf[term]``: the IDF of a term over ``documents`` (see the module docstring).

    Args:
        documents: the corpus being indexed, each document a sequence of tokens (at least
            one document).

    Example:

        >>> idf = IDF([["a", "b"], ["a"]])
        >>> idf["a"], round(idf["b"], 3), round(idf["unseen"], 3)
        (0.0, 0.693, 0.693)
    """

    def __init__(self, documents: Iterable[Sequence[str]]) -> None:
        df: Counter[str] = Counter()
        n = 0
        for doc in documents:
            df.update(set(doc))
            n += 1
        if n == 0:
            raise ValueError("IDF needs at least one document")
        self.num_documents = n
        self.df = dict(df)
        self.unseen = math.log(n)

    def __getitem__(self, term: str) -> float:
        df = self.df.get(term)
        return self.unseen if df is None else math.log(self.num_documents / df)

    def weights(self, tokens: Sequence[str]) -> list[float]:
        return [self[t] for t in tokens]
