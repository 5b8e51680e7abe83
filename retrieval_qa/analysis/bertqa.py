"""ENDX Table 6: a concatenated-input cross-attention classifier ("BERTQA") against dual
encoders on a small sample, with the time to retrieve for one question.

BERTQA: :class:`retrieval_qa.classifiers.pair_classifier.CrossAttentionClassifier`,
``[CLS] question [SEP] sentence [SEP]`` through a pretrained encoder
(:func:`retrieval_qa.pretrained.resolve_pretrained`; offline the packaged MiniLM), a linear
head on the [CLS] state, trained by a ``pl.Trainer``
(:func:`retrieval_qa.classifiers.train_classifier.train_cross_classifier`) as a binary classifier
with binary cross-entropy: each batch is half gold (question, answer sentence) pairs of the
training pool and half negatives, each negative drawn with equal chance from another sentence
of the gold sentence's paragraph or from a random paragraph (never a gold sentence of the
question; :mod:`retrieval_qa.classifiers.pair_data`). Its settings (encoder, steps, batch
size, learning rate, lengths) are those of ``conf/model/cross_classifier.yaml``; the command's
flags override them.

Test sample (the paper: "500 QA pairs from 27 passages", the default, ``sample`` of
``conf/tables/endx_table6.yaml``): ``passages`` paragraphs of the
evaluation pool (``most_questions``: those with the most QA pairs, ties broken by a seeded
shuffle; ``random``: a seeded sample), ``pairs`` QA pairs drawn (seeded) from their QA pairs,
and every sentence of those paragraphs as the candidates. Questions are the distinct question
strings of the drawn pairs; their gold are the pool's gold candidates among those sentences.

Timing (``ms_per_question``, the table's number), wall clock with ``time.perf_counter`` under
``torch.inference_mode`` on the machine running it, one question at a time, after one untimed
warm-up question per model:

* BERTQA: tokenising the question with every candidate, the classifier's forward passes over
  all candidates (batches of ``score_batch_size`` pairs) and sorting the scores;
* dual encoders: tokenising and encoding the question alone (batch of 1), its inner products
  with the candidate matrix and sorting, plus the one-off encoding of all candidates divided
  by the number of questions (amortised; also reported separately).

Loading the models and the data is not timed. Writes ``table6.{md,json}``.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..classifiers.pair_classifier import CrossAttentionClassifier
from ..classifiers.train_classifier import train_cross_classifier
from ..config import table_layout
from ..data.types import RetrievalPool
from ..evaluation import metrics_from_ranks
from ..evaluation.ranking import gold_ranks
from .common import (
    DEFAULT_OUTPUT_DIR,
    METRIC_LABELS,
    METRICS,
    cell,
    group_by_name,
    load_models,
    markdown_table,
    paper_table,
    spread,
    write_json,
    write_markdown,
)


def train_bertqa(train_pool: RetrievalPool, classifier: Mapping[str, Any] | None = None, *,
                 seed: int = 0, log_every: int = 50, run_dir: str | Path | None = None
                 ) -> tuple[CrossAttentionClassifier, dict]:
    """Fine-tune BERTQA on ``train_pool`` with the settings of conf/model/cross_classifier.yaml
    and ``classifier`` over them; ``(model in eval mode, training info)``.

    Args:
        train_pool: the training pool.
        classifier: settings over conf/model/cross_classifier.yaml; None: none.
        seed: seeds the head, dropout and the pair sampler.
        log_every: the steps between the losses printed to stderr (0: never).
        run_dir: where the training keeps its checkpoints (resumable); None: nothing kept.
    """
    return train_cross_classifier(train_pool, classifier, seed=seed, log_every=log_every,
                                  label="bertqa", run_dir=run_dir)


# ---- the test sample -----------------------------------------------------------------------
def sample_test_pool(pool: RetrievalPool, passages: int, pairs: int, seed: int = 0,
                     choice: str = "most_questions") -> RetrievalPool:
    """The Table 6 sample (see the module docstring); deterministic for a seed.

    Args:
        pool: the evaluation pool.
        passages: the paragraphs sampled.
        pairs: the most QA pairs drawn from those paragraphs' pairs.
        seed: the seed of the shuffle and the draw.
        choice: ``most_questions`` (the paragraphs with the most QA pairs) or ``random``.
    """
    rng = random.Random(seed)
    doc_of = {c.id: c.doc_id for c in pool.candidates}
    per_doc: dict[str, list[int]] = {}
    for i, p in enumerate(pool.pairs):
        per_doc.setdefault(doc_of[p.answer_id], []).append(i)
    docs = sorted(per_doc)
    rng.shuffle(docs)
    if choice == "most_questions":
        docs.sort(key=lambda d: -len(per_doc[d]))  # stable: the shuffle breaks ties
    elif choice != "random":
        raise ValueError(f"choice={choice!r}; expected most_questions or random")
    chosen = set(docs[:passages])
    pair_idx = sorted(i for d in chosen for i in per_doc[d])
    if len(pair_idx) > pairs:
        pair_idx = sorted(rng.sample(pair_idx, pairs))
    keep = [i for i, c in enumerate(pool.candidates) if c.doc_id in chosen]
    new_index = {old: new for new, old in enumerate(keep)}
    qpos = {q: i for i, q in enumerate(pool.question_keys)}
    sampled = [pool.pairs[i] for i in pair_idx]
    keys = list(dict.fromkeys(pool.pair_key(p) for p in sampled))
    gold = [[new_index[c] for c in pool.gold[qpos[q]] if c in new_index] for q in keys]
    return RetrievalPool(pool.dataset, f"{pool.pool}[{len(chosen)} passages, {len(sampled)} "
                         f"QA pairs, seed {seed}, {choice}]", [pool.candidates[i] for i in keep],
                         [pool.questions[qpos[q]] for q in keys], gold, sampled, pool.source,
                         pool.question_unit, keys if pool.question_ids else [])


# ---- scoring with timings -----------------------------------------------------------------
def _gold_mask(pool: RetrievalPool) -> torch.Tensor:
    mask = torch.zeros(len(pool.questions), len(pool.candidates), dtype=torch.bool)
    for i, g in enumerate(pool.gold):
        mask[i, g] = True
    return mask


def _result(pool: RetrievalPool, scores: torch.Tensor, per_question: list[float],
            amortised_s: float = 0.0) -> dict:
    ranks = gold_ranks(scores, _gold_mask(pool))
    m = metrics_from_ranks(ranks, ks=(1, 5))
    per_q_ms = [1000 * t for t in per_question]
    return {**{k: round(m[k], 4) for k in METRICS},
            "ms_per_question": round(statistics.fmean(per_q_ms) + 1000 * amortised_s
                                     / len(pool.questions), 4),
            "question_ms_mean": round(statistics.fmean(per_q_ms), 4),
            "question_ms_median": round(statistics.median(per_q_ms), 4),
            "candidate_encoding_ms_total": round(1000 * amortised_s, 4),
            "candidate_encoding_ms_per_question": round(1000 * amortised_s
                                                        / len(pool.questions), 4),
            "total_seconds": round(sum(per_question) + amortised_s, 4)}


@torch.inference_mode()
def _time_per_question(one, questions: list[str]) -> tuple[torch.Tensor, list[float]]:
    """Score each question alone with ``one`` after an untimed warm-up; (scores, seconds)."""
    one(questions[0])
    rows, times = [], []
    for q in questions:
        t0 = time.perf_counter()
        rows.append(one(q))
        times.append(time.perf_counter() - t0)
    return torch.stack(rows), times


def score_bertqa(model: CrossAttentionClassifier, pool: RetrievalPool, *,
                 batch_size: int | None = None) -> dict:
    """Score every candidate for each question, one question at a time, timed.

    Args:
        model: the trained BERTQA classifier.
        pool: the test sample (:func:`sample_test_pool`).
        batch_size: pairs per forward pass; None: the model's ``score_batch_size``.

    Returns:
        The metrics, the timings (``ms_per_question``, ...) and ``pairs_scored``.
    """
    texts = [c.text for c in pool.candidates]

    def one(question: str) -> torch.Tensor:
        s = model.score(question, texts, batch_size)
        torch.argsort(s, descending=True)
        return s

    rows, times = _time_per_question(one, pool.questions)
    return {**_result(pool, rows, times), "pairs_scored": len(rows) * len(texts)}


@torch.inference_mode()
def score_dual(model, pool: RetrievalPool, *, batch_size: int = 128) -> dict:
    """Encode every candidate once, then score each question alone, timed (see the module
    docstring; the candidates' encoding is amortised over the questions).

    Args:
        model: a loaded dual-encoder export (``encode_questions`` / ``encode_answers``).
        pool: the test sample (:func:`sample_test_pool`).
        batch_size: candidates per encoding batch.
    """
    model.encode_answers(pool.candidates[:batch_size], batch_size=batch_size, progress=False)
    t0 = time.perf_counter()
    cands = model.encode_answers(pool.candidates, batch_size=batch_size, progress=False)
    encode_s = time.perf_counter() - t0

    def one(question: str) -> torch.Tensor:
        s = (model.encode_questions([question], batch_size=1, progress=False) @ cands.T)[0]
        torch.argsort(s, descending=True)
        return s

    rows, times = _time_per_question(one, pool.questions)
    return _result(pool, rows, times, encode_s)


TIMED = ("wall time per question (time.perf_counter, torch.inference_mode, one question at a "
         "time, after one untimed warm-up). BERTQA: tokenising the question with every "
         "candidate + classifier forward passes over all candidates + sorting. Dual "
         "encoders: tokenising + encoding the question (batch of 1) + inner products with "
         "the candidate matrix + sorting, plus the one-off encoding of all candidates "
         "divided by the number of questions. Model and data loading not timed.")


def bertqa_analysis(pool: RetrievalPool, train_pool: RetrievalPool,
                    models: Sequence[tuple[str, str]], *,
                    classifier: Mapping[str, Any] | None = None, passages: int | None = None,
                    pairs: int | None = None, choice: str = "most_questions", seed: int = 0,
                    output_dir: str | Path = DEFAULT_OUTPUT_DIR) -> dict:
    """Trains BERTQA on ``train_pool``, samples the test set from ``pool``, scores and times
    BERTQA and the dual encoders on it; writes ``table6.{md,json}``.

    Args:
        pool: the evaluation pool the sample is drawn from.
        train_pool: BERTQA's training pool.
        models: dual encoders ``(name, exported folder)`` (a repeated name = several runs).
        classifier: BERTQA's settings over conf/model/cross_classifier.yaml; None: none.
        passages: the sample's paragraphs; None: the paper's (conf/tables/endx_table6.yaml).
        pairs: the sample's QA pairs; None: the paper's.
        choice: ``most_questions`` or ``random`` (:func:`sample_test_pool`).
        seed: the sample's and BERTQA's seed.
        output_dir: where the table and BERTQA's checkpoints (``bertqa/``) are written.
    """
    start = time.perf_counter()
    out = Path(output_dir)
    paper_sample = table_layout("endx_table6").sample
    passages = int(paper_sample.passages if passages is None else passages)
    pairs = int(paper_sample.qa_pairs if pairs is None else pairs)
    sample = sample_test_pool(pool, passages, pairs, seed, choice)
    runs = []
    loaded = load_models(models)
    for name, folder in models:
        runs.append({"name": name, "model": folder, **score_dual(loaded[folder], sample)})
    clf, train_info = train_bertqa(train_pool, classifier, seed=seed, run_dir=out / "bertqa")
    runs.append({"name": "BERTQA", "model": train_info["pretrained"],
                 **score_bertqa(clf, sample)})
    fields = (*METRICS, "ms_per_question", "question_ms_mean", "candidate_encoding_ms_per_question")
    rows = [{"model": name, "runs": len(g), **{f: spread([r[f] for r in g]) for f in fields}}
            for name, g in group_by_name((r["name"], r) for r in runs).items()]
    sample_info = {"pool": f"{pool.dataset}/{pool.pool}", "passages": len(
        {c.doc_id for c in sample.candidates}), "qa_pairs": len(sample.pairs),
        "questions": len(sample.questions), "candidates": len(sample.candidates),
        "choice": choice, "seed": seed}
    device = {"device": "cpu", "torch_threads": torch.get_num_threads()}
    paper6 = paper_table("endx_table6")
    files = [write_json(out / "table6.json", {"rows": rows, "runs": runs, "sample": sample_info,
                                              "bertqa_training": train_info, "timed": TIMED,
                                              "hardware": device, "paper": paper6})]
    lines = ["# Table 6: BERTQA (concatenated cross-attention classifier) vs dual encoders", "",
             f"Sample of {pool.dataset}/{pool.pool}: {sample_info['qa_pairs']} QA pairs "
             f"({sample_info['questions']} questions) from {sample_info['passages']} passages "
             f"({choice}, seed {seed}); candidates: all {sample_info['candidates']} sentences of "
             f"those passages. BERTQA: {train_info['pretrained']}, {train_info['steps']} steps of "
             f"batch {train_info['batch_size']}. Cells: mean ± sample std over runs.", ""]
    lines += markdown_table(["method", *(METRIC_LABELS[m] for m in METRICS), "average ms",
                             "runs"],
                            ([r["model"], *(cell(r[m]) for m in METRICS),
                              cell(r["ms_per_question"]), r["runs"]] for r in rows))
    lines += ["", f"Timed: {TIMED} Hardware: CPU, {device['torch_threads']} torch threads.",
              "", "Paper (one V100): " + "; ".join(
                  f"{n} {v['mrr']:.2f} / {v['r@1']:.2f} / {v['r@5']:.2f}, {v['ms']:.2f} ms"
                  for n, v in paper6.items())]
    files.append(write_markdown(out / "table6.md", lines))
    return {"analysis": "bertqa", "sample": sample_info,
            "rows": {r["model"]: {**{m: r[m]["mean"] for m in METRICS},
                                  "ms_per_question": r["ms_per_question"]["mean"]} for r in rows},
            "files": files, "seconds": round(time.perf_counter() - start, 3)}
