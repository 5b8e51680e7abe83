"""Hard negatives for the reranker's training from the first stage it reranks at test time.

The reranker's training (:func:`~retrieval_qa.classifiers.train_reranker.train_reranker`)
takes its hard negatives from BM25's top k over the training side by default. With a
``first_stage`` block naming :class:`FirstStageNegatives`, they come from a pipeline's fused
first-stage lists instead (its retrievers and fusion, the fusion tuned on the validation side
of the training file as the pipeline tunes it; :func:`.lists.first_stage`), the lists the
reranker sees when it reranks: conf/pipeline/training/reranker.yaml gives the block. The
same-answer rule of the examples (:func:`~retrieval_qa.classifiers.reranker_data.
rerank_examples`) applies to both sources.

A trained first stage that learnt from the training side (the fine-tuned MiniLM of
``hybrid_ft``) ranks those questions' gold sentences higher than it would unseen ones; its
negatives are still the sentences it confuses with the gold."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.types import RetrievalPool
from ..pipeline.fused_ranks import ordered

__all__ = ["FirstStageNegatives"]


class FirstStageNegatives:
    """The ``top_k`` best candidates of each question's fused first-stage list, best first.

    Args:
        pipeline: a conf/pipeline name or YAML file; its retrievers and fusion are the first
            stage (its reranker is not used).
        top_k: candidates kept per question (the hard negatives are the best of them that
            the same-answer rule leaves).
        folder: where the first stage's run files are kept (read back when their settings
            match, so a second training over the same questions computes nothing again).
        evaluation: the ``eval`` block (conf/eval/default.yaml) the stages' runs use.

    Example:

        >>> source = FirstStageNegatives(pipeline="hybrid_ft", top_k=20,
        ...                              folder="runs/reranker/first-stage",
        ...                              evaluation={"ks": [1], "doc_level": False,
        ...                                          "memory_mb": 512})
        >>> source.top_k
        20
        >>> top = source(pool, data_dir=None, progress=False)  # doctest: +SKIP
    """

    name = "first_stage"

    def __init__(self, *, pipeline: str, top_k: int, folder: str, evaluation: dict) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"first_stage.top_k={top_k!r} is not a whole number >= 1")
        self.pipeline, self.top_k, self.folder = str(pipeline), top_k, Path(folder)
        self.evaluation = dict(evaluation)
        self.info: dict = {}

    def __call__(self, pool: RetrievalPool, *, data_dir, progress: bool) -> list[np.ndarray]:
        """Each question's ``top_k`` candidate indices of ``pool``, best first; what the first
        stage did (its fusion as tuned, each stage's metrics on ``pool``) in :attr:`info`."""
        from ..pipeline.composition import load_pipeline
        from .lists import first_stage

        fused, self.info = first_stage(load_pipeline(self.pipeline), pool, self.folder,
                                       data_dir=data_dir, evaluation=self.evaluation,
                                       progress=progress)
        out = []
        for ids, scores in fused:
            ids = np.asarray(ids, dtype=np.int64)
            out.append(ids[ordered(ids, np.asarray(scores, dtype=np.float64))][:self.top_k])
        return out
