"""The data module of the distilled dual encoder: each distillation question's gold pair, its
list and the teacher's scores of it.

:class:`DistillDataModule` is the :class:`~retrieval_qa.data.datamodule.ReQADataModule`
(the same split, validation pool, test pool, sampler and loaders) whose training pairs are
the distillation questions with their gold sentences, read from the teacher-score folder
``teacher.output`` (:mod:`.cache`; written by ``rqa prepare``). The folder
must hold the scores of exactly the ``teacher`` block's settings (its key is computed from
them and compared): a folder of other settings, an unfinished or a damaged one is refused
before anything trains, naming the command that writes it.

Training batches are the parent's (``question``, ``answer``: the gold sentence, ``index``)
plus, for the ``B`` questions of the batch and lists of ``L = teacher.list_size``:

* ``negatives``: the token batch of every list's negatives, row-major (question 0's, then
  question 1's, ...), absent when the batch has none;
* ``list_mask``: ``BoolTensor[B, L]``, which entries exist (column 0: the gold sentence);
* ``teacher``: ``FloatTensor[B, L]``, the teacher's scores (0 where an entry does not exist);
* ``shared``: ``BoolTensor[N]`` over the rows of ``negatives``, which of them may serve as a
  negative of every question of the batch (``model.distillation.shared_negatives``): not
  those whose text is the gold sentence of a question of the batch, nor those the teacher
  scores above their own question's gold sentence (likely unlabelled answers: RocketQA's
  denoising).
"""

from __future__ import annotations

import itertools

import torch

from ..data.collate import PairCollator
from ..data.datamodule import ReQADataModule
from ..data.tokenized import TokenizedTexts
from ..data.types import QAPair
from .cache import cache_key, read_scores

TEACHER_KEYS = ("pipeline", "reranker", "questions", "seed", "list_size", "shard_questions",
                "batch_size", "device", "output")


class ListCollator:
    """The parent's pair batch plus each question's list (see the module docstring).

    Args:
        pairs: the parent's collator (its batches carry each question's ``index``).
        lists: each distillation question's list record (``negatives``: its first-stage
            negatives), by ``index``.
        scores: the teacher's scores of each list (gold first, then the negatives).
        negatives: every list's negatives tokenised, row-major in ``lists``' order.
        list_size: ``L``, the width of ``list_mask`` and ``teacher``.
        pad_to_multiple_of: the negatives' token batches are padded to a multiple of this;
            None: to the longest row.
    """

    def __init__(self, pairs: PairCollator, lists: list[dict], scores: list[list[float]],
                 negatives: TokenizedTexts, list_size: int,
                 pad_to_multiple_of: int | None) -> None:
        self.pairs, self.lists, self.scores = pairs, lists, scores
        self.negatives, self.list_size = negatives, list_size
        self.pad_to_multiple_of = pad_to_multiple_of
        counts = [len(r["negatives"]) for r in lists]
        # each question's first row in ``negatives``
        self.first = list(itertools.accumulate([0, *counts[:-1]])) if counts else []

    def __call__(self, items) -> dict:
        batch = self.pairs(items)
        index = batch["index"].tolist()
        mask = torch.zeros(len(index), self.list_size, dtype=torch.bool)
        teacher = torch.zeros(len(index), self.list_size)
        rows: list[int] = []
        shared: list[bool] = []
        golds = {self.lists[i]["gold"][1] for i in index}
        for b, i in enumerate(index):
            record, scores = self.lists[i], self.scores[i]
            n = len(record["negatives"])
            mask[b, :1 + n] = True
            teacher[b, :1 + n] = torch.tensor(scores, dtype=torch.float32)
            rows += range(self.first[i], self.first[i] + n)
            shared += [text not in golds and score <= scores[0]
                       for (_, text), score in zip(record["negatives"], scores[1:], strict=True)]
        batch["list_mask"], batch["teacher"] = mask, teacher
        if rows:
            batch["negatives"] = self.negatives.batch(rows, self.pad_to_multiple_of)
            batch["shared"] = torch.tensor(shared, dtype=torch.bool)
        return batch


class DistillDataModule(ReQADataModule):
    """``ReQADataModule`` arguments plus ``teacher`` (the ``data.teacher`` block of
    ``conf/data/distill.yaml``); see the module docstring.

    Args:
        tokenizer: the student's tokenizer.
        teacher: the ``data.teacher`` block; its ``output`` folder must hold the finished
            teacher scores of these settings (:func:`~retrieval_qa.distill.teacher.
            score_teacher`).
        kwargs: the :class:`~retrieval_qa.data.datamodule.ReQADataModule` arguments (the
            other keys of conf/data/distill.yaml); ``max_train_pairs``, ``extra_pairs``,
            ``features`` and ``answer_with_context`` must be unset.

    Training batches add ``list_mask`` ``[B, list_size]``, ``teacher`` ``[B, list_size]``
    (the teacher's scores) and ``negatives`` (the lists' tokenised negatives).

    Example:

        >>> from retrieval_qa.registry import instantiate
        >>> from retrieval_qa.config import compose
        >>> cfg = compose(["experiment=distill", "profile=cpu"])  # doctest: +SKIP
        >>> data = instantiate(cfg.data, "data", tokenizer=tokenizer)  # doctest: +SKIP
    """

    @classmethod
    def prepare(cls, cfg, *, rebuild: bool = False, progress: bool = True) -> dict:
        """The step before training (``rqa prepare``): the teacher's scores of the lists
        into ``data.teacher.output``, resumable (:func:`~.teacher.score_teacher`).

        Args:
            cfg: the composed config (as ``rqa train`` composes it).
            rebuild: score the folder again from scratch.
            progress: show progress bars.
        """
        from ..errors import UsageError
        from ..registry import config_values
        from .teacher import score_teacher

        if "teacher" not in cfg.data:
            raise UsageError(f"experiment={cfg.experiment} has no data.teacher block (fix: "
                             "experiment=distill, or an experiment that extends it)")
        data = config_values(cfg.data)
        return score_teacher(data.pop("teacher"), data, config_values(cfg.eval),
                             rebuild=rebuild, progress=progress)

    def __init__(self, tokenizer, *, teacher: dict, **kwargs) -> None:
        super().__init__(tokenizer, **kwargs)
        unknown = sorted(set(teacher) ^ set(TEACHER_KEYS))
        if unknown:
            raise ValueError(f"data.teacher: keys {unknown} differ from {list(TEACHER_KEYS)}")
        for setting, value, why in (
                ("max_train_pairs", self.max_train_pairs, "the training questions are "
                 "data.teacher.questions"),
                ("extra_pairs", self.pair_sources or None, "the training pairs are the "
                 "teacher's lists"),
                ("features", self.features, "the lists are texts to encode"),
                ("answer_with_context", self.answer_with_context or None, "the teacher "
                 "scored sentences without their paragraphs")):
            if value is not None:
                raise ValueError(f"data.{setting} must be null/false/[] for distillation "
                                 f"({why})")
        self.teacher_settings = dict(teacher)
        data = {"train_dataset": self.train_dataset, "train_pool": self.train_pool_name,
                "val_fraction": self.val_fraction, "split_seed": self.split_seed}
        self.teacher_key = cache_key(self.teacher_settings, data)
        self.lists, self.teacher_scores, self.teacher_summary = read_scores(
            teacher["output"], self.teacher_key)

    def _setup_train(self) -> None:
        if self.training_pairs.split_pairs is not None:
            return
        super()._setup_train()  # the split, the validation pool (the split's pairs unused)
        val_pool = self.training_pairs.val_pool
        val = set(val_pool.questions)
        leaked = [r["question"] for r in self.lists if r["question"] in val]
        if leaked:  # the folder's key fixes the training side: only a changed data file
            raise ValueError(f"{len(leaked)} distillation questions are validation questions "
                             f"(e.g. {leaked[0]!r}): the training file changed since "
                             f"{self.teacher_settings['output']} was written; score again "
                             "with --rebuild")
        pairs = [QAPair(r["question"], r["gold"][1], r["gold"][1], f"distill:{i}", r["gold"][0])
                 for i, r in enumerate(self.lists)]
        self.training_pairs.set_split(pairs, val_pool)  # no extra sources: these pairs
        self._info["train"].update(pairs=len(pairs), capped=False,
                                   source=f"teacher scores {self.teacher_settings['output']}")
        summary = self.teacher_summary
        self._info["distill"] = {
            "teacher_scores": self.teacher_settings["output"], "teacher": summary.get("teacher"),
            "questions": len(pairs), "list_size": self.teacher_settings["list_size"],
            "list_entries": sum(1 + len(r["negatives"]) for r in self.lists),
            "counts": summary.get("counts"), "first_stage": summary.get("first_stage"),
            "seconds": summary.get("seconds")}

    def train_dataloader(self):
        loader = super().train_dataloader()
        negatives = self.tokens.memo(self.lists, lambda: TokenizedTexts.build(
            self.tokenizer, [t for r in self.lists for _, t in r["negatives"]],
            self.max_answer_length))
        loader.collate_fn = ListCollator(loader.collate_fn, self.lists, self.teacher_scores,
                                         negatives, int(self.teacher_settings["list_size"]),
                                         self.pad_to_multiple_of)
        return loader
