"""Training data of the concatenated-pair classifier
(:class:`retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier`): balanced batches of
gold (question, answer sentence) pairs of a pool and sampled negatives, tokenised as
``[CLS] question [SEP] sentence [SEP]``.

* :class:`ClassifierPairSampler`: each batch is half gold pairs (drawn with replacement) and
  half negatives, one per gold pair of the batch: with chance ``same_paragraph`` another
  sentence of the gold sentence's paragraph (a hard negative), else a random sentence of the
  pool; never a gold sentence of the question. Deterministic for a seed.
* :class:`ClassifierPairStream`: ``steps`` such batches, tokenised (an iterable dataset whose
  items are whole batches: use it with ``batch_size=None``).
* :class:`PairStreamLoader`: the stream's loader, resumable (a resumed run's pass starts
  where the checkpoint's step left it).
* :class:`ClassifierPairDataModule`: the stream as a Lightning DataModule (training only).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, IterableDataset

from ..data.types import RetrievalPool

#: Inputs of a Hugging Face encoder that a tokenised pair batch may carry.
MODEL_KEYS = ("input_ids", "attention_mask", "token_type_ids")
#: Random draws tried for a negative outside the question's gold sentences before giving up.
_NEGATIVE_TRIES = 100

__all__ = ["MODEL_KEYS", "ClassifierPairDataModule", "ClassifierPairSampler",
           "ClassifierPairStream", "PairStreamLoader", "encode_pairs"]


def encode_pairs(tokenizer, questions: Sequence[str], sentences: Sequence[str],
                 max_length: int) -> dict[str, torch.Tensor]:
    """``[CLS] q [SEP] s [SEP]`` for each (question, sentence), padded to the longest and cut
    to ``max_length`` tokens (the longer text first).

    Args:
        tokenizer: the classifier's Hugging Face tokenizer.
        questions: each pair's question.
        sentences: each pair's sentence, in the same order.
        max_length: the most tokens of a pair, special tokens included.

    Returns:
        The encoder inputs (:data:`MODEL_KEYS` the tokenizer gives), each ``[B, L]``.
    """
    enc = tokenizer(list(questions), list(sentences), padding=True, truncation="longest_first",
                    max_length=max_length, return_tensors="pt")
    return {k: enc[k] for k in MODEL_KEYS if k in enc}


class ClassifierPairSampler:
    """Balanced batches of gold pairs and negatives of ``pool`` (see the module docstring).

    Args:
        pool: the pool whose QA pairs and candidate sentences are drawn.
        seed: the seed of the sampler's own generator.
        same_paragraph: the chance, in [0, 1], that a negative is another sentence of the
            gold sentence's paragraph (when it has one).
    """

    def __init__(self, pool: RetrievalPool, seed: int, same_paragraph: float) -> None:
        if not pool.pairs:
            raise ValueError(f"{pool.dataset}/{pool.pool} has no QA pairs to train on")
        if not 0.0 <= same_paragraph <= 1.0:
            raise ValueError(f"same_paragraph={same_paragraph}; expected a chance in [0, 1]")
        self.pairs = pool.pairs
        self.same_paragraph = float(same_paragraph)
        self.rng = random.Random(seed)
        self.sentences = [c.text for c in pool.candidates]
        doc_of = {c.id: c.doc_id for c in pool.candidates}
        self.by_doc: dict[str, list[str]] = {}
        for c in pool.candidates:
            self.by_doc.setdefault(c.doc_id, []).append(c.text)
        self.pair_doc = [doc_of.get(p.answer_id) for p in pool.pairs]
        self.gold: dict[str, set[str]] = {}
        for p in pool.pairs:
            self.gold.setdefault(p.question, set()).add(p.answer)

    def negative(self, i: int) -> str:
        """A negative sentence for pair ``i``: never a gold sentence of its question."""
        p, gold = self.pairs[i], self.gold[self.pairs[i].question]
        same = [s for s in self.by_doc.get(self.pair_doc[i], ()) if s not in gold]
        if same and self.rng.random() < self.same_paragraph:
            return self.rng.choice(same)
        for _ in range(_NEGATIVE_TRIES):
            s = self.rng.choice(self.sentences)
            if s not in gold:
                return s
        raise ValueError(f"no negative sentence for {p.question!r}")

    def batch(self, size: int) -> tuple[list[str], list[str], torch.Tensor]:
        """``(questions, sentences, labels)``: ``size // 2`` gold pairs (label 1) then a
        negative for each (label 0)."""
        half = max(size // 2, 1)
        idx = [self.rng.randrange(len(self.pairs)) for _ in range(half)]
        questions = [self.pairs[i].question for i in idx] * 2
        sentences = [self.pairs[i].answer for i in idx] + [self.negative(i) for i in idx]
        labels = torch.cat([torch.ones(half), torch.zeros(half)])
        return questions, sentences, labels


class ClassifierPairStream(IterableDataset):
    """``steps`` tokenised batches of ``sampler``: dicts of the encoder inputs plus
    ``labels`` (float, 1 = gold). Iterating again continues the sampler's sequence.

    Args:
        sampler: the :class:`ClassifierPairSampler` drawn from.
        tokenizer: the classifier's tokenizer (:func:`encode_pairs`).
        batch_size: the pairs of a batch (half gold, half negatives).
        steps: the batches of one pass.
        max_length: the most tokens of a pair.
    """

    def __init__(self, sampler: ClassifierPairSampler, tokenizer, batch_size: int, steps: int,
                 max_length: int) -> None:
        super().__init__()
        self.sampler = sampler
        self.tokenizer = tokenizer
        self.batch_size = int(batch_size)
        self.steps = int(steps)
        self.max_length = int(max_length)
        self.skip = 0  # the next pass draws its first `skip` batches without yielding them

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        skip, self.skip = self.skip, 0
        for step in range(self.steps):
            questions, sentences, labels = self.sampler.batch(self.batch_size)
            if step >= skip:
                yield {**encode_pairs(self.tokenizer, questions, sentences, self.max_length),
                       "labels": labels}


class PairStreamLoader(DataLoader):
    """The batches of a :class:`ClassifierPairStream` (``batch_size=None``), one a training
    step: a pass that starts at global step ``n`` of ``owner``'s Trainer (a run resumed from a
    checkpoint, its sampler seeded afresh) first draws the ``n`` batches the run trained on
    (drawn, not tokenised), so it hands out the batches the uninterrupted run gets next. Its
    own generator: starting the loader draws a seed from it, not from the global torch
    generator that the model's dropout uses.

    Args:
        stream: the :class:`ClassifierPairStream`.
        owner: the data module whose ``trainer`` gives the global step; None: every pass
            starts at step 0.
    """

    def __init__(self, stream: ClassifierPairStream, owner: pl.LightningDataModule | None = None
                 ) -> None:
        super().__init__(stream, batch_size=None, generator=torch.Generator())
        self.owner = owner

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        # a generator: runs at the first batch, after Lightning restored a checkpoint's step
        trainer = getattr(self.owner, "trainer", None)
        self.dataset.skip = int(trainer.global_step) if trainer is not None else 0
        yield from super().__iter__()


class ClassifierPairDataModule(pl.LightningDataModule):
    """Training batches of gold pairs and sampled negatives of ``pool`` for the classifier
    (``steps`` batches of ``batch_size`` pairs; the settings of ``training`` in
    conf/model/cross_classifier.yaml).

    Args:
        pool: the training pool.
        tokenizer: the classifier's tokenizer.
        batch_size: the pairs of a batch (half gold, half negatives).
        steps: the batches of the run.
        max_length: the most tokens of a pair (the model's ``max_length``).
        seed: the sampler's seed.
        same_paragraph: the chance of a same-paragraph negative
            (:class:`ClassifierPairSampler`).
    """

    def __init__(self, pool: RetrievalPool, tokenizer, *, batch_size: int, steps: int,
                 max_length: int, seed: int, same_paragraph: float) -> None:
        super().__init__()
        self.pool = pool
        self.sampler = ClassifierPairSampler(pool, seed, same_paragraph)
        self.stream = ClassifierPairStream(self.sampler, tokenizer, batch_size, steps,
                                           max_length)

    def train_dataloader(self) -> PairStreamLoader:
        return PairStreamLoader(self.stream, owner=self)
