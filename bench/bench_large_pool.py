"""Large pools: exact search in bounded memory, and approximate FAISS search against it.

A synthetic pool per size (``--sizes``, default 100k / 300k / 1M candidates): random 384-d
float32 embeddings (Gaussian, generated, not encoded), ``--questions`` questions with one
random gold each, paragraphs of five sentences. Each measurement runs in a child process of
its own, which reads its peak resident memory (Linux: VmHWM, reset after the embeddings and
the pool exist, so the figure is what the search adds):

* exact: :func:`~retrieval_qa.evaluation.evaluate` with conf/eval/default.yaml (memory_mb,
  top_k with a run file, doc_level) and conf/search.yaml (``min_block_rows``): seconds per
  1,000 questions and the memory the search adds; at the largest size also the search in
  blocks of rows only (``min_block_rows=1``) and a 64 MiB budget;
* approximate (``--indexes``, faiss-cpu): the index's build time, search time and recall@k of
  the exact top-k (k = 10, 100: the share of the exact search's k best that the index
  returns among its k), and the metrics under the approximate rule (a gold not returned ranks
  n + (C - n + 1) / 2; retrieval_qa/evaluation/approximate.py). HNSW is built up to
  ``--hnsw-max`` candidates (its build is the slow part on 2 cores).
* ``--dev``: the same recall on the real ReQA SQuAD dev pool, embedded by the packaged
  all-MiniLM-L6-v2 (sentence-transformers), ``--dev-questions`` of its questions.

Random Gaussian vectors in 384 dimensions have no clusters: the hardest case for an
approximate index (its recall on real embeddings is the ``--dev`` figure).

Usage: python -m bench.bench_large_pool [--sizes 100000,300000,1000000] [--questions 2000]
       [--threads 2] [--indexes faiss-ivf,faiss-hnsw] [--hnsw-max 300000] [--dev]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bench.common import RESULTS, command, machine, run_json, write_result
from retrieval_qa.config import load_yaml
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation import DenseScorer, evaluate
from retrieval_qa.evaluation.evaluator import evaluator_settings, search_settings

EVAL = evaluator_settings(load_yaml("eval/default.yaml"))  # conf/eval: memory_mb, top_k, ...
DIM = 384


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def synthetic(n_q: int, n_c: int, seed: int = 0):
    """(pool, question embeddings, candidate embeddings) of a random pool."""
    g = torch.Generator().manual_seed(seed)
    questions = torch.randn(n_q, DIM, generator=g)
    candidates = torch.randn(n_c, DIM, generator=g)
    gold = torch.randint(0, n_c, (n_q, 1), generator=g).tolist()
    pool = RetrievalPool("random", f"{n_c}", [Candidate(str(i), "", "", f"d{i // 5}")
                                              for i in range(n_c)],
                         [f"q{i}" for i in range(n_q)], gold)
    return pool, questions, candidates


def _warm_up() -> None:
    """One tiny evaluation first, so the modules it imports are not counted as search memory."""
    pool, q, c = synthetic(4, 50, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        evaluate(pool, DenseScorer(q, c), **EVAL, run_file=Path(tmp) / "r.jsonl",
                 progress=False, search=search_settings())


def _top_ids(run_file: Path) -> np.ndarray:
    rows = [json.loads(line) for line in run_file.read_text().splitlines() if line.strip()]
    return np.array([[int(i) for i in r["top_ids"]] for r in rows])


def _set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    try:
        import faiss

        faiss.omp_set_num_threads(threads)
    except ImportError:
        pass


def child_exact(n_q: int, n_c: int, memory_mb: float, min_block_rows: int, top_out: str,
                threads: int) -> dict:
    from retrieval_qa.evaluation.search import fitting_rows

    _set_threads(threads)
    _warm_up()
    pool, q, c = synthetic(n_q, n_c)
    scorer = DenseScorer(q, c)
    search = {**search_settings(), "min_block_rows": min_block_rows}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.jsonl"
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        base = _status_mb("VmRSS")
        t = time.perf_counter()
        result = evaluate(pool, scorer, **{**EVAL, "memory_mb": memory_mb}, run_file=run,
                          progress=False, search=search)
        seconds = time.perf_counter() - t
        peak = _status_mb("VmHWM")
        if top_out:
            np.save(top_out, _top_ids(run))
    rows = fitting_rows(n_c, memory_mb)
    return {"candidates": n_c, "questions": n_q, "memory_mb": memory_mb,
            "min_block_rows": min_block_rows,
            "column_chunks": rows < min(min_block_rows, n_q),
            "seconds": seconds, "seconds_per_1000_questions": 1000 * seconds / n_q,
            "embeddings_mb": (n_q + n_c) * DIM * 4 / 2**20,
            "rss_before_search_mb": base, "peak_rss_mb": peak,
            "search_peak_extra_mb": peak - base,
            "full_matrix_mb": n_q * n_c * 4 / 2**20,
            "metrics": {k: round(v, 4) for k, v in result.metrics.items()}}


def recall_at(approx: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean share of the exact top-k that the approximate top-k holds."""
    k = min(k, approx.shape[1], exact.shape[1])
    return float(np.mean([len(set(a[:k]) & set(e[:k])) / k
                          for a, e in zip(approx, exact, strict=True)]))


def _approximate(pool, q, c, index: str, exact_top: np.ndarray) -> dict:
    from retrieval_qa.evaluation.approximate import ApproximateScorer, build_index

    settings = search_settings()
    list_size = max(settings["list_size"], EVAL["top_k"])
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_mb("VmRSS")
    t = time.perf_counter()
    built = build_index(c.numpy(), index, settings)
    build_s = time.perf_counter() - t
    scorer = ApproximateScorer(q, built, len(c), list_size)
    t = time.perf_counter()
    _, ids = scorer.search(range(0, len(q)))
    search_s = time.perf_counter() - t
    result = evaluate(pool, scorer, **EVAL, progress=False, search=settings)  # the lists
    peak = _status_mb("VmHWM")
    return {"index": index, "candidates": len(c), "questions": len(q),
            "settings": settings["ivf" if index == "faiss-ivf" else "hnsw"],
            "effective": ({"nlist": built.nlist, "nprobe": built.nprobe}
                          if index == "faiss-ivf" else {"ef_search": built.hnsw.efSearch}),
            "list_size": list_size, "build_seconds": build_s,
            "search_seconds_per_1000_questions": 1000 * search_s / len(q),
            "recall@10": recall_at(ids, exact_top, 10),
            "recall@100": recall_at(ids, exact_top, 100),
            "index_peak_extra_mb": peak - base,
            "metrics": {k: round(v, 4) for k, v in result.metrics.items()}}


def child_approximate(n_q: int, n_c: int, index: str, top_in: str, threads: int) -> dict:
    _set_threads(threads)
    _warm_up()
    pool, q, c = synthetic(n_q, n_c)
    return _approximate(pool, q, c, index, np.load(top_in))


def dev_pool(n_q: int, indexes: list[str], threads: int) -> dict:
    """The packaged MiniLM's embeddings of the dev pool: exact search, then each index."""
    from sentence_transformers import SentenceTransformer

    from bench.common import st_model_path
    from retrieval_qa.data import load_pool

    _set_threads(threads)
    pool, _ = load_pool("reqa_squad", "dev")
    keep = range(min(n_q, len(pool.questions)))
    pool = RetrievalPool(pool.dataset, pool.pool, pool.candidates,
                         [pool.questions[i] for i in keep], [pool.gold[i] for i in keep])
    model = SentenceTransformer(st_model_path(None), device="cpu")
    t = time.perf_counter()
    q = torch.from_numpy(model.encode(pool.questions, batch_size=128,
                                      normalize_embeddings=True))
    c = torch.from_numpy(model.encode([x.text for x in pool.candidates], batch_size=128,
                                      normalize_embeddings=True))
    encode_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.jsonl"
        exact = evaluate(pool, DenseScorer(q, c), **EVAL, run_file=run, progress=False,
                         search=search_settings())
        exact_top = _top_ids_by_position(run, pool)
    out = {"pool": "reqa_squad/dev", "questions": len(q), "candidates": len(c),
           "encoder": "all-MiniLM-L6-v2 (packaged), normalised", "encode_seconds": encode_s,
           "exact_metrics": {k: round(v, 4) for k, v in exact.metrics.items()},
           "indexes": [_approximate(pool, q, c, index, exact_top) for index in indexes]}
    return out


def _top_ids_by_position(run: Path, pool: RetrievalPool) -> np.ndarray:
    """The run file's top ids as candidate positions."""
    position = {x.id: i for i, x in enumerate(pool.candidates)}
    rows = [json.loads(line) for line in run.read_text().splitlines() if line.strip()]
    return np.array([[position[i] for i in r["top_ids"]] for r in rows])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--indexes", default="faiss-ivf,faiss-hnsw")
    ap.add_argument("--hnsw-max", type=int, default=300_000)
    ap.add_argument("--dev", action="store_true")
    ap.add_argument("--dev-questions", type=int, default=2000)
    ap.add_argument("--out", default=str(RESULTS / "bench_large_pool.json"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        kind = spec.pop("kind")
        out = child_exact(**spec) if kind == "exact" else child_approximate(**spec)
        print(json.dumps(out))
        return
    wall = time.perf_counter()
    _set_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    indexes = [i for i in args.indexes.split(",") if i]
    out = {"machine": machine(args.threads, ("faiss",)), "command": command(__spec__.name, argv),
           "date": time.strftime("%Y-%m-%d"), "dim": DIM, "eval": EVAL,
           "search": search_settings(), "exact": [], "approximate": []}

    def child(**spec) -> dict:
        return run_json(["-m", __spec__.name, "--child", json.dumps(spec)])

    with tempfile.TemporaryDirectory() as tmp:
        for n_c in sizes:
            top = str(Path(tmp) / f"top{n_c}.npy")
            runs = [(EVAL["memory_mb"], search_settings()["min_block_rows"], top)]
            if n_c == max(sizes):  # rows only (no column chunks), and a small budget
                runs += [(EVAL["memory_mb"], 1, ""), (64, search_settings()["min_block_rows"], "")]
            for memory_mb, min_rows, top_out in runs:
                res = child(kind="exact", n_q=args.questions, n_c=n_c, memory_mb=memory_mb,
                            min_block_rows=min_rows, top_out=top_out, threads=args.threads)
                out["exact"].append(res)
                print(f"exact {n_c:>9,} candidates, {memory_mb} MiB, min_block_rows "
                      f"{min_rows}: {res['seconds_per_1000_questions']:.1f} s / 1,000 q, "
                      f"+{res['search_peak_extra_mb']:.0f} MB at peak (embeddings "
                      f"{res['embeddings_mb']:.0f} MB)", flush=True)
            for index in indexes:
                if index == "faiss-hnsw" and n_c > args.hnsw_max:
                    continue
                res = child(kind="approximate", n_q=args.questions, n_c=n_c, index=index,
                            top_in=top, threads=args.threads)
                out["approximate"].append(res)
                print(f"{index} {n_c:>9,}: build {res['build_seconds']:.0f} s, "
                      f"{res['search_seconds_per_1000_questions']:.2f} s / 1,000 q, recall@10 "
                      f"{res['recall@10']:.3f}, @100 {res['recall@100']:.3f}", flush=True)
    if args.dev:
        out["dev"] = dev_pool(args.dev_questions, indexes, args.threads)
        for res in out["dev"]["indexes"]:
            print(f"dev {res['index']}: recall@10 {res['recall@10']:.3f}, @100 "
                  f"{res['recall@100']:.3f}", flush=True)
    write_result(out, args.out, wall)
    print(json.dumps({"out": args.out, "wall_s": out["wall_s"]}))


if __name__ == "__main__":
    main()
