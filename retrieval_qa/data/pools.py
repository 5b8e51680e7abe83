"""The pools a data module trains, validates and tests on: loading, the train/validation
split and the caps, with their part of the run's data report.

The training pool (``train_dataset/train_pool``) is split with :func:`.split.train_val_split`
(``val_fraction``, ``split_seed``; no question or answer sentence on both sides): the
training part gives the training pairs, the other part is the validation pool. The test
pool is ``test_dataset/test_pool``, loaded on first use. The caps (:mod:`.caps`, seeded by
``split_seed``) take deterministic subsets: ``max_train_pairs`` of the training pairs,
``max_val_questions`` of the validation questions and ``max_test_questions`` of the test
questions (each with the sentences of their paragraphs as candidates; the test cap is for
quick checks, never a reported result).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .caps import cap_pairs, cap_questions
from .loading import load_pool
from .split import train_val_split
from .types import QAPair, RetrievalPool


@dataclass(frozen=True)
class PoolSettings:
    """Where the pools come from and how they are cut: the keys of that name in
    ``conf/data/reqa_squad.yaml``.

    Args:
        train_dataset: the dataset of the training pool (``reqa_squad``, ``multireqa_*``,
            ``collection:PATH``).
        train_pool: its pool, split into the training pairs and the validation pool.
        test_dataset: the dataset of the test pool.
        test_pool: the test pool's name.
        data_dir: the folder holding the data files; None: ``$RQA_DATA_DIR``, then the
            default (:func:`~.loading.load_pool`).
        val_fraction: the validation share of the training pool's QA inputs, in (0, 1).
        split_seed: the seed of the split and of the caps' subsets.
        max_train_pairs: at most this many training pairs; None: all.
        max_val_questions: at most this many validation questions; None: all.
        max_test_questions: at most this many test questions (quick checks); None: all.
    """

    train_dataset: str
    train_pool: str
    test_dataset: str
    test_pool: str
    data_dir: str | Path | None
    val_fraction: float
    split_seed: int
    max_train_pairs: int | None
    max_val_questions: int | None
    max_test_questions: int | None

    @classmethod
    def from_block(cls, block: Mapping) -> PoolSettings:
        """These settings out of a ``data`` block's values (its other keys ignored).

        Args:
            block: a mapping holding (at least) every field's key.
        """
        return cls(**{f.name: block[f.name] for f in fields(cls)})


@dataclass
class TrainSplit:
    """The training side of the pools, capped, with its entries of the data report.

    Args:
        pairs: the training pairs of the split (after ``max_train_pairs``).
        val_pool: the validation pool (after ``max_val_questions``).
        train_info: the report's ``train`` entry (pool, counts, cap).
        val_info: the report's ``val`` entry (counts, cap).
    """

    pairs: list[QAPair]
    val_pool: RetrievalPool
    train_info: dict
    val_info: dict


class Pools:
    """The training split and the test pool of :class:`PoolSettings`, each loaded, split and
    capped once on first use.

    Args:
        settings: where the pools come from and how they are cut.

    Example:

        >>> pools = Pools(PoolSettings("reqa_squad", "train", "reqa_squad", "dev", None, 0.1,
        ...                            0, 2000, 200, None))  # doctest: +SKIP
        >>> split = pools.train_split()  # doctest: +SKIP
        >>> len(split.pairs), len(split.val_pool.questions)  # doctest: +SKIP
        (2000, 200)
    """

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._split: TrainSplit | None = None
        self._test_pool: RetrievalPool | None = None
        self._test_questions = 0   # questions of the test pool before max_test_questions

    def _load(self, dataset: str, pool: str) -> tuple[RetrievalPool, dict]:
        return load_pool(dataset, pool, data_dir=self.settings.data_dir)

    @property
    def split_done(self) -> bool:
        """Whether the training pool has been loaded and split."""
        return self._split is not None

    def train_split(self) -> TrainSplit:
        """The training pool loaded, split and capped (once)."""
        if self._split is not None:
            return self._split
        s = self.settings
        pool, notes = self._load(s.train_dataset, s.train_pool)
        train, val = train_val_split(pool, s.val_fraction, s.split_seed)
        capped_train = cap_pairs(train, s.max_train_pairs, s.split_seed)
        capped_val = cap_questions(val, s.max_val_questions, s.split_seed)
        train_info = {
            "dataset": pool.dataset, "pool": pool.pool, "source": pool.source,
            "pool_pairs": len(pool.pairs), "split_pairs": len(train),
            "pairs": len(capped_train), "max_train_pairs": s.max_train_pairs,
            "capped": len(capped_train) < len(train),
            "answers_outside_sentences": notes.get("answers_outside_sentences"),
        }
        val_info = {
            "dataset": val.dataset, "pool": val.pool, "question_unit": val.question_unit,
            "split_questions": len(val.questions),
            "questions": len(capped_val.questions), "candidates": len(capped_val.candidates),
            "pairs": len(capped_val.pairs), "max_val_questions": s.max_val_questions,
            "capped": len(capped_val.questions) < len(val.questions),
        }
        self._split = TrainSplit(capped_train, capped_val, train_info, val_info)
        return self._split

    @property
    def test_pool(self) -> RetrievalPool:
        """The test pool, capped; loaded on first use."""
        if self._test_pool is None:
            s = self.settings
            pool, _ = self._load(s.test_dataset, s.test_pool)
            self._test_pool = cap_questions(pool, s.max_test_questions, s.split_seed)
            self._test_questions = len(pool.questions)
        return self._test_pool

    def describe_test(self) -> dict:
        """The report's ``test`` entry: the pool named, with its counts once it is loaded."""
        s = self.settings
        test = {"dataset": s.test_dataset, "pool": s.test_pool}
        pool = self._test_pool
        if pool is not None:
            test.update(question_unit=pool.question_unit, questions=len(pool.questions),
                        candidates=len(pool.candidates), source=pool.source)
            if s.max_test_questions is not None:
                test.update(max_test_questions=s.max_test_questions,
                            capped=len(pool.questions) < self._test_questions)
        return test

    def describe_split(self) -> dict:
        """The report's ``split`` entry."""
        return {"val_fraction": self.settings.val_fraction, "seed": self.settings.split_seed}
