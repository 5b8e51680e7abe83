"""Supervised mining (paper section 4.3): extra positive pairs for the training questions,
found by a retriever and labelled by the cross-attention classifier.

For every question of the training pool: its top ``top_k`` sentences of the whole pool by the
retriever (an exported dual encoder; the paper: USE-QA), known positives removed
(:func:`~retrieval_qa.data.pool_index.known_positives`: gold sentences and every copy of
their text); each (question, sentence, context) scored by a :class:`~.scorer.PairScorer` in
batches; a pair is mined when ``p >= threshold`` (0.5) and weighs ``p ** weight_power`` (p
squared); gold pairs weigh 1. A mined pair never repeats a gold pair or another mined pair (same question text and
sentence text; the first by question order and rank is kept).

Resumable: questions are cut into shards of ``shard_questions``; each scored shard is written
whole to ``shards/`` (a temporary file, then renamed; its last line counts its records) and
never scored again, the retriever's encodings are kept in ``encodings/``, and
``manifest.json`` records the job (pool, retriever, scorer, settings): the same command resumes
where a crash left it, another job in the same folder is an error. A shard found damaged
(empty, truncated, garbage, of an older format) is scored again with a warning naming it; a
damaged manifest is refused (the shards' job is then unknown). A tqdm bar on stderr counts
scored pairs.

Output folder::

    manifest.json   the job
    shards/         scored neighbours, one JSONL per shard (resume state), then
                    {"shard": S, "records": N}
    pairs/          datasets table (save_to_disk): the augmented training set, gold pairs
                    (source "gold", weight 1) then mined pairs (source "mined", weight p^2),
                    with probability, retriever rank and score, question and candidate ids
    scored/         datasets table: every scored neighbour with its status (mined,
                    below_threshold, duplicate) - what the classifier said about all of them
                    (paragraphs by doc_id / candidate_index into the pool, not repeated)
    mined.jsonl     the mined pairs as `data.extra_pairs` lines ({question, answer, context,
                    weight, probability, ...})
    summary.json    counts: gold pairs, mined pairs and their share of gold (the paper: +12 %
                    on SQuAD), shards resumed, pairs scored per second
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..data.pool_index import known_positives
from ..data.types import RetrievalPool
from ..errors import InputFileError, SettingsMismatchError
from ..written import (
    Damaged,
    atomic_dir,
    check,
    read_back,
    read_json,
    rebuilding,
    refuse,
    write_text,
)
from .neighbours import dense_neighbours
from .scorer import PairScorer

MINER_VERSION = 1
STATUSES = ("mined", "below_threshold", "duplicate")
#: what each scored record of a shard holds
RECORD_KEYS = ("question_index", "question_id", "question", "candidate_index", "answer_id",
               "answer", "doc_id", "retriever_rank", "retriever_score", "probability")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MiningSettings:
    """The keys of ``conf/mine/default.yaml`` that change what is mined.

    Attributes:
        top_k: the retriever's neighbours scored per question (the paper: 10).
        threshold: a pair is kept when its probability ``p >= threshold`` (in [0, 1]).
        weight_power: a kept pair's weight is ``p ** weight_power`` (the paper: p^2).
        shard_questions: questions per resumable shard.
        chunk_pairs: pairs handed to the scorer at once (the progress bar's step).
    """

    top_k: int = 10               # neighbours per question (the paper: 10)
    threshold: float = 0.5        # keep p >= threshold
    weight_power: float = 2.0     # weight = p ** weight_power (the paper: p^2)
    shard_questions: int = 256    # questions per resumable shard
    chunk_pairs: int = 256        # pairs handed to the scorer at once (the bar's step)

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.shard_questions < 1 or self.chunk_pairs < 1:
            raise ValueError(f"top_k, shard_questions and chunk_pairs must be >= 1: {self}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold={self.threshold}: a probability in [0, 1]")


def pool_digest(pool: RetrievalPool) -> str:
    """A sha256 digest of a pool's questions (text and key) and candidates (id, text, doc).

    Args:
        pool: the pool.
    """
    h = hashlib.sha256()
    for q, key in zip(pool.questions, pool.question_keys, strict=True):
        h.update(q.encode() + b"\0" + key.encode() + b"\1")
    for c in pool.candidates:
        h.update(c.id.encode() + b"\0" + c.text.encode() + b"\0" + c.doc_id.encode() + b"\1")
    return h.hexdigest()


def _check_manifest(folder: Path, manifest: dict) -> bool:
    """Write the manifest, or check it against the one there; True when resuming. Shards of
    another job (other settings, pool, retriever or scorer), or of a job whose manifest is
    gone, are never mixed into this one: an error naming the folder, what differs and the
    fix."""
    from ..training.run_folder import describe, flat_differences

    path = folder / "manifest.json"
    fix = "give this job its own --output folder, or delete that one to start over"
    if not path.is_file():
        shards = sorted((folder / "shards").glob("shard-*.jsonl"))
        if shards:
            raise InputFileError("--output", folder, f"holds {len(shards)} scored shard(s) "
                                 "but no manifest.json: the job they were scored for cannot "
                                 "be checked, so they are not mixed into this one", fix)
        write_text(path, json.dumps(manifest, indent=2, sort_keys=True))
        return False
    try:
        old = read_json(path)
    except Damaged as damage:
        raise refuse(damage, "mining manifest", "the job of the shards beside it is unknown: "
                     f"delete {folder} to start over, or give this job another --output "
                     "folder") from None
    if old != manifest:
        diffs = flat_differences(old if isinstance(old, dict) else {}, manifest)
        raise SettingsMismatchError(folder, diffs, f"{folder} holds another mining job "
                                    f"({describe(diffs)}); its shards are not mixed into this "
                                    f"one (fix: {fix})")
    return True


class Miner:
    """Mines ``pool``: each question's retrieved neighbours scored by ``scorer``, in
    resumable shards under ``output``.

    Args:
        pool: the pool mined.
        retriever: ``encode_questions(texts, progress=...)`` / ``encode_answers(candidates,
            progress=...)`` (an exported dual encoder,
            :func:`~retrieval_qa.models.artifact.load_artifact`).
        scorer: a :class:`~.scorer.PairScorer`.
        output: the job's folder (manifest, shards, summary, mined pairs).
        settings: the :class:`MiningSettings`.
        retriever_id: what identifies the retriever in the manifest (e.g. a digest of its
            files, not its path: the same job resumes from another working directory); None:
            its class name.
        pool_notes: the pool's build notes (:func:`~retrieval_qa.data.load_pool`); a rebuilt
            pool's note is reported in the summary.
        progress: show progress bars.
        paths: where the models were read from, reported in the summary only.
    """

    def __init__(self, pool: RetrievalPool, retriever, scorer: PairScorer, output: str | Path,
                 settings: MiningSettings, retriever_id: dict | None = None,
                 pool_notes: dict | None = None, progress: bool = True,
                 paths: dict | None = None) -> None:
        self.pool, self.retriever, self.scorer = pool, retriever, scorer
        self.output = Path(output)
        self.settings = settings
        self.retriever_id = retriever_id or {"retriever": type(retriever).__name__}
        self.pool_notes = pool_notes or {}
        self.progress = progress
        self.paths = paths or {}
        self.shard_dir = self.output / "shards"

    # ---- the job ------------------------------------------------------------------------
    def manifest(self) -> dict:
        p = self.pool
        return {"version": MINER_VERSION, "settings": asdict(self.settings),
                "pool": {"dataset": p.dataset, "pool": p.pool,
                         "question_unit": p.question_unit, "questions": len(p.questions),
                         "candidates": len(p.candidates), "digest": pool_digest(p)},
                "retriever": self.retriever_id, "scorer": self.scorer.describe()}

    @property
    def num_shards(self) -> int:
        return math.ceil(len(self.pool.questions) / self.settings.shard_questions)

    def shard_path(self, s: int) -> Path:
        return self.shard_dir / f"shard-{s:05d}.jsonl"

    def run(self) -> dict:
        start = time.perf_counter()
        self.output.mkdir(parents=True, exist_ok=True)
        resumed = _check_manifest(self.output, self.manifest())
        self.shard_dir.mkdir(exist_ok=True)
        shards = {s: self._read_shard(s) for s in range(self.num_shards)}
        todo = [s for s, records in shards.items() if records is None]
        scored = 0
        if todo:
            scored = self._score_shards(todo, shards)
        rows = [r for s in range(self.num_shards) for r in shards[s]]
        summary = self._assemble(rows)
        seconds = time.perf_counter() - start
        summary.update({
            "resumed": resumed, "shards": self.num_shards,
            "shards_resumed": self.num_shards - len(todo), "shards_scored": len(todo),
            "pairs_scored_this_run": scored, "seconds": round(seconds, 2),
            "pairs_per_second_this_run": round(scored / seconds, 2) if scored else None})
        write_text(self.output / "summary.json", json.dumps(summary, indent=2))
        return summary

    # ---- scoring ------------------------------------------------------------------------
    def _encode(self) -> tuple[torch.Tensor, torch.Tensor]:
        if hasattr(self.retriever, "work_dir"):
            self.retriever.work_dir = self.output / "encodings"  # resumable encoding shards
        q = self.retriever.encode_questions(self.pool.questions, progress=self.progress)
        c = self.retriever.encode_answers(self.pool.candidates, progress=self.progress)
        return q, c

    def _score_shards(self, todo: Sequence[int], shards: dict[int, list[dict] | None]) -> int:
        """Score the shards ``todo``, write each, and put its records in ``shards``."""
        q, c = self._encode()
        positives = known_positives(self.pool)
        n_q, size = len(self.pool.questions), self.settings.shard_questions
        total = sum(min(size, n_q - s * size) for s in todo) * self.settings.top_k
        scored = 0
        with tqdm(total=total, desc="mine: score pairs", unit="pair", file=sys.stderr,
                  disable=not self.progress, dynamic_ncols=True) as bar:
            for s in todo:
                rows = range(s * size, min((s + 1) * size, n_q))
                neighbours = dense_neighbours(q, c, positives, self.settings.top_k, rows)
                records = self._records(rows, neighbours)
                bar.total -= len(rows) * self.settings.top_k - len(records)
                probabilities: list[float] = []
                step = self.settings.chunk_pairs
                for lo in range(0, len(records), step):
                    chunk = records[lo:lo + step]
                    p = self.scorer([r["question"] for r in chunk], [r["answer"] for r in chunk],
                                    [self.pool.candidates[r["candidate_index"]].context
                                     for r in chunk])
                    if len(p) != len(chunk):
                        raise ValueError(f"the scorer gave {len(p)} probabilities for "
                                         f"{len(chunk)} pairs")
                    probabilities += [float(x) for x in torch.as_tensor(p).float().tolist()]
                    bar.update(len(chunk))
                for r, p in zip(records, probabilities, strict=True):
                    r["probability"] = p
                trailer = {"shard": s, "records": len(records)}
                write_text(self.shard_path(s), "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                       for r in [*records, trailer]))
                shards[s] = records
                scored += len(records)
        return scored

    def _records(self, rows: range, neighbours: list[list[tuple[int, float]]]) -> list[dict]:
        pool, keys = self.pool, self.pool.question_keys
        out = []
        for i, found in zip(rows, neighbours, strict=True):
            for rank, (c, score) in enumerate(found, 1):
                cand = pool.candidates[c]
                out.append({"question_index": i, "question_id": keys[i],
                            "question": pool.questions[i], "candidate_index": c,
                            "answer_id": cand.id, "answer": cand.text,
                            "doc_id": cand.doc_id, "retriever_rank": rank,
                            "retriever_score": float(score)})
        return out

    def _read_shard(self, s: int) -> list[dict] | None:
        """The records of finished shard ``s``; None when it is not written yet, or damaged
        (a warning names it, and it is scored again)."""
        path = self.shard_path(s)
        if not path.exists():
            return None
        size = self.settings.shard_questions
        rows = range(s * size, min((s + 1) * size, len(self.pool.questions)))

        def read(p: Path) -> list[dict]:
            lines = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()
                     if line.strip()]
            check(bool(lines) and lines[-1] == {"shard": s, "records": len(lines) - 1}, p,
                  f"no last line {{\"shard\": {s}, \"records\": {len(lines) - 1}}} (truncated, "
                  "or an older format)")
            records = lines[:-1]
            for n, r in enumerate(records, 1):
                check(isinstance(r, dict) and all(k in r for k in RECORD_KEYS)
                      and r["question_index"] in rows
                      and 0 <= r["candidate_index"] < len(self.pool.candidates), p,
                      f"line {n} is not a scored neighbour of this shard's questions")
            return records

        try:
            return read_back(path, read, "a shard of scored neighbours")
        except Damaged as damage:
            rebuilding(damage, log)
            return None

    # ---- output -------------------------------------------------------------------------
    def _assemble(self, rows: list[dict]) -> dict:
        st = self.settings
        gold = {(p.question, p.answer) for p in self.pool.pairs}
        seen: set[tuple[str, str]] = set()
        mined = []
        for r in rows:
            pair = (r["question"], r["answer"])
            if r["probability"] < st.threshold:
                r["status"], r["weight"] = "below_threshold", 0.0
            elif pair in gold or pair in seen:
                r["status"], r["weight"] = "duplicate", 0.0
            else:
                seen.add(pair)
                r["status"], r["weight"] = "mined", float(r["probability"]) ** st.weight_power
                mined.append({**r, "context": self.pool.candidates[r["candidate_index"]].context})
        provenance = {"manifest": self.manifest(), "output": str(self.output)}
        self._save_tables(rows, mined, provenance)
        write_text(self.output / "mined.jsonl", "".join(json.dumps({k: r[k] for k in (
            "question", "answer", "context", "weight", "probability", "question_id",
            "answer_id", "retriever_rank", "retriever_score")}, ensure_ascii=False) + "\n"
            for r in mined))
        counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
        n_gold = len(self.pool.pairs)
        p = self.pool
        return {
            "output": str(self.output), "pairs_table": str(self.output / "pairs"),
            "scored_table": str(self.output / "scored"),
            "extra_pairs_jsonl": str(self.output / "mined.jsonl"),
            "dataset": p.dataset, "pool": p.pool, "source": p.source,
            **({"rebuilt": self.pool_notes["rebuild_note"]}
               if self.pool_notes.get("rebuilt") else {}),
            "questions": len(p.questions), "candidates": len(p.candidates),
            "gold_pairs": n_gold, "scored_pairs": len(rows), "mined_pairs": counts["mined"],
            "mined_over_gold_percent": round(100 * counts["mined"] / n_gold, 2) if n_gold else None,
            "below_threshold": counts["below_threshold"], "duplicates": counts["duplicate"],
            "questions_with_mined_pairs": len({r["question_index"] for r in mined}),
            "mean_probability_mined": round(sum(r["probability"] for r in mined) / len(mined), 4)
            if mined else None,
            "threshold": st.threshold, "weight": f"p^{st.weight_power:g} (gold pairs: 1)",
            "top_k": st.top_k, "retriever": self.retriever_id, "scorer": self.scorer.describe(),
            "paths": self.paths}

    def _save_tables(self, rows: list[dict], mined: list[dict], provenance: dict) -> None:
        import datasets

        info = json.dumps(provenance, default=str)
        gold_rows = [{"question_id": self.pool.pair_key(p), "question": p.question,
                      "answer_id": p.answer_id, "answer": p.answer, "context": p.context,
                      "source": "gold", "weight": 1.0, "probability": None,
                      "retriever_rank": None, "retriever_score": None} for p in self.pool.pairs]
        mined_rows = [{"question_id": r["question_id"], "question": r["question"],
                       "answer_id": r["answer_id"], "answer": r["answer"],
                       "context": r["context"], "source": "mined", "weight": r["weight"],
                       "probability": r["probability"], "retriever_rank": r["retriever_rank"],
                       "retriever_score": r["retriever_score"]} for r in mined]
        features = datasets.Features({
            "question_id": datasets.Value("string"), "question": datasets.Value("string"),
            "answer_id": datasets.Value("string"), "answer": datasets.Value("string"),
            "context": datasets.Value("string"), "source": datasets.Value("string"),
            "weight": datasets.Value("float64"), "probability": datasets.Value("float64"),
            "retriever_rank": datasets.Value("int32"),
            "retriever_score": datasets.Value("float64")})
        pairs = datasets.Dataset.from_list(
            gold_rows + mined_rows,
            info=datasets.DatasetInfo(description=info, features=features))
        scored_features = datasets.Features({
            **{k: datasets.Value("string") for k in ("question_id", "question", "answer_id",
                                                      "answer", "doc_id", "status")},
            "question_index": datasets.Value("int64"), "candidate_index": datasets.Value("int64"),
            "retriever_rank": datasets.Value("int32"), "retriever_score": datasets.Value("float64"),
            "probability": datasets.Value("float64"), "weight": datasets.Value("float64")})
        scored = datasets.Dataset.from_list(
            rows, info=datasets.DatasetInfo(description=info, features=scored_features))
        bars = datasets.is_progress_bar_enabled()
        if not self.progress:
            datasets.disable_progress_bars()
        try:
            for name, table in (("pairs", pairs), ("scored", scored)):
                with atomic_dir(self.output / name) as tmp:
                    table.save_to_disk(str(tmp))
        finally:
            if bars:
                datasets.enable_progress_bars()
