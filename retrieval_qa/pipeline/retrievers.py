"""The first-stage retrievers of a pipeline, built from its ``retrievers:`` blocks by the
registry (:func:`~retrieval_qa.registry.instantiate`): a block names its class by
``_target_``, or by ``kind`` (``bm25``, ``dual_encoder``: the short names of
:data:`~retrieval_qa.registry.SHORT_NAMES`), and is merged over the settings of its kind
(``conf/pipeline/stages/<kind>.yaml``).

A retriever is any class with a ``name`` keyword (the block's name in ``retrievers:``) whose
objects give :meth:`scorer` (the evaluator's scorer of a pool: ``score(rows)`` for blocks of
questions) and :meth:`run_settings` (what determines its lists, recorded beside its run
file). A new one is a module and a block that names it in ``_target_``::

    retrievers:
      splade: {_target_: my_project.splade.SpladeRetriever, checkpoint: runs/splade}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from ..data.types import RetrievalPool
from ..errors import did_you_mean

__all__ = ["BM25Retriever", "DenseRetriever", "paragraph_vectors"]


class BM25Retriever:
    """BM25 over the pool's candidates: conf/model/bm25.yaml's settings under ``settings``.
    It reads no config: the composition gives it that file's settings as ``defaults`` (its
    :attr:`defaults_from` names the file).

    Args:
        name: the retriever's name in the pipeline (it keys the fusion weights and names the
            run file).
        settings: keys of conf/model/bm25.yaml over its values, e.g. ``{"with_context":
            True}`` (index "sentence + paragraph"; the candidate is still the sentence).
        defaults: conf/model/bm25.yaml's settings
            (:func:`retrieval_qa.config.model_defaults`, ``"bm25"``).

    Example:

        >>> from retrieval_qa.data import Candidate, RetrievalPool
        >>> pool = RetrievalPool("toy", "dev", [
        ...     Candidate("c0", "Paris is the capital of France.", "", "d0"),
        ...     Candidate("c1", "The Nile flows through Egypt.", "", "d1")],
        ...     questions=["What is the capital of France?"], gold=[[0]])
        >>> from retrieval_qa.config import model_defaults
        >>> stage = BM25Retriever(name="bm25_context", settings={"with_context": True},
        ...                       defaults=model_defaults("bm25"))
        >>> scores = stage.scorer(pool).score(range(0, 1))
        >>> scores.shape, bool(scores[0, 0] > scores[0, 1])
        (torch.Size([1, 2]), True)
    """

    kind = "bm25"
    #: the file of conf/model whose settings the composition gives as ``defaults``
    defaults_from = "bm25"

    def __init__(self, *, name: str, settings: dict, defaults: Mapping) -> None:
        if not isinstance(settings, dict):
            raise ValueError(f"settings={settings!r} is not a mapping (fix: give keys of "
                             "conf/model/bm25.yaml, e.g. {with_context: true})")
        self.defaults = dict(defaults)
        allowed = sorted(set(self.defaults) - {"name"})
        for key in settings:
            if key not in allowed:
                raise ValueError(f"settings.{key}: unknown key; {did_you_mean(key, allowed)}"
                                 f"(fix: use one of {allowed}, the keys of "
                                 "conf/model/bm25.yaml)")
        self.name, self.settings = name, dict(settings)

    def bm25_settings(self) -> dict:
        """conf/model/bm25.yaml with this stage's settings over it."""
        return {**self.defaults, **self.settings}

    def run_settings(self, top_k: int) -> dict:
        """What determines its lists: its kind, ``top_k`` and the BM25 settings."""
        return {"kind": self.kind, "top_k": top_k, "bm25": self.bm25_settings()}

    def scorer(self, pool: RetrievalPool, progress: bool = False):
        from ..baselines.bm25 import BM25Scorer, BM25Settings

        return BM25Scorer(pool, BM25Settings.from_config(self.bm25_settings()),
                          progress=progress)


#: the last encoding of this process, by (model folder and its export's time, pool, batch
#: size): two stages over one model (a sentence stage and a paragraph stage) encode the pool
#: once
_ENCODED: dict[tuple, tuple] = {}


def paragraph_vectors(candidates: torch.Tensor, doc_of: torch.Tensor, weight: float
                      ) -> torch.Tensor:
    """Each candidate's vector mixed with its paragraph's: ``(1 - weight) * c + weight * p``,
    ``p`` the mean of the vectors of the candidates of the same paragraph (``doc_of`` [C]).
    A question's score is then ``(1 - weight) * q.c + weight * q.p``.

    Args:
        candidates: ``[C, D]`` candidate vectors.
        doc_of: ``[C]`` long, each candidate's paragraph.
        weight: ``w`` in [0, 1]; 0 returns ``candidates`` itself.

    Example:

        >>> import torch
        >>> vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
        >>> paragraph_vectors(vectors, torch.tensor([0, 0, 1]), 0.5)
        tensor([[0.7500, 0.2500],
                [0.2500, 0.7500],
                [2.0000, 2.0000]])
    """
    if weight == 0:
        return candidates
    n_docs = int(doc_of.max()) + 1 if len(doc_of) else 0
    sums = torch.zeros(n_docs, candidates.shape[1], dtype=candidates.dtype)
    sums.index_add_(0, doc_of, candidates)
    counts = torch.bincount(doc_of, minlength=n_docs).clamp(min=1).unsqueeze(1)
    return (1 - weight) * candidates + weight * (sums / counts)[doc_of]


class DenseRetriever:
    """An exported dual encoder: questions and candidates encoded, scored by inner product;
    with ``paragraph_weight``, each candidate's vector mixed with its paragraph's mean vector
    (:func:`paragraph_vectors`). Two stages over one model encode a pool once.

    Args:
        name: the retriever's name in the pipeline.
        checkpoint: an exported model folder (``rqa export --output``, or the ``checkpoint``
            printed by ``rqa train``).
        batch_size: the encoding batch.
        paragraph_weight: ``w`` of the score ``(1 - w) q.c + w q.p`` (0: the sentence alone,
            1: its paragraph).

    Example:

        >>> stage = DenseRetriever(name="minilm", checkpoint="runs/off_the_shelf",
        ...                        batch_size=128, paragraph_weight=0.0)
        >>> stage.kind
        'dual_encoder'
        >>> scorer = stage.scorer(pool)  # loads and encodes  # doctest: +SKIP
    """

    kind = "dual_encoder"

    def __init__(self, *, name: str, checkpoint: str, batch_size: int,
                 paragraph_weight: float) -> None:
        if not isinstance(checkpoint, str) or not checkpoint:
            raise ValueError(f"checkpoint={checkpoint!r} is not a folder (fix: give the folder "
                             "of an exported model: rqa export --output, or the `checkpoint` "
                             "printed by rqa train)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} is not a whole number >= 1")
        if isinstance(paragraph_weight, bool) or not isinstance(paragraph_weight, int | float) \
                or not 0 <= paragraph_weight <= 1:
            raise ValueError(f"paragraph_weight={paragraph_weight!r} is not a number in "
                             "[0, 1] (0: the sentence's vector alone, 1: its paragraph's "
                             "mean vector)")
        self.name, self.checkpoint, self.batch_size = name, checkpoint, batch_size
        self.paragraph_weight = float(paragraph_weight)

    def run_settings(self, top_k: int) -> dict:
        """What determines its lists: its kind, ``top_k``, the exported model (a digest of
        its files, wherever the folder is) and ``paragraph_weight``; not the encoding
        ``batch_size``, which changes the order of float additions only."""
        from ..mining.classifier_data import artifact_digest

        return {"kind": self.kind, "top_k": top_k, "model": artifact_digest(self.checkpoint),
                "paragraph_weight": self.paragraph_weight}

    def scorer(self, pool: RetrievalPool, progress: bool = False):
        from ..data.pool_index import doc_index
        from ..evaluation.search import DenseScorer
        from ..models.artifact import load_artifact

        folder = Path(self.checkpoint).resolve()
        exported = [p.stat().st_mtime_ns for p in sorted(folder.glob("*")) if p.is_file()]
        key = (str(folder), tuple(exported), id(pool), self.batch_size)
        if key not in _ENCODED:
            model = load_artifact(self.checkpoint)
            _ENCODED.clear()  # one pool's vectors at a time
            _ENCODED[key] = (
                pool,  # kept with its vectors, so its id is not reused while the entry lives
                model.encode_questions(pool.questions, batch_size=self.batch_size,
                                       progress=progress),
                model.encode_answers(pool.candidates, batch_size=self.batch_size,
                                     progress=progress))
        _, q, c = _ENCODED[key]
        return DenseScorer(q, paragraph_vectors(c, doc_index(pool)[0], self.paragraph_weight))
