"""The batch evaluator: exact search in bounded-memory blocks, ReQA rank rules, metrics and
an optional run file, at sentence and document level."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.pool_index import doc_index
from ..data.types import QUESTION_TEXT, RetrievalPool
from . import sparse as sparse_rules
from .large_pool import columns_per_chunk, rank_block_in_chunks, stable_top_k
from .metrics import metrics_from_ranks
from .per_question import beside_run_file, write_per_question
from .ranking import gold_ranks
from .runfile import CANDIDATES_KEY, COUNT_KEY, RunFileWriter
from .search import Scorer, fitting_rows, rows_per_block

# sparse path: the block's listed entries (index, score and the temporaries of the rank
# rules, about 40 bytes each) for a share of candidates; 4 bytes per question x candidate
# cell is a tenth of the cells listed, more than BM25 lists on SQuAD (about 8%)
SPARSE_BYTES_PER_CELL = 4


@dataclass
class EvaluationResult:
    """What :func:`evaluate` gives.

    Args:
        metrics: ``{"mrr": ..., "mrr@100": ..., "r@k": ..., "p@k": ...}`` in percent (and
            ``doc_*`` with document-level ranks).
        ranks: ``[Q]`` float64, each question's rank (1-based, x.5 for ties).
        doc_ranks: ``[Q]`` float64 document-level ranks; None when not asked for.
        questions: Q, the number of evaluation questions.
        candidates: the number of candidates.
        seconds: the wall time of the evaluation.
        run_file: the run file written; None: none.
        extra: what a caller adds.
        question_unit: what a question is (``"question_text"`` or ``"mrqa_qid"``).
        per_question: the per-question record written; None: none.
    """

    metrics: dict[str, float]
    ranks: torch.Tensor
    doc_ranks: torch.Tensor | None
    questions: int
    candidates: int
    seconds: float
    run_file: str | None = None
    extra: dict = field(default_factory=dict)
    question_unit: str = QUESTION_TEXT
    per_question: str | None = None

    def summary(self) -> dict:
        return {"metrics": {k: round(v, 4) for k, v in self.metrics.items()},
                "question_unit": self.question_unit,
                "questions": self.questions, "candidates": self.candidates,
                "seconds": round(self.seconds, 3), "run_file": self.run_file,
                **({"search": self.extra["search"]} if "search" in self.extra else {}),
                **({"per_question": self.per_question} if self.per_question else {})}


def gold_mask(gold: list[list[int]], rows, width: int) -> torch.Tensor:
    """[len(rows), width] bool: True at the gold candidates of each question in ``rows``.

    Args:
        gold: each question's gold candidate indices.
        rows: the questions (indices into ``gold``) of the block.
        width: the candidates (columns).
    """
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for r, q in enumerate(rows):
        mask[r, gold[q]] = True
    return mask


def _question_name(pool: RetrievalPool, q: int) -> str:
    qid = f" (qid {pool.question_ids[q]})" if pool.question_ids else ""
    return f"question {q}{qid} {pool.questions[q]!r}"


def _non_finite_error(pool: RetrievalPool, q: int, c: int | None, value: float) -> ValueError:
    where = (f"candidate {pool.candidates[c].id!r}" if c is not None
             else "the candidates it shares no term with")
    return ValueError(f"{pool.dataset}/{pool.pool}: non-finite score {value} for "
                      f"{_question_name(pool, q)} at {where}; ranks need finite scores: check "
                      "the model's embeddings or the scorer for NaN/inf")


def rank_questions(scorer: Scorer, gold: list[list[int]], doc_of: torch.Tensor | None = None,
                   *, memory_mb: float, top_k: int = 0, sparse: bool | None = None,
                   on_block=None, non_finite=None, progress: bool = False,
                   desc: str = "evaluate", min_block_rows: int = 1
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The ranking core every evaluation runs through (``rqa evaluate``, validation and the
    post-training test): exact search in blocks of question rows sized to ``memory_mb``, the
    ReQA rank rules, and doc-level ranks when ``doc_of`` ([C] long, each candidate's document)
    is given. Returns ([Q] ranks, [Q] doc ranks or None), float64.

    ``gold[q]``: the candidate indices of question ``q`` (row ``q`` of the scorer).
    ``on_block(rows, ranks, doc_ranks, top)`` is called after each block with the block's
    ranks (doc ranks or None) and ``top``, a list of ``(candidate indices, scores)`` of the
    ``top_k`` best per row (``top_k=0``: empty list).
    ``non_finite(q, c, value)`` builds the error for a non-finite score (``c`` None: the sparse
    path's base score). ``sparse`` (default: when the scorer has ``score_sparse``) ranks from
    :class:`~.sparse.SparseScores` blocks with the same rules and numbers. When fewer than
    ``min_block_rows`` rows of every candidate fit ``memory_mb`` and the scorer has
    ``score_columns``, blocks of ``min_block_rows`` rows are scored in column chunks
    (:mod:`.large_pool`), with the same ranks and top-k. The top-k of a row is in descending
    score, ties by ascending candidate index.

    Args:
        scorer: a :class:`~.search.Scorer` (``score(rows) -> [len(rows), C]``).
        gold: ``gold[q]``, the candidate indices that count as correct for question ``q``.
        doc_of: ``[C]`` long, each candidate's document; None: no document ranks.
        memory_mb: the budget of one block of scores, in MiB.
        top_k: how many best candidates per row ``on_block`` gets (0: none).
        sparse: rank from sparse score blocks; None: when the scorer has ``score_sparse``.
        on_block: called after each block (see above); None: nothing.
        non_finite: builds the error for a non-finite score; None: a plain ValueError.
        progress: show a progress bar.
        desc: the progress bar's label.
        min_block_rows: below this many rows per block, column chunks (1: only when one row
            of scores exceeds ``memory_mb``; ``min_block_rows`` of conf/search.yaml).

    Example:

        >>> import torch
        >>> from retrieval_qa.evaluation.search import DenseScorer
        >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> c = torch.tensor([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
        >>> ranks, doc_ranks = rank_questions(DenseScorer(q, c), [[0], [1]], memory_mb=1)
        >>> ranks.tolist(), doc_ranks
        ([1.0, 2.0], None)
    """
    n_q, n_c = scorer.num_questions, scorer.num_candidates
    if len(gold) != n_q:
        raise ValueError(f"{len(gold)} gold lists for {n_q} questions")
    non_finite = non_finite or (lambda q, c, v: ValueError(
        f"non-finite score {v} for question {q} at candidate {c}; ranks need finite scores: "
        "check the model's embeddings or the scorer for NaN/inf"))
    if sparse is None:
        sparse = hasattr(scorer, "score_sparse")
    doc_level = doc_of is not None
    if doc_level:
        n_docs = int(doc_of.max()) + 1 if len(doc_of) else 0
        doc_gold = [sorted({int(doc_of[c]) for c in g}) for g in gold]
        doc_of_np = doc_of.numpy()
        doc_sizes = np.bincount(doc_of_np, minlength=n_docs)
    step = rows_per_block(n_c, memory_mb, SPARSE_BYTES_PER_CELL if sparse else 16)
    chunked = not sparse and hasattr(scorer, "score_columns") and n_q > 0 \
        and fitting_rows(n_c, memory_mb) < min(min_block_rows, n_q)
    if chunked:  # a pool too large for enough rows of every candidate: column chunks too
        step = min(max(1, min_block_rows), n_q)
        width = columns_per_chunk(step, memory_mb, 16, step * n_docs * 5 if doc_level else 0)
    ranks = torch.empty(n_q, dtype=torch.float64)
    doc_ranks = torch.empty(n_q, dtype=torch.float64) if doc_level else None
    k = min(top_k, n_c)
    with tqdm(total=n_q, desc=desc, unit="q", disable=not progress, leave=False) as bar:
        for lo in range(0, n_q, step):
            rows = range(lo, min(lo + step, n_q))
            top = []
            if sparse:
                block = scorer.score_sparse(rows)
                block.values = block.values.astype(np.float32, copy=False)
                block.base = block.base.astype(np.float32, copy=False)
                if (bad := block.first_non_finite()) is not None:
                    raise non_finite(lo + bad[0], bad[1], bad[2])
                row_of = block.row_of()
                best = sparse_rules.best_gold_scores(block, gold[lo:rows.stop])
                ranks[lo:rows.stop] = torch.from_numpy(
                    sparse_rules.gold_ranks(block, best, row_of))
                if doc_level:
                    doc_ranks[lo:rows.stop] = torch.from_numpy(sparse_rules.doc_ranks(
                        block, best, row_of, doc_of_np, doc_sizes, doc_gold[lo:rows.stop]))
                if k:
                    top = sparse_rules.top_k(block, k)
            elif chunked:
                r, d, top = rank_block_in_chunks(
                    scorer, rows, gold[lo:rows.stop], width, k=k,
                    doc_of=doc_of if doc_level else None,
                    doc_gold=doc_gold[lo:rows.stop] if doc_level else None,
                    n_docs=n_docs if doc_level else 0, non_finite=non_finite)
                ranks[lo:rows.stop] = r
                if doc_level:
                    doc_ranks[lo:rows.stop] = d
            else:
                scores = scorer.score(rows).float()
                bad = ~torch.isfinite(scores)
                if bool(bad.any()):
                    r, c = (int(x) for x in bad.nonzero()[0])
                    raise non_finite(lo + r, c, float(scores[r, c]))
                ranks[lo:rows.stop] = gold_ranks(
                    scores, gold_mask(gold, rows, n_c).to(scores.device)).cpu()
                if doc_level:
                    doc_scores = torch.full((len(rows), n_docs), float("-inf"),
                                            device=scores.device)
                    doc_scores.scatter_reduce_(1, doc_of.to(scores.device).expand(len(rows), -1),
                                               scores, "amax")
                    doc_ranks[lo:rows.stop] = gold_ranks(
                        doc_scores, gold_mask(doc_gold, rows, n_docs).to(scores.device)).cpu()
                if k:
                    values, indices = stable_top_k(scores, k)
                    top = list(zip(indices.cpu().numpy(), values.cpu().numpy(), strict=True))
            if on_block is not None:
                on_block(rows, ranks[lo:rows.stop],
                         doc_ranks[lo:rows.stop] if doc_level else None, top)
            bar.update(len(rows))
    return ranks, doc_ranks


EVAL_KEYS = ("top_k", "memory_mb", "ks", "doc_level")


def evaluator_settings(evaluation) -> dict:
    """The keyword arguments of :func:`evaluate` in the ``eval`` group (``cfg.eval``, or
    conf/eval/default.yaml: their one source), checked; the group's other keys
    (``encode_batch_size``, ``rqa evaluate``'s) are left out.

    Args:
        evaluation: the ``eval`` group (a config node or a mapping).
    """
    from ..registry import config_values

    given = config_values(evaluation)
    missing = [k for k in EVAL_KEYS if k not in given]
    if missing:
        raise KeyError(f"eval settings lack {missing}: pass the composed config's eval group "
                       f"(cfg.eval, from conf/eval/default.yaml); got {sorted(given)}")
    return {k: given[k] for k in EVAL_KEYS}


def search_settings(search: Mapping | None = None) -> dict:
    """The search settings (``search``, or conf/search.yaml, their one source), checked.

    Args:
        search: the search settings; None: conf/search.yaml.
    """
    from ..config import search_settings as configured
    from ..registry import config_values
    from .approximate import check_search_settings

    return check_search_settings(config_values(search if search is not None else configured()))


def evaluate(pool: RetrievalPool, scorer: Scorer, *, top_k: int, memory_mb: float, ks,
             doc_level: bool, run_file: str | Path | None = None,
             progress: bool = True, desc: str = "evaluate",
             sparse: bool | None = None,
             per_question: str | Path | None = None,
             search: Mapping | None = None) -> EvaluationResult:
    """Rank every candidate for every question of ``pool`` with ``scorer``
    (:func:`rank_questions`), compute the metrics and optionally write a run file.

    Memory is bounded by ``memory_mb`` whatever the pool size: questions are scored in blocks
    of rows, and for each block only the gold ranks and the top-k survive; run-file records
    are written block by block. A non-finite score is an error naming the question.
    ``per_question``: write the compact per-question record there
    (:mod:`.per_question`); default: beside ``run_file`` when one is given.
    ``top_k``, ``memory_mb``, ``ks`` and ``doc_level`` are the ``eval`` group's settings
    (conf/eval/default.yaml, their one source).

    Args:
        pool: the :class:`~retrieval_qa.data.RetrievalPool` (questions, candidates, gold).
        scorer: a :class:`~.search.Scorer` over the pool's questions and candidates, in
            their order.
        top_k: the candidates each run-file record lists.
        memory_mb: the budget of one block of scores, in MiB.
        ks: the cut-offs of R@k / P@k.
        doc_level: also rank documents (``doc_*`` metrics).
        run_file: where to write the run file (JSON lines); None: none.
        progress: show a progress bar.
        desc: the progress bar's label.
        sparse: see :func:`rank_questions`.
        per_question: where to write the per-question record; None: beside ``run_file``
            (or nowhere without one).
        search: the search settings (conf/search.yaml, their one source; None: that file):
            ``min_block_rows`` (column chunks for large pools, :mod:`.large_pool`) and
            ``index`` (``exact``, or an approximate FAISS index: :mod:`.approximate`, whose
            docstring says what the metrics mean then).

    Example:

        >>> import torch
        >>> from retrieval_qa.evaluation.search import DenseScorer
        >>> from retrieval_qa.data import Candidate, RetrievalPool
        >>> pool = RetrievalPool("toy", "dev", [Candidate(f"c{i}", f"s{i}", "", f"d{i // 2}")
        ...                                     for i in range(4)],
        ...                      questions=["q0", "q1"], gold=[[0], [2]])
        >>> questions = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> candidates = torch.tensor([[1.0, 0.0], [0.0, 3.0], [0.0, 2.0], [0.0, 1.0]])
        >>> scorer = DenseScorer(questions, candidates)  # q1 scores c1 above its gold c2
        >>> result = evaluate(pool, scorer, top_k=2, memory_mb=1, ks=(1,), doc_level=True,
        ...                   progress=False)
        >>> result.ranks.tolist(), result.metrics["mrr"], result.metrics["r@1"]
        ([1.0, 2.0], 75.0, 50.0)
        >>> result.doc_ranks.tolist()  # documents d0 = {c0, c1}, d1 = {c2, c3}
        [1.0, 2.0]
    """
    start = time.perf_counter()
    n_q, n_c = len(pool.questions), len(pool.candidates)
    if scorer.num_questions != n_q or scorer.num_candidates != n_c:
        raise ValueError(f"scorer covers {scorer.num_questions} x {scorer.num_candidates}, pool "
                         f"has {n_q} questions x {n_c} candidates")
    empty = [_question_name(pool, i) for i, g in enumerate(pool.gold) if not g]
    if empty:
        raise ValueError(f"{len(empty)} questions have no gold candidate, e.g. {empty[0]}")
    doc_of = doc_index(pool)[0] if doc_level else None
    search = search_settings(search)
    if search["index"] != "exact":
        from .approximate import approximate_scorer

        list_size = max(int(search["list_size"]), top_k)
        scorer = approximate_scorer(scorer, search, list_size)
        search["list_size"] = list_size
    written = str(run_file) if run_file is not None else None
    cand_ids = [c.id for c in pool.candidates]
    with RunFileWriter(run_file) as out:
        ranks, doc_ranks = rank_questions(
            scorer, pool.gold, doc_of, memory_mb=memory_mb, top_k=top_k if out else 0,
            sparse=sparse, progress=progress, desc=desc,
            min_block_rows=search["min_block_rows"],
            non_finite=lambda q, c, v: _non_finite_error(pool, q, c, v),
            on_block=(lambda rows, r, d, top: out.write(
                _records(pool, cand_ids, rows, r, d, top))) if out else None)
    metrics = metrics_from_ranks(ranks, ks)
    if doc_ranks is not None:
        metrics.update(metrics_from_ranks(doc_ranks, ks, prefix="doc_"))
    if per_question is None and run_file is not None:
        per_question = beside_run_file(run_file)
    if per_question is not None:
        write_per_question(per_question, pool, ranks, doc_ranks, ks)
    approximate = {"search": {k: search[k] for k in ("index", "list_size")} | {
        "not_returned": "a gold candidate the index did not return ranks n + (C - n + 1) / 2 "
                        "(retrieval_qa/evaluation/approximate.py)"}} \
        if search["index"] != "exact" else {}
    return EvaluationResult(metrics, ranks, doc_ranks, n_q, n_c, time.perf_counter() - start,
                            written, extra=approximate, question_unit=pool.question_unit,
                            per_question=None if per_question is None else str(per_question))


def _records(pool: RetrievalPool, cand_ids: list[str], rows: range, ranks: torch.Tensor,
             doc_ranks: torch.Tensor | None, top: list) -> list[dict]:
    """One block's run-file records (``ranks``: the block's): each names its unit
    (``question_unit``) and, when the unit is the MRQA qid, the ``question_id``, and counts
    the pool's questions and candidates (what the reader checks the count of records and
    the ranks against)."""
    out = []
    block_ranks = ranks.tolist()
    block_docs = doc_ranks.tolist() if doc_ranks is not None else None
    for r, ((ids, scores), q) in enumerate(zip(top, rows, strict=True)):
        rec = {"question": pool.questions[q], "question_unit": pool.question_unit,
               COUNT_KEY: len(pool.questions), CANDIDATES_KEY: len(cand_ids)}
        if pool.question_ids:
            rec["question_id"] = pool.question_ids[q]
        rec.update({"gold_rank": block_ranks[r],
                    "gold_ids": [cand_ids[c] for c in pool.gold[q]],
                    "top_ids": [cand_ids[c] for c in ids.tolist()],
                    "top_scores": [round(s, 6) for s in scores.tolist()]})
        if block_docs is not None:
            rec["doc_rank"] = block_docs[r]
        out.append(rec)
    return out
