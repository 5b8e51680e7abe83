"""``rqa compare A B [C ...]``: is a difference between runs real? Paired tests over the
questions of one pool.

Each input is a setting: ``[NAME=]PATH`` where PATH is a per-question record
(``*.jsonl.gz``, :mod:`retrieval_qa.evaluation.per_question`), a run file (``*.jsonl`` of
``rqa evaluate --run-file``), a run folder (its ``per_question.jsonl.gz``) or a sweep folder
(``rqa sweep``: one setting per swept setting, its seeds' records) or a TREC run (with
``--trec-qrels``; :mod:`retrieval_qa.evaluation.trec`). The same NAME given several times is
one setting with several seeds.

TREC runs are compared with TREC runs only, under their protocol
(:data:`~retrieval_qa.evaluation.trec.PROTOCOL`: ranks over the listed top k in trec_eval's
order, a question with no relevant candidate listed scoring 0), cut to the smallest depth of
the runs compared; the result names the protocol and that depth. Mixed with this suite's own
files (exact ranks among every candidate) they would compare two rules, so that is refused.

For each pair (each setting against the first, or with ``--pairs all`` every pair) and each
metric (MRR, R@k, doc-level MRR): the mean difference (B - A, points), its paired bootstrap
95 % interval, the two-sided paired randomisation (Fisher sign-flip) p-value, Holm-corrected
across the pairs of the call (per metric), and per-question wins / ties / losses of B on the
reciprocal rank. With seeds, each question's scores are first averaged over the setting's
seeds; beside the paired test a seed-level test (Welch's t and the exact permutation test
over the per-seed metrics, with the numbers of seeds) says whether the difference exceeds
seed-to-seed variation.

The statistics are ours (:mod:`.significance`) and run on our per-question scores: the ReQA
rank rules (average rank over ties, the best gold copy, one-to-many answers) are the
evaluator's, so nothing is re-ranked by another library (ranx is not a dependency). Where a
difference lies (per question type, per answer length): :mod:`.breakdown`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from ..errors import InputFileError, UsageError, did_you_mean
from ..evaluation.per_question import (
    RUN_DIR_NAME,
    PerQuestion,
    from_run_file,
    read_per_question,
)
from ..written import write_text
from . import significance as sig

log = logging.getLogger(__name__)

ALPHA = 0.05


@dataclass
class Setting:
    """One setting compared: a name and its records, one per seed.

    Attributes:
        name: the setting's name (``NAME=`` of the command line, or taken from the path).
        records: its per-question records, one per seed.
    """

    name: str
    records: list[PerQuestion]  # one per seed


def _sweep_settings(root: Path) -> list[Setting]:
    from .sweep_runs import load_sweep_runs

    groups: dict[str, list[PerQuestion]] = {}
    missing = []
    for run in load_sweep_runs(root):
        if run["report"] is None:
            continue
        label = str(run["sweep"].get("label") or Path(run["run_dir"]).name)
        record = Path(run["run_dir"]) / RUN_DIR_NAME
        if record.is_file():
            groups.setdefault(label, []).append(read_per_question(record))
        else:
            missing.append(run["run_dir"])
    if not groups:
        raise InputFileError("compare", str(root), f"is a sweep folder whose finished runs have "
                             f"no {RUN_DIR_NAME} ({len(missing)} runs)",
                             "re-run its test with this version of `rqa train` (it writes the "
                             "record beside result.json)")
    return [Setting(label, recs) for label, recs in groups.items()]


def eval_ks() -> tuple[int, ...]:
    """The ``ks`` of conf/eval/default.yaml, the eval group's (a run file keeps none)."""
    from ..config import eval_settings

    return tuple(eval_settings()["ks"])


def load_input(path: str | Path, trec_qrels: str | Path | None = None) -> list[Setting]:
    """The setting(s) one PATH holds (see the module's docstring).

    Args:
        path: a per-question record, run file, run folder, sweep folder or TREC run.
        trec_qrels: the judgements a TREC run is read with (required for one); None: none.
    """
    from ..evaluation.trec import is_trec_run, trec_record

    p = Path(path)
    if not p.exists():
        raise InputFileError("compare", str(path), "does not exist", "check the path")
    if p.is_file() and not p.name.endswith(".gz") and is_trec_run(p):
        if trec_qrels is None:
            raise UsageError(f"{path} is a TREC run: comparing it needs its judgements (fix: "
                             "add --trec-qrels FILE)")
        return [Setting(p.name, [trec_record(p, trec_qrels, eval_ks())])]
    if p.is_file():
        record = read_per_question(p) if p.name.endswith(".gz") else from_run_file(p, eval_ks())
        return [Setting(p.name, [record])]
    if (p / RUN_DIR_NAME).is_file():
        return [Setting(p.name, [read_per_question(p / RUN_DIR_NAME)])]
    if any(p.rglob("sweep.json")):
        return _sweep_settings(p)
    raise InputFileError("compare", str(path), f"is a folder without {RUN_DIR_NAME} or "
                         "sweep.json", "give a per-question record, a run file, a run folder "
                         "(result.json and its per_question.jsonl.gz) or a sweep folder")


def load_settings(specs: list[str], trec_qrels: str | Path | None = None) -> list[Setting]:
    """The settings of ``specs``, in order (:func:`trec_depth` checks and cuts TREC runs).

    Args:
        specs: ``[NAME=]PATH`` (:func:`load_input`); a NAME repeated adds seeds to its setting.
        trec_qrels: the TREC runs' judgements; given with no TREC run, an error.
    """
    settings: dict[str, Setting] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or Path(spec).exists():  # a path that holds "=" is a path
            name, path = "", spec
        found = load_input(path, trec_qrels)
        for s in found:
            key = name.strip() or s.name
            if name.strip() and len(found) > 1:  # a sweep folder given a NAME
                key = f"{name.strip()}:{s.name}"
            settings.setdefault(key, Setting(key, [])).records.extend(s.records)
    if len(settings) < 2:
        raise UsageError(f"compare needs at least two settings, got {len(settings)} "
                         f"({', '.join(settings) or 'none'}) (fix: give two or more PATHs, "
                         "or NAME=PATH with different NAMEs)")
    if trec_depth(list(settings.values())) is None and trec_qrels is not None:
        raise UsageError(f"--trec-qrels {trec_qrels}: no input is a TREC run (fix: drop it; "
                         "rqa's own files hold their gold ranks)")
    return list(settings.values())


def trec_depth(settings: list[Setting]) -> int | None:
    """The depth TREC runs are compared at: the smallest of theirs, each record's ranks
    beyond it set to ``inf`` (none listed) and its ks cut to it; None when no input is a
    TREC run. TREC runs and this suite's own files together are refused.

    Args:
        settings: the settings compared (their records are changed in place).
    """
    records = [r for s in settings for r in s.records]
    trec = [r.header.get("format") == "trec run" for r in records]
    if not any(trec):
        return None
    if not all(trec):
        names = [r.path for r, t in zip(records, trec, strict=True) if not t]
        raise UsageError(f"{names[0]} and TREC runs do not compare: a TREC run ranks over its "
                         "listed top k in trec_eval's tie order, rqa's own files hold the exact "
                         "ranks among every candidate (fix: compare TREC runs with TREC runs "
                         "(rqa evaluate --trec-run writes one), or rqa's files with rqa's)")
    depth = min(r.header["depth"] for r in records)
    for r in records:
        r.ranks = np.where(r.ranks > depth, np.inf, r.ranks)
        r.header["ks"] = [k for k in r.header["ks"] if k <= depth]
    return depth

# header keys that name a record's questions: the pool fingerprint (questions and gold lists;
# records only) and the digest of the question texts (records and run files)
QUESTION_DIGESTS = ("pool_fingerprint", "question_texts_sha1", "qrels_sha1")


def _check_paired(settings: list[Setting]) -> None:
    """Every record holds the same questions in the same order as the first: the same ids, and
    the same pool fingerprint and question-text digest wherever both files carry one. Files
    that share no digest (a record written before records kept the text digest, beside a run
    file) pair by id alone, with a warning."""
    ref = settings[0].records[0]
    for s in settings:
        for r in s.records:
            if r.ids != ref.ids:
                raise UsageError(f"{r.path} and {ref.path}: not the same questions "
                                 f"({len(r.ids)} vs {len(ref.ids)}, or another order) (fix: "
                                 "compare evaluations of the same pool)")
            shared = [k for k in QUESTION_DIGESTS if r.header.get(k) and ref.header.get(k)]
            for key in shared:
                if r.header[key] != ref.header[key]:
                    raise UsageError(
                        f"{r.path} and {ref.path}: {key} {r.header[key]} and "
                        f"{ref.header[key]} differ: other questions, other gold lists or "
                        "another order, although the ids match (fix: compare evaluations of "
                        "the same pool)")
            if not shared and r is not ref:
                log.warning("%s and %s share no question digest (a record written before "
                            "records kept one?): paired by id only, which cannot tell two pools "
                            "with the same question count apart", r.path, ref.path)


def metric_names(settings: list[Setting], metrics: list[str] | None = None) -> list[str]:
    """The metrics to compare, checked against what the records hold: ``metrics``, or by
    default ``mrr``, the records' ``r@k`` and ``doc_mrr`` when every record has doc ranks.

    Args:
        settings: the settings compared.
        metrics: the names given (``mrr``, ``r@K``, ``doc_mrr``, ``doc_r@K``); None: the
            default.
    """
    ks = settings[0].records[0].ks
    docs = all(r.doc_ranks is not None for s in settings for r in s.records)
    names = metrics or ["mrr", *(f"r@{k}" for k in ks), *(["doc_mrr"] if docs else [])]
    for m in names:
        if m.startswith("doc_") and not docs:
            raise UsageError(f"--metrics {m}: some inputs have no doc-level ranks "
                             "(fix: leave it out)")
        base = m.removeprefix("doc_")
        if base != "mrr" and not (base.startswith("r@") and base[2:].isdigit()):
            known = [f"{p}{b}" for p in ("", "doc_") for b in ("mrr", *(f"r@{k}" for k in ks))]
            raise UsageError(f"--metrics {m}: {did_you_mean(m, known)}expected mrr, r@K or "
                             "doc_mrr / doc_r@K")
    return names


def scores(record: PerQuestion, metrics: list[str]) -> np.ndarray:
    """[Q, M] per-question scores in points (100 x RR, 100 x hit): their means are the
    record's metrics.

    Args:
        record: one per-question record.
        metrics: the metrics' names (``mrr``, ``r@K``, ``doc_mrr``, ``doc_r@K``).
    """
    cols = []
    for m in metrics:
        ranks = record.doc_ranks if m.startswith("doc_") else record.ranks
        base = m.removeprefix("doc_")
        cols.append(100.0 / ranks if base == "mrr" else 100.0 * (ranks <= int(base[2:])))
    return np.stack(cols, axis=1)


def compare_settings(settings: list[Setting], *, metrics: list[str] | None = None,
                     pairs: str = "first", samples: int = sig.BOOTSTRAP_SAMPLES,
                     permutations: int = sig.PERMUTATIONS, seed: int = sig.SEED) -> dict:
    """The comparison as a JSON-able dict (see the module's docstring).

    Args:
        settings: the settings compared (at least two), the first the baseline.
        metrics: the metrics (:func:`metric_names`); None: the default.
        pairs: ``first`` (each setting against the first) or ``all`` (every pair).
        samples: bootstrap resamples.
        permutations: sign flips of the randomisation test.
        seed: the resampling's seed.
    """
    _check_paired(settings)
    names = metric_names(settings, metrics)
    per_seed = [[scores(r, names) for r in s.records] for s in settings]
    means = [np.mean(x, axis=0) for x in per_seed]  # [Q, M]: averaged over seeds
    seed_metrics = [np.array([x.mean(axis=0) for x in xs]) for xs in per_seed]  # [S, M]
    index = list(combinations(range(len(settings)), 2)) if pairs == "all" else [
        (0, j) for j in range(1, len(settings))]
    rows = []
    for a, b in index:
        diff = means[b] - means[a]
        low, high = sig.paired_bootstrap(diff, samples=samples, seed=seed)
        p = sig.randomisation_test(diff, permutations=permutations, seed=seed)
        rr = diff[:, names.index("mrr")] if "mrr" in names else diff[:, 0]
        rows.append({"a": settings[a].name, "b": settings[b].name,
                     "seeds_a": len(settings[a].records), "seeds_b": len(settings[b].records),
                     "wins": int((rr > 1e-9).sum()), "ties": int((np.abs(rr) <= 1e-9).sum()),
                     "losses": int((rr < -1e-9).sum()),
                     "metrics": {m: {"a": float(means[a][:, i].mean()),
                                     "b": float(means[b][:, i].mean()),
                                     "diff": float(diff[:, i].mean()),
                                     "ci95": [float(low[i]), float(high[i])], "p": float(p[i]),
                                     "seed_test": sig.seed_test(seed_metrics[a][:, i],
                                                                seed_metrics[b][:, i])}
                                 for i, m in enumerate(names)}})
    for m in names:  # Holm across the pairs of this call, metric by metric
        for row, adj in zip(rows, sig.holm([r["metrics"][m]["p"] for r in rows]), strict=True):
            row["metrics"][m]["p_holm"] = float(adj)
            row["metrics"][m]["significant"] = bool(adj < ALPHA)
    trec = settings[0].records[0].header
    protocol = ({"protocol": trec["protocol"], "trec_depth": trec["depth"]}
                if trec.get("format") == "trec run" else {})
    return {"analysis": "compare", "pairs": pairs, "metrics": names, **protocol,
            "questions": len(settings[0].records[0].ids),
            "settings": [{"name": s.name, "seeds": len(s.records),
                          "files": [r.path for r in s.records]} for s in settings],
            "bootstrap_samples": samples, "permutations": permutations, "seed": seed,
            "alpha": ALPHA, "question_scores": SEED_AVERAGING
            if any(len(s.records) > 1 for s in settings) else "one record per setting",
            "comparisons": rows}


SEED_AVERAGING = ("each question's score is the mean over its setting's seeds; the paired "
                  "tests run on those means, the seed test on the per-seed metrics")


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else "<0.001"


def marker(stats: dict) -> str:
    """``*`` when a comparison is significant after Holm's correction, else "".

    Args:
        stats: one metric's statistics of a comparison (its ``significant``).
    """
    return "*" if stats["significant"] else ""


def markdown(result: dict) -> str:
    """The comparison table: one row per pair and metric.

    Args:
        result: :func:`compare_settings`'s result.
    """
    lines = [f"Paired comparison over {result['questions']} questions "
             f"({'every pair' if result['pairs'] == 'all' else 'each setting vs the first'}): "
             "diff = B - A in points, its paired bootstrap 95 % interval "
             f"({result['bootstrap_samples']} resamples), the paired randomisation test's "
             f"p ({result['permutations']} sign flips) and Holm's correction across the "
             f"pairs; * = p_holm < {result['alpha']}. W/T/L: questions where B's reciprocal "
             "rank is higher / equal / lower. Seed test: Welch's t and the exact permutation "
             "test over the per-seed metrics (n_a, n_b seeds; the permutation test's smallest "
             "possible p is given, e.g. 0.1 with 3 seeds against 3)."
             + (f" With seeds, {SEED_AVERAGING}." if result.get("question_scores") ==
                SEED_AVERAGING else "")
             + (f" TREC runs, at depth {result['trec_depth']}: mrr is MRR@"
                f"{result['trec_depth']} over the listed candidates (trec_eval's order), not "
                "the protocol's exact MRR." if "trec_depth" in result else ""), "",
             "| A | B | metric | A | B | diff | 95 % CI | p | p_holm | W/T/L | seed test |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["comparisons"]:
        for m, s in row["metrics"].items():
            st = s["seed_test"]
            seed = (f"Welch p={_p(st['welch_p'])}, permutation p={_p(st['permutation_p'])} "
                    f"(min {st['permutation_p_min']:.2g}; n={st['n_a']},{st['n_b']})"
                    if st["welch_p"] is not None else f"– (n={st['n_a']},{st['n_b']})")
            lines.append(
                f"| {row['a']} | {row['b']} | {m} | {s['a']:.2f} | {s['b']:.2f} | "
                f"{s['diff']:+.2f}{marker(s)} | [{s['ci95'][0]:+.2f}, {s['ci95'][1]:+.2f}] | "
                f"{_p(s['p'])} | {_p(s['p_holm'])} | "
                f"{row['wins']}/{row['ties']}/{row['losses']} | {seed} |")
    return "\n".join(lines) + "\n"


def run_compare(specs: list[str], *, metrics: list[str] | None = None, pairs: str = "first",
                output: str | None = None, samples: int = sig.BOOTSTRAP_SAMPLES,
                permutations: int = sig.PERMUTATIONS, seed: int = sig.SEED,
                trec_qrels: str | None = None) -> dict:
    """``rqa compare``: load the inputs, compare them (:func:`compare_settings`), print the
    markdown table on stderr and write it (and its JSON) to ``output`` when given.

    Args:
        specs: ``[NAME=]PATH`` inputs (:func:`load_settings`), the first the baseline.
        metrics: the metrics (:func:`metric_names`); None: the default.
        pairs: ``first`` or ``all``.
        output: the markdown file (its JSON beside, ``.json``); None: none.
        samples: bootstrap resamples (>= 1).
        permutations: sign flips of the randomisation test (>= 1).
        seed: the resampling's seed.
        trec_qrels: the judgements of TREC runs; None: no TREC run.
    """
    import sys
    import time

    start = time.perf_counter()
    for option, value in (("--samples", samples), ("--permutations", permutations)):
        if value < 1:
            raise UsageError(f"{option} {value}: expected a whole number >= 1 (fix: e.g. "
                             f"{option} {sig.BOOTSTRAP_SAMPLES if option == '--samples' else sig.PERMUTATIONS})")
    result = compare_settings(load_settings(specs, trec_qrels), metrics=metrics, pairs=pairs,
                              samples=samples, permutations=permutations, seed=seed)
    text = markdown(result)
    sys.stderr.write(text)
    result["markdown"] = text
    if output:
        out = Path(output)
        write_text(out, text)
        write_text(out.with_suffix(".json"), json.dumps(
            {k: v for k, v in result.items() if k != "markdown"}, indent=2) + "\n")
        result["files"] = [str(out), str(out.with_suffix(".json"))]
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result

