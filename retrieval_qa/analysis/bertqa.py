"""ENDX Table 6: a concatenated-input cross-attention classifier ("BERTQA") against dual
encoders on a small sample, with the time to retrieve for one question.

BERTQA: ``[CLS] question [SEP] sentence [SEP]`` through a pretrained encoder
(:func:`retrieval_qa.pretrained.resolve_pretrained`; offline the packaged MiniLM), a linear
head on the [CLS] state, trained as a binary classifier with binary cross-entropy: each batch
is half gold (question, answer sentence) pairs of the training pool and half negatives, each
negative drawn with equal chance from another sentence of the gold sentence's paragraph or
from a random paragraph (never a gold sentence of the question).

Test sample (the paper: "500 QA pairs from 27 passages"): ``passages`` paragraphs of the
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
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

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

MODEL_KEYS = ("input_ids", "attention_mask", "token_type_ids")
class ConcatCrossClassifier(nn.Module):
    """A pretrained encoder over the concatenated pair and a linear head on [CLS]."""

    def __init__(self, encoder: nn.Module, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(int(encoder.config.hidden_size), 1)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        cls = self.encoder(**kwargs).last_hidden_state[:, 0]
        return self.head(self.dropout(cls)).squeeze(-1)


def encode_pairs(tokenizer, questions: Sequence[str], sentences: Sequence[str],
                 max_length: int) -> dict[str, torch.Tensor]:
    enc = tokenizer(list(questions), list(sentences), padding=True, truncation="longest_first",
                    max_length=max_length, return_tensors="pt")
    return {k: enc[k] for k in MODEL_KEYS if k in enc}


# ---- training ------------------------------------------------------------------------------
class PairSampler:
    """Balanced batches of gold pairs and negatives (same paragraph or random sentence)."""

    def __init__(self, pool: RetrievalPool, seed: int = 0) -> None:
        if not pool.pairs:
            raise ValueError(f"{pool.dataset}/{pool.pool} has no QA pairs to train on")
        self.pairs = pool.pairs
        self.rng = random.Random(seed)
        self.sentences = [c.text for c in pool.candidates]
        doc_of = {c.id: c.doc_id for c in pool.candidates}
        self.by_doc: dict[str, list[str]] = {}
        for c in pool.candidates:
            self.by_doc.setdefault(c.doc_id, []).append(c.text)
        self.pair_doc = [doc_of.get(p.answer_id) for p in pool.pairs]
        self.gold: dict[str, set[str]] = {}
        for p in pool.pairs:
            self.gold.setdefault(p.question, set()).add(p.answer)

    def negative(self, i: int) -> str:
        p, gold = self.pairs[i], self.gold[self.pairs[i].question]
        same = [s for s in self.by_doc.get(self.pair_doc[i], ()) if s not in gold]
        if same and self.rng.random() < 0.5:
            return self.rng.choice(same)
        for _ in range(100):
            s = self.rng.choice(self.sentences)
            if s not in gold:
                return s
        raise ValueError(f"no negative sentence for {p.question!r}")

    def batch(self, size: int) -> tuple[list[str], list[str], torch.Tensor]:
        half = max(size // 2, 1)
        idx = [self.rng.randrange(len(self.pairs)) for _ in range(half)]
        questions = [self.pairs[i].question for i in idx] * 2
        sentences = [self.pairs[i].answer for i in idx] + [self.negative(i) for i in idx]
        labels = torch.cat([torch.ones(half), torch.zeros(half)])
        return questions, sentences, labels


def train_bertqa(train_pool: RetrievalPool, *, pretrained: str = "minilm", steps: int = 300,
                 batch_size: int = 16, lr: float = 3e-5, max_length: int = 128, seed: int = 0,
                 fallback: str | None = "minilm", log_every: int = 50
                 ) -> tuple[ConcatCrossClassifier, object, dict]:
    """Fine-tune the classifier for ``steps`` steps of AdamW (linear decay, no warm-up)."""
    from ..pretrained import load_model, load_tokenizer, resolve_pretrained

    torch.manual_seed(seed)
    ckpt = resolve_pretrained(pretrained, fallback=fallback)
    tokenizer = load_tokenizer(ckpt)
    model = ConcatCrossClassifier(load_model(ckpt))
    model.train()
    sampler = PairSampler(train_pool, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / max(steps, 1)))
    loss_fn = nn.BCEWithLogitsLoss()
    start, losses = time.perf_counter(), []
    for step in range(steps):
        q, s, y = sampler.batch(batch_size)
        loss = loss_fn(model(**encode_pairs(tokenizer, q, s, max_length)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log_every and (step + 1) % log_every == 0:
            print(f"bertqa step {step + 1}/{steps} loss {statistics.fmean(losses[-log_every:]):.4f}",
                  file=sys.stderr, flush=True)
    model.eval()
    info = {"pretrained": ckpt.label, "pretrained_substituted": ckpt.substituted,
            "steps": steps, "batch_size": batch_size, "lr": lr, "max_length": max_length,
            "seed": seed, "train_pool": f"{train_pool.dataset}/{train_pool.pool}",
            "train_pairs_available": len(train_pool.pairs),
            "negatives": "1:1; each from the gold sentence's paragraph or a random paragraph "
                         "(equal chance), never a gold sentence",
            "first_loss": round(losses[0], 4) if losses else None,
            "last_loss": round(statistics.fmean(losses[-10:]), 4) if losses else None,
            "train_seconds": round(time.perf_counter() - start, 2)}
    return model, tokenizer, info


# ---- the test sample -----------------------------------------------------------------------
def sample_test_pool(pool: RetrievalPool, passages: int = 27, pairs: int = 500, seed: int = 0,
                     choice: str = "most_questions") -> RetrievalPool:
    """The Table 6 sample (see the module docstring); deterministic for a seed."""
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


def score_bertqa(model: ConcatCrossClassifier, tokenizer, pool: RetrievalPool, *,
                 max_length: int = 128, batch_size: int = 256) -> dict:
    texts = [c.text for c in pool.candidates]

    def one(question: str) -> torch.Tensor:
        parts = []
        for lo in range(0, len(texts), batch_size):
            chunk = texts[lo:lo + batch_size]
            enc = encode_pairs(tokenizer, [question] * len(chunk), chunk, max_length)
            parts.append(model(**enc).float())
        s = torch.cat(parts)
        torch.argsort(s, descending=True)
        return s

    rows, times = _time_per_question(one, pool.questions)
    return {**_result(pool, rows, times), "pairs_scored": len(rows) * len(texts)}


@torch.inference_mode()
def score_dual(model, pool: RetrievalPool, *, batch_size: int = 128) -> dict:
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
                    models: Sequence[tuple[str, str]], *, pretrained: str = "minilm",
                    steps: int = 300, batch_size: int = 16, lr: float = 3e-5,
                    max_length: int = 128, passages: int = 27, pairs: int = 500,
                    choice: str = "most_questions", seed: int = 0,
                    score_batch_size: int = 256, fallback: str | None = "minilm",
                    output_dir: str | Path = DEFAULT_OUTPUT_DIR) -> dict:
    """``models``: dual encoders ``(name, exported folder)`` (a repeated name = several runs).
    Trains BERTQA on ``train_pool``, samples the test set from ``pool``, scores and times."""
    start = time.perf_counter()
    out = Path(output_dir)
    sample = sample_test_pool(pool, passages, pairs, seed, choice)
    runs = []
    loaded = load_models(models)
    for name, folder in models:
        runs.append({"name": name, "model": folder, **score_dual(loaded[folder], sample)})
    clf, tok, train_info = train_bertqa(train_pool, pretrained=pretrained, steps=steps,
                                        batch_size=batch_size, lr=lr, max_length=max_length,
                                        seed=seed, fallback=fallback)
    runs.append({"name": "BERTQA", "model": train_info["pretrained"],
                 **score_bertqa(clf, tok, sample, max_length=max_length,
                                batch_size=score_batch_size)})
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
             f"those passages. BERTQA: {train_info['pretrained']}, {steps} steps of batch "
             f"{batch_size}. Cells: mean ± sample std over runs.", ""]
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
