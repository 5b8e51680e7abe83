"""The reranker's scores of a pool's heads, kept in shards beside the pipeline's run files, so
that a reranking stopped by a crash goes on from its first missing shard and a rerun of the
same reranker over the same heads (another head weight or gate, ``--from-run-files``) scores
nothing again.

Layout (``<pipeline-dir>/<pool folder>/``)::

    reranker_scores/<digest>/0000000.json   the scores of questions [0, shard_questions)
    reranker_scores/<digest>/0000256.json   ...

``<digest>``: the first 16 hex digits of the digest of the reranker export's files. A shard
records the full digest, its first question, a digest of its heads (each question's text and
its head's candidates, in order), a digest of its questions and each head's candidates: a
shard of the same heads is read back whole; one of other heads of the same questions (other
fusion weights, another depth, another first stage) gives the scores of the pairs it holds,
and only the others are scored before it is written over (the reranker scores each pair on
its own); a damaged one is rebuilt with a warning. Not the batch size or the thread count,
which change the scores in their last bits only. Shards of format 1 (no candidates) are read
back whole only.
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

FORMAT = 2
#: the formats read back: 1 whole only (it keeps no candidates), 2 whole or pair by pair
READS = (1, 2)
FOLDER = "reranker_scores"


def questions_digest(questions: Sequence[str]) -> str:
    """Which questions a shard holds, in order.

    Args:
        questions: the shard's question texts.
    """
    return hashlib.sha256(json.dumps(list(questions)).encode()).hexdigest()


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
        #: questions whose heads' scores were read back whole; pairs read back from shards of
        #: other heads; seconds of scoring of the shards read or written (as each recorded)
        self.reused, self.pairs_reused, self.seconds = 0, 0, 0.0

    def path(self, first: int) -> Path:
        return self.folder / f"{first:07d}.json"

    def read(self, first: int, questions: Sequence[str], heads: Sequence[np.ndarray]
             ) -> list[np.ndarray] | None:
        """Per question (``first``, ...), the scores of its head's pairs that the shard
        holds: all of them for a shard of these heads; for a shard of other heads of the same
        questions, those pairs it scored, NaN for the others. None when it holds none
        (missing, of other questions, of format 1 and other heads, or damaged: rebuilt with a
        warning)."""
        path = self.path(first)
        if not path.is_file():
            return None
        try:
            shard = read_json(path, ("reranker", "first", "heads", "scores"))
            check(shard.get("format") in READS, path,
                  f"format {shard.get('format')!r}; this version reads {READS}")
            check(shard["reranker"] == self.reranker, path, "the scores of another reranker")
            whole = shard["first"] == first and shard["heads"] == heads_digest(questions, heads)
            if whole:
                held = heads
            elif (shard["format"] == 2 and shard["first"] == first
                  and shard.get("questions") == questions_digest(questions)):
                held = shard.get("candidates")
                check(isinstance(held, list) and len(held) == len(heads) and all(
                    isinstance(h, list) and all(type(c) is int for c in h) for h in held),
                    path, "no list of candidate indices per question")
            else:
                log.info("%s holds the scores of other heads: scoring them again", path)
                return None
            scores = shard["scores"]
            check(isinstance(scores, list) and len(scores) == len(heads), path,
                  f"{len(scores) if isinstance(scores, list) else 'no'} score lists for "
                  f"{len(heads)} questions")
            for q, (s, h) in enumerate(zip(scores, held, strict=True)):
                check(isinstance(s, list) and isinstance(h, list | np.ndarray)
                      and len(s) == len(h) and all(
                          isinstance(v, int | float) and math.isfinite(v) for v in s), path,
                      f"the scores of question {first + q} are not {len(h)} finite numbers")
        except Damaged as damage:
            rebuilding(damage, log)
            return None
        if whole:
            self.reused += len(heads)
            self.seconds += float(shard.get("seconds") or 0.0)
            return [np.asarray(s, dtype=np.float64) for s in scores]
        known = [dict(zip((int(c) for c in h), s, strict=True))
                 for h, s in zip(held, scores, strict=True)]
        out = [np.array([k.get(int(c), np.nan) for c in h], dtype=np.float64)
               for k, h in zip(known, heads, strict=True)]
        found = sum(int(np.isfinite(v).sum()) for v in out)
        log.info("%s holds %d of these heads' %d pairs: scoring the others", path, found,
                 sum(len(h) for h in heads))
        self.pairs_reused += found
        return out if found else None

    def write(self, first: int, questions: Sequence[str], heads: Sequence[np.ndarray],
              scores: Sequence[np.ndarray], seconds: float) -> None:
        """One finished shard, atomically; ``seconds``: the scoring its writing took."""
        self.seconds += seconds
        write_text(self.path(first), json.dumps({
            "format": FORMAT, "reranker": self.reranker, "first": first,
            "heads": heads_digest(questions, heads), "seconds": round(seconds, 3),
            "questions": questions_digest(questions),
            "candidates": [[int(c) for c in h] for h in heads],
            "scores": [np.asarray(s, dtype=np.float64).tolist() for s in scores]}))
