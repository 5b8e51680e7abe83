"""Training examples of the cross-encoder reranker: gold pairs of the training side and hard
negatives from the first stage.

For each question drawn from the training side of the training file (the data module's 9:1
split: the validation side is left for tuning the fusion):

* positive: a gold (question, sentence) pair;
* ``hard`` negatives: the best-ranked sentences of BM25's top ``top_k`` over the training
  side's sentences, or of a pipeline's first stage (:mod:`retrieval_qa.distill.negatives`);
* ``same_paragraph`` negatives: other sentences of a gold sentence's paragraph.

The mining classifier's rules (:mod:`retrieval_qa.mining.negatives`): a sentence whose text is
a gold answer of the question string anywhere in the pool (same answer, gold copies;
:func:`~retrieval_qa.data.pool_index.known_positives`) is never a negative, and a question's
negatives are different sentence texts. A source with too few sentences left gives fewer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ..data.types import RetrievalPool
from ..evaluation import sparse as sparse_rules


@dataclass(frozen=True)
class RerankExample:
    """One training example of the reranker.

    Attributes:
        question: the question.
        sentence: the candidate sentence.
        label: 1 gold, 0 negative.
        source: where it came from: ``gold``, ``bm25``, ``first_stage`` or ``same_paragraph``.
        paragraph: the sentence's paragraph (read by a reranker that reads it).
    """

    question: str
    sentence: str
    label: int    # 1 gold, 0 negative
    source: str   # gold | bm25 | first_stage | same_paragraph
    paragraph: str = ""  # the sentence's paragraph (read by a reranker that reads it)


def training_side(full: RetrievalPool, val_fraction: float, split_seed: int
                  ) -> tuple[RetrievalPool, RetrievalPool]:
    """(the training side, the validation pool) of the training file ``full`` under the data
    module's split: the training side holds the training pairs' questions and every sentence
    of their paragraphs (a paragraph may also hold validation answers).

    Args:
        full: the training file's pool.
        val_fraction: the share of pairs held out for validation (the data module's).
        split_seed: the split's seed (the data module's).
    """
    from ..data.reqa import reassemble
    from ..data.split import train_val_split

    train_pairs, val = train_val_split(full, val_fraction, split_seed)
    docs = {p.context for p in train_pairs}
    side = reassemble(full, f"{full.pool}-train-side",
                      [c for c in full.candidates if c.context in docs], train_pairs)
    return side, val


def bm25_top(pool: RetrievalPool, scorer, top_k: int, block: int = 256) -> list[np.ndarray]:
    """Each question's BM25 top ``top_k`` candidate indices (the evaluator's top-k order).

    Args:
        pool: the pool whose questions are ranked.
        scorer: a scorer with ``score_sparse(rows)`` over ``pool``
            (:class:`~retrieval_qa.baselines.bm25.BM25Scorer`).
        top_k: the candidates kept per question.
        block: the questions scored at a time.
    """
    out = []
    for lo in range(0, len(pool.questions), block):
        rows = range(lo, min(lo + block, len(pool.questions)))
        out.extend(ids for ids, _ in sparse_rules.top_k(scorer.score_sparse(rows), top_k))
    return out


def rerank_examples(pool: RetrievalPool, top: list[np.ndarray], *, hard: int,
                    same_paragraph: int, seed: int, hard_source: str
                    ) -> tuple[list[RerankExample], dict]:
    """The examples of every question of ``pool`` (see the module docstring): one gold pair
    (a gold sentence drawn at random) and its negatives.

    Args:
        pool: the training side (:func:`training_side`).
        top: ``top[q]``, question ``q``'s first-stage candidate indices, best first.
        hard: the hard negatives wanted per question, from ``top``.
        same_paragraph: the same-paragraph negatives wanted per question.
        seed: the seed of the draws.
        hard_source: where ``top`` came from: ``bm25``, or ``first_stage`` (a pipeline's fused
            lists, :mod:`retrieval_qa.distill.negatives`); the hard negatives' ``source``.

    Returns:
        (examples, counts per source and shortfall).
    """
    from ..data.pool_index import known_positives

    rng = random.Random(seed)
    positives = known_positives(pool)
    members: dict[str, list[int]] = {}
    for c, cand in enumerate(pool.candidates):
        members.setdefault(cand.doc_id, []).append(c)
    examples: list[RerankExample] = []
    counts = {"gold": 0, hard_source: 0, "same_paragraph": 0, f"shortfall_{hard_source}": 0,
              "shortfall_same_paragraph": 0}
    for q, question in enumerate(pool.questions):
        gold = pool.gold[q][rng.randrange(len(pool.gold[q]))]
        examples.append(RerankExample(question, pool.candidates[gold].text, 1, "gold",
                                      pool.candidates[gold].context))
        counts["gold"] += 1
        taken = {pool.candidates[c].text for c in positives[q]}
        paragraph = [c for c in members[pool.candidates[gold].doc_id]]
        rng.shuffle(paragraph)
        for source, options, wanted in ((hard_source, list(top[q]), hard),
                                        ("same_paragraph", paragraph, same_paragraph)):
            got = 0
            for c in options:
                if got == wanted:
                    break
                text = pool.candidates[c].text
                if c in positives[q] or text in taken:
                    continue
                taken.add(text)
                examples.append(RerankExample(question, text, 0, source,
                                              pool.candidates[c].context))
                got += 1
            counts[source] += got
            counts[f"shortfall_{source}"] += wanted - got
    return examples, counts
