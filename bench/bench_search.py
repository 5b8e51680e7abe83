"""Search benchmark on the ReQA SQuAD dev pool, printed as ratios against peers run side by side.

* BM25: our bm25s scorer (full score rows, the protocol's rank rules) against rank-bm25's
  BM25Okapi on the same sample of questions, same tokens: queries per second.
* Dense exact search: the blocked evaluator against a naive full-matrix search (one
  [Q, C] matrix, then the same rank rule), on random 384-d embeddings of the pool's size.
* Memory bound: the blocked evaluator on the train-pool size (about 87k x 91k), run in a
  subprocess to read its peak RSS; the naive matrix alone would need Q*C*4 bytes.

Usage: python -m bench.bench_search [--sample 300] [--skip-train-size]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bench.common import RESULTS, run_json, write_json
from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
from retrieval_qa.config import load_yaml
from retrieval_qa.data import load_pool
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation import DenseScorer, evaluate, gold_ranks
from retrieval_qa.evaluation.evaluator import evaluator_settings
from retrieval_qa.training.compose import load_group

EVAL = evaluator_settings(load_group("eval", "default"))  # the evaluator's settings (conf/eval)


def bench_bm25(pool: RetrievalPool, sample: int) -> dict:
    from rank_bm25 import BM25Okapi

    settings = BM25Settings.from_config(load_yaml("model/bm25.yaml"))
    t = time.perf_counter()
    ours = BM25Scorer(pool, settings)
    ours_index = time.perf_counter() - t
    docs = ours._tokenize([c.text for c in pool.candidates])
    t = time.perf_counter()
    peer = BM25Okapi(docs, k1=settings.k1, b=settings.b)
    peer_index = time.perf_counter() - t
    rows = range(min(sample, len(pool.questions)))
    t = time.perf_counter()
    ours.score(rows)
    ours_q = time.perf_counter() - t
    t = time.perf_counter()
    for q in rows:
        peer.get_scores(ours._queries[q])
    peer_q = time.perf_counter() - t
    return {"questions_sampled": len(rows), "ours_qps": len(rows) / ours_q,
            "rank_bm25_qps": len(rows) / peer_q, "qps_ratio": peer_q / ours_q,
            "ours_index_s": ours_index, "rank_bm25_index_s": peer_index}


def _random_pool(n_q: int, n_c: int, dim: int = 384) -> tuple[RetrievalPool, DenseScorer]:
    g = torch.Generator().manual_seed(0)
    cands = [Candidate(str(i), "", "", f"d{i // 5}") for i in range(n_c)]
    gold = torch.randint(0, n_c, (n_q,), generator=g).view(-1, 1).tolist()
    pool = RetrievalPool("random", "bench", cands, [str(i) for i in range(n_q)], gold)
    scorer = DenseScorer(torch.randn(n_q, dim, generator=g), torch.randn(n_c, dim, generator=g))
    return pool, scorer


def bench_dense(n_q: int, n_c: int) -> dict:
    pool, scorer = _random_pool(n_q, n_c)
    t = time.perf_counter()
    ours = evaluate(pool, scorer, **{**EVAL, "doc_level": False}, progress=False)
    ours_s = time.perf_counter() - t
    t = time.perf_counter()
    full = scorer.questions @ scorer.candidates.T
    mask = torch.zeros_like(full, dtype=torch.bool)
    mask[torch.arange(n_q), torch.tensor(pool.gold).view(-1)] = True
    naive = gold_ranks(full, mask)
    naive_s = time.perf_counter() - t
    assert torch.equal(naive, ours.ranks), "blocked and naive search disagree"
    return {"questions": n_q, "candidates": n_c, "ours_qps": n_q / ours_s,
            "naive_qps": n_q / naive_s, "qps_ratio": naive_s / ours_s,
            "naive_matrix_mb": n_q * n_c * 4 / 2**20}


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def train_size_child(n_q: int, n_c: int) -> None:
    """Peak resident memory added by the search itself: the peak counter is reset after the
    embeddings and the pool exist (Linux: writing 5 to /proc/self/clear_refs resets VmHWM)."""
    pool, scorer = _random_pool(n_q, n_c)
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_mb("VmRSS")
    t = time.perf_counter()
    evaluate(pool, scorer, **{**EVAL, "doc_level": False}, progress=False)
    print(json.dumps({"seconds": time.perf_counter() - t, "rss_before_search_mb": base,
                      "peak_rss_mb": _status_mb("VmHWM"),
                      "search_peak_extra_mb": _status_mb("VmHWM") - base}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--skip-train-size", action="store_true")
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        train_size_child(*args.child)
        return
    torch.set_num_threads(max(1, torch.get_num_threads()))
    pool, _ = load_pool("reqa_squad", "dev")
    out = {"threads": torch.get_num_threads(), "bm25": bench_bm25(pool, args.sample),
           "dense_dev": bench_dense(len(pool.questions), len(pool.candidates))}
    if not args.skip_train_size:
        n_q, n_c = 87_355, 91_000
        child = run_json(["-m", __spec__.name, "--child", str(n_q), str(n_c)])
        out["dense_train_size"] = {"questions": n_q, "candidates": n_c, **child,
                                   "memory_budget_mb": 512,
                                   "naive_matrix_mb": n_q * n_c * 4 / 2**20}
    write_json(out, RESULTS / "bench_search.json")
    b, d = out["bm25"], out["dense_dev"]
    print(f"BM25 (bm25s, full rows) vs rank-bm25, {b['questions_sampled']} questions: "
          f"{b['ours_qps']:.0f} vs {b['rank_bm25_qps']:.1f} q/s -> ratio {b['qps_ratio']:.1f}x")
    print(f"dense exact search, dev pool {d['questions']}x{d['candidates']}: blocked "
          f"{d['ours_qps']:.0f} q/s vs naive full matrix {d['naive_qps']:.0f} q/s -> "
          f"ratio {d['qps_ratio']:.2f}x (naive holds {d['naive_matrix_mb']:.0f} MB)")
    if "dense_train_size" in out:
        t = out["dense_train_size"]
        print(f"train-pool size {t['questions']}x{t['candidates']}: {t['seconds']:.0f} s; the "
              f"search added {t['search_peak_extra_mb']:.0f} MB at peak (score budget 512 MB); "
              f"the naive matrix alone would need {t['naive_matrix_mb'] / 1024:.1f} GB")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
