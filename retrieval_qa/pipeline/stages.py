"""First-stage retrievers and their run files.

Each retriever ranks every candidate of the pool with the one evaluator (its own metrics are
the full ranking's) and keeps its top-k per question, written as a run file
(``<name>.run.jsonl``, :mod:`retrieval_qa.evaluation.runfile`: ``top_ids`` / ``top_scores``
per question, in the pool's question order). Fusion and reranking read those lists back, in
memory or from the files (``--from-run-files``), through the same :meth:`StageRun.from_records`.

Beside each run file, ``<name>.run.settings.json`` records the settings its lists were
computed with (the stage's ``run_settings``, :mod:`.retrievers`); ``--from-run-files`` refuses a run file whose
recorded settings differ from the stage's of the pipeline given (another model under the same
name, another ``top_k``...), naming the file and the keys. Run files written before the
settings were recorded are read with a warning that they cannot be checked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.types import RetrievalPool
from ..errors import DataFormatError
from ..evaluation.evaluator import _records, doc_index, rank_questions
from ..evaluation.metrics import metrics_from_ranks
from ..evaluation.per_question import beside_run_file, write_per_question
from ..evaluation.runfile import RunFileWriter, read_records
from ..written import write_text

RUN_SUFFIX = ".run.jsonl"


@dataclass
class StageRun:
    """One stage's lists for the questions of a pool.

    Attributes:
        name: the stage's name.
        ids: per question ``q``, its list's candidate indices, best first.
        scores: their scores.
        metrics: the full ranking's metrics (empty when unknown).
        seconds: the stage's time.
        run_file: its run file; None: none written.
        gold_ranks: per question, the full ranking's gold rank (from the records).
        doc_ranks: per question, its gold document's rank; empty: none.
    """

    name: str
    ids: list[np.ndarray]
    scores: list[np.ndarray]
    metrics: dict = field(default_factory=dict)
    seconds: float = 0.0
    run_file: str | None = None
    gold_ranks: list = field(default_factory=list)  # the full ranking's, from the records
    doc_ranks: list = field(default_factory=list)

    def lists(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return list(zip(self.ids, self.scores, strict=True))

    @classmethod
    def from_records(cls, name: str, pool: RetrievalPool, records: list[dict],
                     source: str = "records") -> StageRun:
        """The lists of run-file records for the questions of ``pool`` (each record found by
        its question and question id, so a run file of a pool also serves a subset of its
        questions; every id must be a candidate of the pool)."""
        fix = (f"give the run file written for {pool.dataset}/{pool.pool} (or a pool holding "
               "its questions) by this pipeline, or run it without --from-run-files")
        by_key = {(r.get("question"), r.get("question_id")): r for r in records}
        index = {c.id: i for i, c in enumerate(pool.candidates)}
        ids, scores, ranks, doc_ranks = [], [], [], []
        for q, question in enumerate(pool.questions):
            qid = pool.question_ids[q] if pool.question_ids else None
            rec = by_key.get((question, qid))
            if rec is None:
                raise DataFormatError(source, "whole file", f"no record of question "
                                      f"{question!r}" + (f" (qid {qid})" if qid else "")
                                      + f" of {pool.dataset}/{pool.pool}", fix)
            top, vals = rec.get("top_ids"), rec.get("top_scores")
            if not isinstance(top, list) or not isinstance(vals, list) or len(top) != len(vals):
                raise DataFormatError(source, f"the record of {question!r}", "no top_ids / "
                                      "top_scores of equal length", fix)
            unknown = [c for c in top if c not in index]
            if unknown:
                raise DataFormatError(source, f"the record of {question!r}", f"candidate "
                                      f"{unknown[0]!r} is not in the pool", fix)
            ids.append(np.fromiter((index[c] for c in top), dtype=np.int64, count=len(top)))
            scores.append(np.asarray(vals, dtype=np.float64))
            ranks.append(rec.get("gold_rank"))
            doc_ranks.append(rec.get("doc_rank"))
        return cls(name, ids, scores, gold_ranks=ranks,
                   doc_ranks=doc_ranks if None not in doc_ranks else [])

    @classmethod
    def from_file(cls, name: str, pool: RetrievalPool, path: str | Path,
                  ks) -> StageRun:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"--from-run-files: {path} does not exist; run the "
                                    "pipeline once without --from-run-files to write it")
        run = cls.from_records(name, pool, read_records(path), str(path))
        run.run_file = str(path)
        if None not in run.gold_ranks:  # the full ranking's metrics on these questions
            run.metrics = metrics_from_ranks(run.gold_ranks, ks)
            if run.doc_ranks:
                run.metrics.update(metrics_from_ranks(run.doc_ranks, ks, prefix="doc_"))
        return run


def settings_file(run_file: str | Path) -> Path:
    """``X.run.jsonl`` -> ``X.run.settings.json``.

    Args:
        run_file: the stage's run file.
    """
    path = Path(run_file)
    return path.with_name(path.name.removesuffix(".jsonl") + ".settings.json")


def check_stage_file(run_file: Path, wanted: dict) -> str | None:
    """Refuse a stage's run file recorded under other settings than ``wanted``
    (:class:`~retrieval_qa.errors.SettingsMismatchError`); returns a note when it records
    none (written by an earlier version: not checked), else None.

    Args:
        run_file: the stage's run file.
        wanted: the stage's settings in the pipeline given (its ``run_settings``).
    """
    from ..errors import InputFileError, SettingsMismatchError
    from ..training.run_folder import describe, flat_differences

    path = settings_file(run_file)
    fix = ("run the pipeline without --from-run-files (it writes run files of these "
           "settings), or give the --pipeline-dir of a run of these retrievers")
    if not path.is_file():
        return (f"{path.name} missing (run files of an earlier version): the settings of "
                f"{Path(run_file).name} are not checked")
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputFileError("--from-run-files", path, f"unreadable ({e})", fix) from e
    diffs = flat_differences(recorded if isinstance(recorded, dict) else {}, wanted)
    if diffs:
        raise SettingsMismatchError(run_file, diffs, f"--from-run-files {run_file}: its lists "
                                    f"were computed with other settings than the stage's "
                                    f"({describe(diffs)}) (fix: {fix})")
    return None


def retrieve(name: str, pool: RetrievalPool, scorer, top_k: int, *,
             doc_level: bool, memory_mb: float, ks, run_file: str | Path | None = None,
             seconds: float = 0.0) -> StageRun:
    """Rank the pool with ``scorer`` (the evaluator's rules), keep the top ``top_k`` of each
    question, write them to ``run_file`` (if given, with its per-question records beside it:
    ``X.run.jsonl`` -> ``X.run.questions.jsonl.gz``) and return them as a :class:`StageRun`
    with the full ranking's metrics.

    Args:
        name: the stage's name.
        pool: the pool.
        scorer: the evaluator's scorer of the stage.
        top_k: the candidates kept per question.
        doc_level: also the gold documents' ranks.
        memory_mb: the evaluator's memory budget, in MiB.
        ks: the cut-offs of R@k.
        run_file: the run file to write; None: none.
        seconds: time already spent (indexing, encoding).
    """
    start = time.perf_counter()
    doc_of = doc_index(pool)[0] if doc_level else None
    cand_ids = [c.id for c in pool.candidates]
    records: list[dict] = []

    def keep(rows, ranks, doc_ranks, top):
        block = _records(pool, cand_ids, rows, ranks, doc_ranks, top)
        records.extend(block)
        if out:
            out.write(block)

    with RunFileWriter(run_file) as out:
        ranks, doc_ranks = rank_questions(scorer, pool.gold, doc_of, memory_mb=memory_mb,
                                          top_k=top_k, on_block=keep, desc=name)
    if run_file is not None:
        write_per_question(beside_run_file(run_file), pool, ranks, doc_ranks, ks)
    run = StageRun.from_records(name, pool, records)
    run.metrics = metrics_from_ranks(ranks, ks)
    if doc_ranks is not None:
        run.metrics.update(metrics_from_ranks(doc_ranks, ks, prefix="doc_"))
    run.seconds = seconds + time.perf_counter() - start
    run.run_file = str(run_file) if run_file is not None else None
    return run


def run_retriever(stage, pool: RetrievalPool, top_k: int, *,
                  run_file: str | Path | None = None, progress: bool = False,
                  **kwargs) -> StageRun:
    """A first-stage retriever (:mod:`.retrievers`) on ``pool``: its scorer's lists
    (:func:`retrieve`), with its settings (its ``run_settings``) beside the run file.

    Args:
        stage: the retriever (:mod:`.retrievers`).
        pool: the pool.
        top_k: the candidates kept per question.
        run_file: the run file to write; None: none.
        progress: show progress bars.
        **kwargs: passed to :func:`retrieve` (``doc_level``, ``memory_mb``, ``ks``).
    """
    start = time.perf_counter()
    scorer = stage.scorer(pool, progress)
    run = retrieve(stage.name, pool, scorer, top_k, run_file=run_file,
                   seconds=time.perf_counter() - start, **kwargs)
    if run_file is not None:
        write_text(settings_file(run_file), json.dumps(stage.run_settings(top_k), indent=2,
                                                       sort_keys=True))
    return run
