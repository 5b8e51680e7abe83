"""Table 2's Markdown as experiments/reproduce_table2.py writes it (table2.md): each row's
status in words, the paper's, this run's and the committed reference's numbers, and the
comparison with that reference."""

from __future__ import annotations

from pathlib import Path

from retrieval_qa.portable_paths import portable

METRICS = ("mrr", "r@1", "r@5")
STATUS_TEXT = {
    "computed": "computed now",
    "resumed": "resumed",
    "model reused": "evaluated now; model reused (a finished training of the same settings "
                    "in the run folder)",
    "reused": "reused (earlier result in the run folder, same settings; --force / FORCE=1 "
              "recomputes)",
    "not selected": "not selected (ROWS=all runs it)",
    "other settings": "not shown: its saved result was computed with other settings or "
                      "records none (ROWS=<row> FORCE=1 recomputes it)",
    "no profile": "not run: its experiment has no profile of this name",
}


def _triple(metrics: dict | None) -> str:
    if not metrics:
        return "–"
    return " / ".join(f"{metrics[m]:.2f}" for m in METRICS)


def _compare(ours: dict | None, ref: dict | None, profile: str | None = None,
             extra: list[str] | None = None) -> str:
    """This run's MRR against the reference: against a seed mean, within 2 std or not; against
    an exact-setting result, whether it matches. A reference of other settings (its own
    ``differs``, another profile than this run's, or this run's extra training overrides) is
    compared without a verdict."""
    if not ours or not ref:
        return ""
    diff = ours["mrr"] - ref["metrics"]["mrr"]
    what = "seed mean" if "std" in ref else "reference"
    trained = ref.get("profile")  # None: a result of no training (BM25)
    if ref.get("differs") or (trained and extra):
        return f"MRR {diff:+.2f} vs the {what} of other settings (not a reproduction check)"
    if trained and profile and trained != profile:
        return (f"MRR {diff:+.2f} vs the {what} of the {trained} profile (not a reproduction "
                "check)")
    if "std" in ref:
        spread = ref["std"]["mrr"]
        verdict = "within 2 std" if abs(diff) <= 2 * spread + 0.01 else "outside 2 std"
        return f"MRR {diff:+.2f} vs the seed mean ({verdict})"
    if all(abs(ours[m] - ref["metrics"][m]) < 0.005 for m in METRICS):
        return "matches the reference"
    return f"MRR {diff:+.2f} vs the reference"


def render(table, entries: list[dict], profile: str, selection: str, out: Path,
           extra: list[str] | None = None) -> str:
    lines = [f"# {table.title}", "",
             f"Profile `{profile}`; rows: {selection}. Pools: dev = ReQA built from SQuAD "
             "dev-v1.1 (10,250 candidates, 10,539 questions); train = ReQA built from "
             "train-v1.1 (the ReQA paper's pool). Paper numbers are the paper's, on the pool it "
             "used (the ENDX paper says dev; the BM25 and quoted rows are probably on train). "
             "Committed reference: this repository's own results (`results/`): the same "
             "settings (seed 42), else a seed mean on today's pools (± its sample std), to "
             "check that you reproduced ours. Cells are MRR / R@1 / R@5. Trained rows learn from "
             "train-v1.1, so they are scored on the dev pool only.", "",
             "| method | pool | status | paper | this run | committed reference | comparison "
             "| notes |", "|---|---|---|---|---|---|---|---|"]
    encoders = []
    for e in entries:
        ours = e["result"].get("metrics") if e["result"] else None
        ref = e.get("reference")
        notes = []
        if e["result"] and "not_run" in e["result"]:
            notes.append(e["result"]["not_run"])
        training = (e["result"] or {}).get("training") or {}
        if training.get("pretrained"):
            encoders.append(str(training["pretrained"]))
            notes.append(f"encoder: {training['pretrained']}")
        if e.get("seconds") is not None:
            notes.append(f"{e['seconds']:.0f} s")
        ref_cell = _triple(ref["metrics"]) if ref else "–"
        if ref and "std" in ref:
            ref_cell += f" (± {ref['std']['mrr']:.2f} MRR)"
        if ref:
            ref_cell += f" `{ref['source']}`" + (f" ({ref['about']})" if ref.get("about") else "")
        lines.append(f"| {e['row']} | {e['pool']} | {STATUS_TEXT.get(e['status'], e['status'])} "
                     f"| {_triple(e['paper'])} | {_triple(ours)} | {ref_cell} "
                     f"| {_compare(ours, ref, profile, extra)} | {'; '.join(notes)} |")
    if any("all-MiniLM-L6-v2" in name for name in encoders):
        lines += ["", "Rows on all-MiniLM-L6-v2 start from it off-the-shelf: its authors trained "
                  "it on pairs that include SQuAD's training questions, so these rows are not "
                  "BERT after language-model pre-training only (docs/data.md)."]
    lines += ["", f"Settings and timings of every row: `{portable(str(out))}/*.json`; "
              f"per-question ranks: `{portable(str(out))}/*.run.jsonl` (`rqa metrics --run-file F` "
              "recomputes them)."]
    return "\n".join(lines) + "\n"
