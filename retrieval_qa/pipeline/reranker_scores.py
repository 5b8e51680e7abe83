"""The reranker's scores of a pool's heads, kept in shards beside the pipeline's run files, so
that a reranking stopped by a crash goes on from its first missing shard and a rerun of the
same reranker over the same heads (another head weight or gate, ``--from-run-files``) scores
nothing again.

Layout (``<pipeline-dir>/<pool folder>/``)::

    reranker_scores/<digest>/0000000.json   the scores of questions [0, shard_questions)
    reranker_scores/<digest>/0000256.json   ...

``<digest>``: the first 16 hex digits of the digest of the reranker export's files. A shard
records the full digest, its first question and a digest of its heads (each question's text
and its head's candidates, in order): a shard of other heads (other fusion weights, another
depth) is scored again and written over; a damaged one is rebuilt with a warning. Not the
batch size or the thread count, which change the scores in their last bits only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..written import Damaged, check, read_json, rebuilding, write_text

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "reranker_scores"


def heads_digest(questions: Sequence[str], heads: Sequence[np.ndarray]) -> str:
    """What a shard's scores are of: each question with its head's candidates, in order.

    Args:
        questions: the shard's question texts.
        heads: per question, its head's candidate indices.
    """
    rows = [[q, [int(c) for c in h]] for q, h in zip(questions, heads, strict=True)]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


class RerankerScores:
    """The shards of one reranker's head scores on one pool (see the module docstring).

    Args:
        folder: the pool's folder of the pipeline's run files.
        reranker: the digest of the reranker export's files
            (:func:`~retrieval_qa.mining.classifier_data.artifact_digest`).

    Example:

        >>> import numpy as np, tempfile
        >>> cache = RerankerScores(tempfile.mkdtemp(), "ab" * 32)
        >>> cache.read(0, ["who?"], [np.array([3, 1])]) is None
        True
        >>> cache.write(0, ["who?"], [np.array([3, 1])], [np.array([0.5, -1.0])], 0.1)
        >>> cache.read(0, ["who?"], [np.array([3, 1])])[0].tolist()
        [0.5, -1.0]
    """

    def __init__(self, folder: str | Path, reranker: str) -> None:
        self.reranker = reranker
        self.folder = Path(folder) / FOLDER / reranker[:16]
        #: questions whose scores were read back; seconds of scoring of the shards read or
        #: written (as each recorded when it was scored)
        self.reused, self.seconds = 0, 0.0

    def path(self, first: int) -> Path:
        return self.folder / f"{first:07d}.json"

    def read(self, first: int, questions: Sequence[str], heads: Sequence[np.ndarray]
             ) -> list[np.ndarray] | None:
        """The scores of these heads (questions ``first``, ...) when a shard holds them; None
        when none does (missing, of other heads, or damaged: rebuilt with a warning)."""
        path = self.path(first)
        if not path.is_file():
            return None
        try:
            shard = read_json(path, ("reranker", "first", "heads", "scores"),
                              ("format", FORMAT))
            check(shard["reranker"] == self.reranker, path, "the scores of another reranker")
            if shard["first"] != first or shard["heads"] != heads_digest(questions, heads):
                log.info("%s holds the scores of other heads: scoring them again", path)
                return None
            scores = shard["scores"]
            check(isinstance(scores, list) and len(scores) == len(heads), path,
                  f"{len(scores) if isinstance(scores, list) else 'no'} score lists for "
                  f"{len(heads)} questions")
            for q, (s, h) in enumerate(zip(scores, heads, strict=True)):
                check(isinstance(s, list) and len(s) == len(h) and all(
                    isinstance(v, int | float) and math.isfinite(v) for v in s), path,
                    f"the scores of question {first + q} are not {len(h)} finite numbers")
        except Damaged as damage:
            rebuilding(damage, log)
            return None
        self.reused += len(heads)
        self.seconds += float(shard.get("seconds") or 0.0)
        return [np.asarray(s, dtype=np.float64) for s in scores]

    def write(self, first: int, questions: Sequence[str], heads: Sequence[np.ndarray],
              scores: Sequence[np.ndarray], seconds: float) -> None:
        """One finished shard, atomically."""
        self.seconds += seconds
        write_text(self.path(first), json.dumps({
            "format": FORMAT, "reranker": self.reranker, "first": first,
            "heads": heads_digest(questions, heads), "seconds": round(seconds, 3),
            "scores": [np.asarray(s, dtype=np.float64).tolist() for s in scores]}))
