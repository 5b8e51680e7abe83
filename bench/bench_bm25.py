"""BM25 evaluation: the sparse path against the full-row path and against bm25s's own top-k
retrieval, side by side.

* dev pool (ReQA SQuAD): the full-row path (``evaluate(..., sparse=False)``: bm25s
  ``get_scores`` rows, dense rank rules) and the sparse path (``BM25Scorer.score_sparse``,
  :class:`SparseRanker`) must give equal ranks, document ranks and metrics, bit for bit, and
  run files with the same top-100 scores and the same ids up to the order of tied scores;
* train pool: the sparse path's time (metrics only, and with a run file) against
  ``bm25s.BM25.retrieve(queries, k=100)`` over the same token lists, single-threaded, with
  bm25s's numpy backend and, when numba imports, its numba backend; the full-row path on the
  train pool only with ``--old-train`` (it takes minutes).

Every timing runs on one thread (``torch.set_num_threads(1)``, bm25s ``n_threads=1``).
numba is not a project dependency: without it the numba column stays empty.
Usage: python -m bench.bench_bm25 [--old-train] [--numpy-train] [--skip-train]
[--out results/bench_bm25]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import RESULTS, write_json
from retrieval_qa.baselines.bm25 import BM25Scorer, BM25Settings
from retrieval_qa.config import load_yaml
from retrieval_qa.data import load_pool
from retrieval_qa.evaluation import evaluate, read_run_file
from retrieval_qa.evaluation.evaluator import evaluator_settings
from retrieval_qa.training.compose import load_group

EVAL = evaluator_settings(load_group("eval", "default"))  # the evaluator's settings (conf/eval)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def same_up_to_ties(a: dict, b: dict) -> bool:
    """Two run-file records list the same top scores, and the same ids for every score above
    the last one (ids at the cut-off score may be any of the tied candidates)."""
    if a["top_scores"] != b["top_scores"]:
        return False
    last = a["top_scores"][-1] if a["top_scores"] else None
    pick = lambda r: sorted((s, i) for s, i in zip(r["top_scores"], r["top_ids"],  # noqa: E731
                                                   strict=True) if s != last)
    return pick(a) == pick(b)


def bm25s_retrieve(scorer: BM25Scorer, backend: str) -> float | None:
    """Seconds for bm25s's own retrieval of every query's top 100, or None when the backend
    is not installed. numba: the second call (the first compiles; its time is kept apart)."""
    if backend == "numba":
        try:
            import numba  # noqa: F401
        except ImportError:
            return None
    queries = [[t for t in q if t in scorer.index.vocab_dict] for q in scorer._queries]
    run = lambda: scorer.index.retrieve(  # noqa: E731
        queries, k=100, show_progress=False, n_threads=1, backend_selection=backend)
    _, seconds = _timed(run)
    if backend == "numba":
        COLD[id(scorer)] = seconds
        _, seconds = _timed(run)
    return seconds


COLD: dict[int, float] = {}


def bench_dev(settings: BM25Settings) -> dict:
    pool, _ = load_pool("reqa_squad", "dev")
    scorer, index_s = _timed(lambda: BM25Scorer(pool, settings))
    with tempfile.TemporaryDirectory() as tmp:
        old, old_s = _timed(lambda: evaluate(pool, scorer, **EVAL, sparse=False, progress=False,
                                             run_file=f"{tmp}/old.jsonl"))
        new, new_s = _timed(lambda: evaluate(pool, scorer, **EVAL, sparse=True, progress=False,
                                             run_file=f"{tmp}/new.jsonl"))
        a, b = read_run_file(f"{tmp}/old.jsonl"), read_run_file(f"{tmp}/new.jsonl")
    _, new_metrics_s = _timed(lambda: evaluate(pool, scorer, **EVAL, sparse=True, progress=False))
    _, old_metrics_s = _timed(lambda: evaluate(pool, scorer, **EVAL, sparse=False, progress=False))
    equal = {"ranks": torch.equal(old.ranks, new.ranks),
             "doc_ranks": torch.equal(old.doc_ranks, new.doc_ranks),
             "metrics": old.metrics == new.metrics,
             "run_file_records": len(a) == len(b) and all(
                 x["gold_rank"] == y["gold_rank"] and x["doc_rank"] == y["doc_rank"]
                 and x["gold_ids"] == y["gold_ids"] for x, y in zip(a, b, strict=True)),
             "run_file_top_scores": all(x["top_scores"] == y["top_scores"]
                                        for x, y in zip(a, b, strict=True)),
             "run_file_top_ids_up_to_ties": all(same_up_to_ties(x, y)
                                                for x, y in zip(a, b, strict=True)),
             "run_file_top_ids_in_same_order": sum(x["top_ids"] == y["top_ids"]
                                                   for x, y in zip(a, b, strict=True))}
    return {"questions": len(pool.questions), "candidates": len(pool.candidates),
            "index_s": round(index_s, 3), "equal": equal,
            "metrics": {k: round(v, 4) for k, v in new.metrics.items()},
            "seconds": {"full_rows_metrics": round(old_metrics_s, 3),
                        "full_rows_with_run_file": round(old_s, 3),
                        "sparse_metrics": round(new_metrics_s, 3),
                        "sparse_with_run_file": round(new_s, 3),
                        "bm25s_retrieve_k100_numpy": _round(bm25s_retrieve(scorer, "numpy")),
                        "bm25s_retrieve_k100_numba": _round(bm25s_retrieve(scorer, "numba")),
                        "bm25s_retrieve_k100_numba_first_call": _round(COLD.get(id(scorer)))}}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def bench_train(settings: BM25Settings, old_train: bool, numpy_train: bool) -> dict:
    pool, _ = load_pool("reqa_squad", "train")
    scorer, index_s = _timed(lambda: BM25Scorer(pool, settings))
    scorer._ids()  # token ids once, outside the timings (bm25s converts its tokens inside)
    new, new_s = _timed(lambda: evaluate(pool, scorer, **EVAL, progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        _, new_run_s = _timed(lambda: evaluate(pool, scorer, **EVAL, progress=False,
                                               run_file=f"{tmp}/run.jsonl"))
    out = {"questions": len(pool.questions), "candidates": len(pool.candidates),
           "index_s": round(index_s, 3),
           "metrics": {k: round(v, 4) for k, v in new.metrics.items()},
           "seconds": {"sparse_metrics": round(new_s, 3),
                       "sparse_with_run_file": round(new_run_s, 3),
                       "bm25s_retrieve_k100_numba": _round(bm25s_retrieve(scorer, "numba")),
                       "bm25s_retrieve_k100_numba_first_call": _round(COLD.get(id(scorer))),
                       "bm25s_retrieve_k100_numpy": _round(bm25s_retrieve(scorer, "numpy"))
                       if numpy_train else None}}
    if old_train:
        old, old_s = _timed(lambda: evaluate(pool, scorer, **EVAL, sparse=False, progress=False))
        out["seconds"]["full_rows_metrics"] = round(old_s, 3)
        out["equal_to_full_rows"] = {"ranks": torch.equal(old.ranks, new.ranks),
                                     "doc_ranks": torch.equal(old.doc_ranks, new.doc_ranks),
                                     "metrics": old.metrics == new.metrics}
    return out


def markdown(out: dict) -> str:
    d, lines = out["dev"], []
    lines += ["# BM25 evaluation: sparse path vs full rows vs bm25s retrieval", "",
              f"One thread; {out['machine']}; bm25s {out['bm25s']}, numpy {out['numpy']}, "
              f"numba {out['numba'] or 'not installed'} (not a project dependency). Produced "
              "by `python -m bench.bench_bm25 --old-train` (numba importable for its column); "
              "one run on a 2-core machine shared with other jobs, so timings vary from run "
              "to run.", "",
              "| pool | questions x candidates | full rows (old) | sparse (new) | "
              "sparse + run file | bm25s retrieve k=100, numba | bm25s retrieve k=100, numpy |",
              "|---|---|---|---|---|---|---|"]
    fmt = lambda x: "-" if x is None else f"{x:.1f} s"  # noqa: E731
    for name in ("dev", "train"):
        if name not in out:
            continue
        p, s = out[name], out[name]["seconds"]
        lines.append(f"| {name} | {p['questions']:,} x {p['candidates']:,} | "
                     f"{fmt(s.get('full_rows_metrics'))} | {fmt(s['sparse_metrics'])} | "
                     f"{fmt(s['sparse_with_run_file'])} | "
                     f"{fmt(s['bm25s_retrieve_k100_numba'])} | "
                     f"{fmt(s['bm25s_retrieve_k100_numpy'])} |")
    eq = dict(d["equal"])
    same_order = eq.pop("run_file_top_ids_in_same_order")
    lines += ["", "Dev pool, sparse path against the full-row path: " + ", ".join(
        f"{k} {'equal' if v is True else v}" for k, v in eq.items()) + f"; {same_order:,} of "
        f"{d['questions']:,} records list their top ids in the same order: tied scores come "
        "in torch.topk's order on full rows and by candidate index on the sparse path.",
        "", "Dev metrics (both paths): " + ", ".join(
            f"{k} {d['metrics'][k]}" for k in ("mrr", "r@1", "r@5", "r@10", "doc_mrr")) + "."]
    if "train" in out:
        t = out["train"]
        lines += ["", "Train metrics (sparse path): " + ", ".join(
            f"{k} {t['metrics'][k]}" for k in ("mrr", "r@1", "r@5", "r@10", "doc_mrr")) + "."]
        if "equal_to_full_rows" in t:
            lines += ["Train pool, sparse against full rows: " + ", ".join(
                f"{k} {v}" for k, v in t["equal_to_full_rows"].items()) + "."]
    lines += ["", "bm25s numba times are the second call (the first compiles: "
              + ", ".join(f"{n} {out[n]['seconds']['bm25s_retrieve_k100_numba_first_call']} s"
                          for n in ("dev", "train") if n in out
                          and out[n]["seconds"]["bm25s_retrieve_k100_numba_first_call"])
              + ").", "", "Full rows: one bm25s `get_scores` row per question, then the dense rank "
              "rules on [block, candidates] tensors. Sparse: only the candidates sharing a "
              "term with the question, summed from bm25s's (term, document) scores in "
              "get_scores's order and precision (bit-identical), ranks from counts above and "
              "equal to the best gold score. The run-file columns include formatting the "
              "top-100 JSON records, which the bm25s columns do not."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-train", action="store_true", help="also time the full-row path "
                    "on the train pool (minutes)")
    ap.add_argument("--numpy-train", action="store_true", help="also time bm25s's numpy "
                    "backend on the train pool (minutes)")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "bench_bm25"),
                    help="writes OUT.json and OUT.md")
    ap.add_argument("--markdown-only", action="store_true",
                    help="rewrite OUT.md from an existing OUT.json")
    args = ap.parse_args()
    if args.markdown_only:
        Path(args.out + ".md").write_text(markdown(json.loads(Path(args.out + ".json")
                                                              .read_text())))
        return
    torch.set_num_threads(1)
    import bm25s

    try:
        import numba
        numba_version = numba.__version__
    except ImportError:
        numba_version = None
    settings = BM25Settings.from_config(load_yaml("model/bm25.yaml"))
    out = {"machine": f"{platform.processor() or platform.machine()}, "
                      f"python {platform.python_version()}",
           "bm25s": bm25s.__version__, "numpy": np.__version__, "numba": numba_version,
           "settings": settings.to_dict(), "dev": bench_dev(settings)}
    if not args.skip_train:
        out["train"] = bench_train(settings, args.old_train, args.numpy_train)
    write_json(out, args.out + ".json")
    Path(args.out + ".md").write_text(markdown(out))
    print(markdown(out))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
