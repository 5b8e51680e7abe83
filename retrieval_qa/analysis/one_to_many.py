"""ENDX Table 4 and Figure 2: retrieval on the one-to-many subsets of a pool.

Subset k keeps the questions whose answer sentence is shared by at least k distinct questions
(:func:`retrieval_qa.data.subsets.one_to_many_subset`); the candidates stay the whole pool, so
only the set of evaluated questions changes. Every model encodes the pool's questions and
candidates once; each subset is evaluated from the same embeddings (rows of the question
matrix), with the shared evaluator's rank rules.

Writes ``one_to_many.{md,json}`` (every k), ``table4.{md,json}`` (k = 8 by default) and
``figure2.png`` (MRR against k, one line per model; with several runs of a model the line is
the mean and the band the min-max range).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from ..config import eval_settings
from ..data.subsets import one_to_many_subset
from ..data.types import RetrievalPool
from ..evaluation import DenseScorer, evaluate, ledger
from ..evaluation.evaluator import evaluator_settings
from .common import (
    DEFAULT_OUTPUT_DIR,
    METRIC_LABELS,
    METRICS,
    cell,
    group_by_name,
    load_models,
    markdown_table,
    paper_table,
    pyplot,
    spread,
    write_json,
    write_markdown,
)


def subset_rows(pool: RetrievalPool, ks: Sequence[int]) -> dict[int, dict]:
    """For each k: the subset pool, the indices of its questions in ``pool.questions`` and its
    sizes: questions, answer sentences with >= k distinct questions, and their (question,
    answer sentence) pairs.

    Args:
        pool: the pool.
        ks: the subsets' thresholds (distinct questions per answer sentence).
    """
    position = {q: i for i, q in enumerate(pool.question_keys)}
    per_answer: dict[str, set[str]] = {}
    for p in pool.pairs:
        per_answer.setdefault(pool.answer_key(p), set()).add(pool.pair_key(p))
    out = {}
    for k in ks:
        sub = one_to_many_subset(pool, k)
        shared = [qs for qs in per_answer.values() if len(qs) >= k]
        out[k] = {"pool": sub, "rows": [position[q] for q in sub.question_keys],
                  "sizes": {"questions": len(sub.questions),
                            "qa_pairs": sum(len(qs) for qs in shared),
                            "answer_sentences": len(shared)}}
    return out


def _metrics(m: dict) -> dict:
    return {k: round(m[k], 4) for k in METRICS}


def one_to_many_analysis(pool: RetrievalPool, models: Sequence[tuple[str, str]], *,
                         ks: Sequence[int] = tuple(range(1, 9)), table_k: int = 8,
                         output_dir: str | Path = DEFAULT_OUTPUT_DIR, batch_size: int = 128,
                         progress: bool = False) -> dict:
    """Every model on every one-to-many subset of ``pool`` (see the module docstring).

    Args:
        pool: the evaluation pool.
        models: ``(name, exported folder)``; a name given several times is one method over
            several runs (seeds), reported as mean and spread.
        ks: the subsets' thresholds evaluated (``table_k`` is added).
        table_k: the subset of Table 4.
        output_dir: where the tables and the figure are written.
        batch_size: texts per encoding batch.
        progress: show the encoding's progress.
    """
    start = time.perf_counter()
    ks = sorted(set(int(k) for k in ks) | {int(table_k)})
    out = Path(output_dir)
    subsets = subset_rows(pool, ks)
    loaded = load_models(models)
    runs: list[dict] = []
    embeddings: dict[str, tuple] = {}
    settings = evaluator_settings(eval_settings())  # the evaluator's (conf/eval)
    for name, folder in models:
        if folder not in embeddings:
            model = loaded[folder]
            t0 = time.perf_counter()
            q = model.encode_questions(pool.questions, batch_size=batch_size, progress=progress)
            c = model.encode_answers(pool.candidates, batch_size=batch_size, progress=progress)
            embeddings[folder] = (q, c, round(time.perf_counter() - t0, 3))
        q, c, enc_s = embeddings[folder]
        per_k = {}
        for k in ks:
            s = subsets[k]
            if not s["rows"]:
                per_k[str(k)] = None
                continue
            res = evaluate(s["pool"], DenseScorer(q[s["rows"]], c),
                           **{**settings, "doc_level": False}, progress=False, desc=f"k>={k}")
            per_k[str(k)] = _metrics(res.metrics)
            ledger.record(dataset=s["pool"].dataset, pool=s["pool"].pool, metrics=res.metrics,
                          questions=res.questions, kind="evaluate", name=str(name),
                          checkpoint=str(folder), ranks=res.ranks,
                          subset=f"answers asked by >= {k} questions")
        runs.append({"name": name, "model": folder, "encode_seconds": enc_s, "metrics": per_k})

    grouped = group_by_name((r["name"], r) for r in runs)
    rows = []
    for name, group in grouped.items():
        for k in ks:
            vals = [r["metrics"][str(k)] for r in group]
            rows.append({"model": name, "k": k, "runs": len(group),
                         "questions": subsets[k]["sizes"]["questions"],
                         **{m: spread([v[m] if v else None for v in vals]) for m in METRICS}})
    sizes = {str(k): subsets[k]["sizes"] for k in ks}
    common = {"dataset": pool.dataset, "pool": pool.pool, "candidates": len(pool.candidates),
              "subset_sizes": sizes, "runs": runs,
              "note": "subset k: questions whose answer sentence has >= k distinct questions; "
                      "candidates: the whole pool; metrics in %, mean ± sample std over runs"}
    files = [write_json(out / "one_to_many.json", {**common, "ks": ks, "rows": rows})]
    header = ["model", "k", "questions", *(METRIC_LABELS[m] for m in METRICS), "runs"]
    lines = [f"# One-to-many subsets of {pool.dataset}/{pool.pool} (ENDX Figure 2)", "",
             f"Candidates: all {len(pool.candidates):,} sentences of the pool. Subset k: the "
             "questions whose answer sentence has at least k distinct questions. Cells: mean ± "
             "sample std over runs.", ""]
    lines += markdown_table(header, ([r["model"], r["k"], r["questions"],
                                      *(cell(r[m]) for m in METRICS), r["runs"]] for r in rows))
    files.append(write_markdown(out / "one_to_many.md", lines))

    t4 = [r for r in rows if r["k"] == table_k]
    paper4 = paper_table("endx_table4")
    files.append(write_json(out / "table4.json", {**common, "k": table_k, "rows": t4,
                                                  "paper": paper4}))
    size = subsets[table_k]["sizes"]
    lines = [f"# Table 4: answers with at least {table_k} questions ({pool.dataset}/{pool.pool})",
             "", f"{size['questions']:,} questions (answer sentences with >= {table_k} questions: "
             f"{size['answer_sentences']:,}) out of {len(pool.questions):,}; candidates: all "
             f"{len(pool.candidates):,} sentences. Cells: mean ± sample std over runs.", ""]
    lines += markdown_table(["model", *(METRIC_LABELS[m] for m in METRICS), "runs"],
                            ([r["model"], *(cell(r[m]) for m in METRICS), r["runs"]] for r in t4))
    lines += ["", "Paper (ReQA SQuAD, BERT-base towers): " + "; ".join(
        f"{n} {v['mrr']:.2f} / {v['r@1']:.2f} / {v['r@5']:.2f}" for n, v in paper4.items())]
    files.append(write_markdown(out / "table4.md", lines))
    files.append(_figure2(rows, ks, out / "figure2.png", pool))
    return {"analysis": "one-to-many", "dataset": pool.dataset, "pool": pool.pool,
            "subset_sizes": sizes,
            "table4": {r["model"]: {m: r[m]["mean"] if r[m] else None for m in METRICS}
                       for r in t4},
            "files": files, "seconds": round(time.perf_counter() - start, 3)}


def _figure2(rows: list[dict], ks: Sequence[int], path: Path, pool: RetrievalPool) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["model"] for r in rows):
        pts = [r for r in rows if r["model"] == name and r["mrr"]]
        x = [r["k"] for r in pts]
        ax.plot(x, [r["mrr"]["mean"] for r in pts], marker="o", label=name)
        if any(r["mrr"]["n"] > 1 for r in pts):
            ax.fill_between(x, [r["mrr"]["min"] for r in pts], [r["mrr"]["max"] for r in pts],
                            alpha=0.2)
    ax.set_xticks(list(ks))
    ax.set_xlabel("minimum number of questions per answer (k)")
    ax.set_ylabel("MRR (%)")
    ax.set_title(f"One-to-many subsets of {pool.dataset}/{pool.pool}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
