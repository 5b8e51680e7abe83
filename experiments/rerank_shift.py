"""What the reranker does to the fused lists of each pool, from the run files of ``rqa evaluate
--pipeline`` reports: the signals a user has without labels (the reranker's mean confidence,
the share of questions whose top sentence it changes, and how often the new top sentence
drops a name of the question that the fused top sentence carried), and, beside them, what the
labels say of those changes (questions better and worse, and the MRR moved by the questions
whose top sentence stayed, by the name drops and by the other changes, and by the questions
whose gold sentence is its whole paragraph and by the others).

A question's *names* are its words, after the first, that hold a capital letter or a digit
("Who sang Sweet Weaponry?" -> sweet, weaponry); a sentence *carries* a name when the name is
one of its words (lower-cased). The sentence's own text counts, not its paragraph, whichever a
reranker reads.

    python experiments/rerank_shift.py results/distill/hybrid_distill_rerank10_q12k_seed2.json \\
        results/distill/hybrid_distill_rerank10_q12k_seed2_multireqa_relationextraction_test.json \\
        --output results/distill/rerank_shift.json

The reports' ``run_file`` paths are read relative to the working folder, which must hold the
runs that wrote them; a run file whose MRR is not its report's (a later run wrote over it) is
refused.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

WORD = re.compile(r"[\w'-]+")


def names(question: str) -> set[str]:
    """The question's words after its first that hold a capital letter or a digit, lower-cased.

    >>> sorted(names("Who sang or played Sweet Weaponry in 2004?"))
    ['2004', 'sweet', 'weaponry']
    """
    words = WORD.findall(question)[1:]
    return {w.lower() for w in words if any(c.isupper() or c.isdigit() for c in w)}


def carried(question_names: set[str], text: str) -> int:
    """How many of ``question_names`` are words of ``text``."""
    return len(question_names & {w.lower() for w in WORD.findall(text)})


def read_run(path: str | Path) -> list[dict]:
    """The records of a run file (one JSON object per question, in pool order; a damaged or
    truncated file is refused by :func:`~retrieval_qa.evaluation.runfile.read_run_file`)."""
    from retrieval_qa.evaluation.runfile import read_run_file

    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"rerank_shift: no run file at {path} (fix: run from the folder that "
                         "holds the report's runs, or run the report's command again)")
    return read_run_file(path)


def _pct(k: int, d: int) -> float | None:
    return round(100 * k / d, 2) if d else None


def shift(fused: list[dict], reranked: list[dict], text_of: dict[str, str],
          whole_gold: list[bool] | None = None) -> dict:
    """The reranker's changes to the top sentence of each question (by text: a copy of the same
    sentence is no change), label-free and labelled.

    ``fused``/``reranked``: the two run files' records, the same questions in the same order;
    ``text_of``: candidate id -> sentence text; ``whole_gold``: per question, whether a gold
    sentence of it is its whole paragraph (then the MRR change is split by it too).
    """
    if len(fused) != len(reranked):
        raise ValueError(f"{len(fused)} fused and {len(reranked)} reranked records")
    if whole_gold is not None and len(whole_gold) != len(fused):
        raise ValueError(f"{len(whole_gold)} gold flags for {len(fused)} records")
    changed = drops = worse = better = worse_drops = 0
    gain = {"top_kept": 0.0, "name_drops": 0.0, "other_changes": 0.0}
    by_gold = {"whole_paragraph_gold": 0.0, "other_gold": 0.0}
    for q, (f, r) in enumerate(zip(fused, reranked, strict=True)):
        if f["question"] != r["question"]:
            raise ValueError(f"the run files part at question {f['question']!r}")
        step = 1 / r["gold_rank"] - 1 / f["gold_rank"]
        if whole_gold is not None:
            by_gold["whole_paragraph_gold" if whole_gold[q] else "other_gold"] += step
        old, new = text_of[f["top_ids"][0]], text_of[r["top_ids"][0]]
        if old == new:
            gain["top_kept"] += step
            continue
        changed += 1
        asked = names(f["question"])
        dropped = carried(asked, new) < carried(asked, old)
        gain["name_drops" if dropped else "other_changes"] += step
        drops += dropped
        worse += r["gold_rank"] > f["gold_rank"]
        better += r["gold_rank"] < f["gold_rank"]
        worse_drops += dropped and r["gold_rank"] > f["gold_rank"]
    n = len(fused)
    return {"questions": n, "top_changed": changed, "top_changed_pct": _pct(changed, n),
            "name_drops": drops, "name_drops_pct_of_changed": _pct(drops, changed),
            "changed_better": better, "changed_worse": worse,
            "worse_pct_of_name_drops": _pct(worse_drops, drops),
            "worse_pct_of_other_changes": _pct(worse - worse_drops, changed - drops),
            "mrr_change": round(100 * sum(gain.values()) / n, 2) if n else None,
            **{f"mrr_change_{k}": round(100 * v / n, 2) if n else None
               for k, v in gain.items()},
            **({} if whole_gold is None or not n else {
                "questions_whole_paragraph_gold": sum(whole_gold),
                **{f"mrr_change_{k}": round(100 * v / n, 2) for k, v in by_gold.items()}})}


def report_shift(report: dict) -> dict:
    """:func:`shift` for one ``rqa evaluate --pipeline`` report, with its settings and the
    reranker's mean confidence on the pool and on the validation side."""
    from retrieval_qa.data import load_pool

    stages = {s["stage"].split(" ")[0]: s for s in report["stages"]}
    if "fused" not in stages or "reranked" not in stages:
        raise SystemExit(f"rerank_shift: the report of {report.get('pipeline')} has no fused "
                         "and reranked stages (fix: give a pipeline report with a reranker)")
    pool, _ = load_pool(report["dataset"], report["pool"])
    if report.get("questions", len(pool.questions)) < len(pool.questions):  # --max-questions
        from retrieval_qa.pipeline.tuning import question_subset

        pool = question_subset(pool, report["questions"],
                               report["settings"]["tuning"]["split_seed"])
    text_of = {c.id: c.text for c in pool.candidates}
    whole = [c.whole_paragraph for c in pool.candidates]
    whole_gold = [any(whole[i] for i in gold) for gold in pool.gold]
    rr, tuned = stages["reranked"], report["fusion"].get("reranker", {})
    runs = {}
    for name in ("fused", "reranked"):
        runs[name] = read_run(stages[name]["run_file"])
        mrr = 100 * sum(1 / r["gold_rank"] for r in runs[name]) / max(len(runs[name]), 1)
        if abs(mrr - stages[name]["metrics"]["mrr"]) > 0.01:  # a later run wrote over it
            raise SystemExit(f"rerank_shift: {stages[name]['run_file']} scores MRR {mrr:.4f}, "
                             f"its report {stages[name]['metrics']['mrr']:.4f} (fix: run the "
                             "report's command again, or give the report of the run that "
                             "wrote the file)")
    return {"pipeline": report["pipeline"], "dataset": report["dataset"], "pool": report["pool"],
            "top_k": rr["reranker_top_k"], "weight": rr["reranker_weight"],
            "gate": rr["reranker_gate"], "confidence_mean": rr["confidence_mean"],
            "val_confidence_mean": tuned.get("val_confidence_mean"),
            **shift(runs["fused"], runs["reranked"], text_of, whole_gold)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", help="rqa evaluate --pipeline report JSONs")
    parser.add_argument("--output", help="write the rows as JSON here too")
    args = parser.parse_args(argv)
    rows = []
    for path in args.reports:
        row = {"report": path, **report_shift(json.loads(Path(path).read_text("utf-8")))}
        rows.append(row)
        print(json.dumps(row))
    if args.output:
        Path(args.output).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
