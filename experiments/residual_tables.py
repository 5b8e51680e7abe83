"""The residual-embedding paper's tables on this repository (results/residual/):

frozen static word vectors (GloVe 6B 50d, spaCy md 300d) with and without IDF on SQuAD dev
paragraph retrieval (Tables 3-4, 7; the paper's GloVe 840B 300d and ELMo rows beside them),
MiniLM's layers standing in for ELMo (Table 2, Tables 5-7; ``--contextual``), the same static
embeddings on ReQA SQuAD sentence retrieval, the trained refiners (Table 9 layout: question
side; Table 10 layout: retrieving questions from paragraphs, paragraph-side and both-sides
refiners; a quadratic-loss FCRR), with the P-R curves as one PNG. Finished rows are kept
(rows/*.json) and skipped on a rerun; every row found in rows/ is tabulated, with its number
of seeds, and ``--rows`` / ``--seeds`` say which rows to train when missing.

    python experiments/residual_tables.py [--profile cpu] [--seeds 1 2 3] [--rows fcrr ...]

The paper's numbers and the tables' layout: experiments/residual_layout.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from experiments.residual_layout import (  # noqa: E402,F401
    PAPER,
    PAPER_T2,
    PAPER_T9,
    PAPER_T10,
    PROFILE_NOTE,
    PROFILES,
    STATIC,
    TRAINED,
    _label,
    fmt_ms,
    write_tables,
)
from retrieval_qa.data.paragraphs import load_paragraph_task  # noqa: E402
from retrieval_qa.embeddings.base import task_embeddings  # noqa: E402
from retrieval_qa.embeddings.evaluate import evaluate_paragraph_task  # noqa: E402
from retrieval_qa.evaluation.paragraph_retrieval import (  # noqa: E402
    plot_pr_curves,
    precision_recall_points,
)
from retrieval_qa.portable_paths import portable  # noqa: E402

OUT = REPO / "results" / "residual"


def _write(path: Path, obj) -> None:
    """A row file, its paths named without the machine's layout (``runs/...``,
    ``$RQA_DATA_DIR/...``, ``package:...``)."""
    path.write_text(json.dumps(portable(obj), indent=1))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _have(key: str) -> bool:
    from retrieval_qa.embeddings.static import static_root

    try:
        static_root(key)
        return True
    except FileNotFoundError as e:
        log(f"skipping static:{key}: {e}")
        return False


def frozen_rows(rows: Path) -> dict:
    """{(key, idf): row} of the frozen static embeddings on the dev paragraphs; a row whose
    vectors are not installed and not already in rows/ is left out (said on stderr)."""
    out = {}
    for key in STATIC:
        for idf in (False, True):
            path = rows / f"frozen_{key}{'_idf' if idf else ''}.json"
            if not path.is_file():
                if not _have(key):
                    break
                log(f"frozen {key} idf={idf}")
                r = evaluate_paragraph_task(f"static:{key}", idf, "dev")
                r["command"] = (f"rqa evaluate --model static:{key}{' --idf' if idf else ''} "
                                "--dataset squad_paragraphs --pool dev")
                _write(path, r)
            out[key, idf] = json.loads(path.read_text())
    return out


def frozen_p2q(rows: Path, frozen: dict) -> dict:
    """Table 10's direction for the frozen embeddings: {(key, idf): metrics}."""
    from retrieval_qa.evaluation.paragraph_retrieval import evaluate_questions_from_paragraphs

    path = rows / "frozen_p2q.json"
    done = json.loads(path.read_text()) if path.is_file() else {}
    task = None
    for key, idf in frozen:
        name = f"{key}{'_idf' if idf else ''}"
        if name not in done:
            log(f"frozen {name}: questions from paragraphs")
            task = task or load_paragraph_task("dev")
            q, p, _ = task_embeddings(task, f"static:{key}", idf)
            done[name] = evaluate_questions_from_paragraphs(q, p, task.gold)
            _write(path, done)
    return {(key, idf): done[f"{key}{'_idf' if idf else ''}"] for key, idf in frozen}


def _rqa_json(args: list[str]) -> dict:
    """``rqa ARGS`` in this process; its JSON (last stdout line) with the command added."""
    import contextlib
    import io

    from retrieval_qa.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        if main(args) != 0:
            raise RuntimeError(f"rqa {' '.join(args)} failed")
    return {**json.loads(buf.getvalue().strip().splitlines()[-1]),
            "command": "rqa " + " ".join(args)}


def reqa_rows(rows: Path) -> dict:
    out = {}
    for key in STATIC:
        for idf in (False, True):
            path = rows / f"reqa_{key}{'_idf' if idf else ''}.json"
            if not path.is_file():
                if not _have(key):
                    break
                log(f"ReQA SQuAD dev, {key} idf={idf}")
                r = _rqa_json(["evaluate", "--model", f"static:{key}",
                               *(["--idf"] if idf else []), "--dataset", "reqa_squad",
                               "--pool", "dev", "--quiet"])
                _write(path, r)
            out[key, idf] = json.loads(path.read_text())
    return out


def layer_grid(step: float = 0.25) -> list[tuple[str, list[float]]]:
    """Table 2 for MiniLM's 7 layers: each layer alone, all equal (the paper's "ELMo" row),
    and a grid over (token layer a, hidden layer 3 b, hidden layer 6 c), a + b + c = 1."""
    rows = [(f"layer {j}" + (" (token layer)" if j == 0 else ""),
             [1.0 if i == j else 0.0 for i in range(7)]) for j in range(7)]
    rows.append(("all layers equal (ELMo-style)", [1 / 7] * 7))
    n = round(1 / step)
    for i in range(n + 1):
        for k in range(n + 1 - i):
            a, b = i * step, k * step
            c = round(1 - a - b, 6)
            if max(a, b, c) < 1:
                w = [0.0] * 7
                w[0], w[3], w[6] = a, b, c
                rows.append((f"a={a:g}, b(l3)={b:g}, c(l6)={c:g}", w))
    return rows


def contextual_rows(rows: Path) -> dict:
    """MiniLM (standing in for ELMo): Table 2 grid with and without IDF, then the best
    weights' recall@k and AP (Tables 5-6)."""
    from retrieval_qa.embeddings.base import contextual_task_layers
    from retrieval_qa.embeddings.contextual import combine_layers
    from retrieval_qa.evaluation.paragraph_retrieval import evaluate_paragraphs

    path = rows / "minilm_layers.json"
    if path.is_file():
        return json.loads(path.read_text())
    task = load_paragraph_task("dev")
    log("MiniLM layers of the dev task (encoding, cached)")
    t = time.perf_counter()
    layers, meta = contextual_task_layers(task, progress=False)
    encode_s = time.perf_counter() - t
    out = {"checkpoint": meta.get("checkpoint"), "cache": meta["cache"],
           "encode_seconds": round(encode_s, 1), "notes": {k: meta.get(k) for k in
                                                           ("questions", "paragraphs")},
           "grid": {}, "best": {}}
    for side in ("plain", "idf"):
        grid = []
        for name, w in layer_grid():
            m = evaluate_paragraphs(combine_layers(layers[f"q_{side}"], w),
                                    combine_layers(layers[f"p_{side}"], w), task.gold,
                                    with_ap=False)
            grid.append({"row": name, "weights": w, "r@1": m["r@1"],
                         "avg_recall": m["avg_recall"]})
        out["grid"][side] = grid
        best = max(grid, key=lambda g: g["r@1"])
        q = combine_layers(layers[f"q_{side}"], best["weights"])
        p = combine_layers(layers[f"p_{side}"], best["weights"])
        out["best"][side] = {"row": best["row"], "weights": best["weights"],
                             "metrics": evaluate_paragraphs(q, p, task.gold),
                             "pr": precision_recall_points(q, p, task.gold)}
    _write(path, out)
    return out


def trained_rows(rows: Path, names, seeds, profile, runs_dir) -> dict:
    """Every trained row in rows/, of every profile ({(name, profile): [report per seed]},
    the paper profile first); the rows of ``names`` are trained first, in ``profile``, for
    the ``seeds`` they lack."""
    from retrieval_qa.training.compose import compose_traced
    from retrieval_qa.training.run import train

    for name in names:
        _, experiment, extra = TRAINED[name]
        for seed in seeds:
            path = rows / f"{name}_{profile}_seed{seed}.json"
            command = "rqa train " + " ".join(
                [f"experiment={experiment}", f"profile={profile}", f"seed={seed}", *extra])
            if path.is_file():  # kept only when trained with the row's settings of now
                old = json.loads(path.read_text()).get("command")
                if old != command:
                    raise SystemExit(f"{path}: trained as `{old}`, but the row is now "
                                     f"`{command}`; delete the file to train the row again")
                continue
            log(f"train {name} seed {seed} ({profile})")
            report = train(compose_traced([
                f"experiment={experiment}", f"profile={profile}", f"seed={seed}",
                f"output_dir={runs_dir / name}", "resume=never", *extra]))
            report["command"] = command
            _write(path, report)
    out: dict = {}
    for name in TRAINED:
        for kind in PROFILES:
            found = sorted(rows.glob(f"{name}_{kind}_seed*.json"),
                           key=lambda f: int(f.stem.rsplit("seed", 1)[1]))
            if found:
                out[name, kind] = [json.loads(f.read_text()) for f in found]
    return out


def reqa_refined_rows(rows: Path, trained: dict, compute: bool = True) -> dict:
    """ReQA SQuAD dev sentence retrieval through each trained row's exported refiners
    (questions by the question side, candidate sentences by the paragraph side), one file per
    seed; missing files are computed (``compute``) where the run's model folder is still on
    disk."""
    out: dict = {}
    for (name, profile), reports in trained.items():
        found = []
        for report in reports:
            path = rows / f"reqa_{name}_{profile}_seed{report['seed']}.json"
            folder = REPO / report.get("checkpoint", "-")
            if compute and not path.is_file() and (folder / "refiners.pt").is_file():
                data = report["data"]
                log(f"ReQA SQuAD dev through {name} ({profile}, seed {report['seed']})")
                _write(path, _rqa_json(
                    ["evaluate", "--model", data["embedding"],
                     *(["--idf"] if data["idf"] else []), "--dataset", "reqa_squad",
                     "--pool", "dev", "--refiner", str(folder), "--quiet"]))
            if path.is_file():
                found.append(json.loads(path.read_text()))
        if found:
            out[name, profile] = found
    return out


def refined_curve(report: dict):
    """P-R points of a trained row's refined dev vectors (its best checkpoint)."""
    from retrieval_qa.models.residual import ResidualRefinementModule

    task = load_paragraph_task("dev")
    data = report["data"]
    q, p, _ = task_embeddings(task, data["embedding"], data["idf"])
    module = ResidualRefinementModule.from_checkpoint(report["best_training_checkpoint"]).eval()
    with torch.no_grad():
        return precision_recall_points(module.refine_questions(q),
                                       module.refine_paragraphs(p), task.gold)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--rows", nargs="*", default=["fcrr", "convrr", "fcrr_convrr"],
                    choices=list(TRAINED))
    ap.add_argument("--runs-dir", default="runs/residual")
    ap.add_argument("--contextual", action="store_true",
                    help="also MiniLM's layers (Table 2 grid, Tables 5-6): ~5+ min on 1 CPU")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = OUT / "rows"
    rows.mkdir(parents=True, exist_ok=True)
    frozen = frozen_rows(rows)
    p2q = frozen_p2q(rows, frozen)
    reqa = reqa_rows(rows)
    trained = trained_rows(rows, args.rows, args.seeds, args.profile, Path(args.runs_dir))
    contextual = contextual_rows(rows) if args.contextual or \
        (rows / "minilm_layers.json").is_file() else None
    reqa_refined = reqa_refined_rows(rows, trained)
    (OUT / "tables.md").write_text(write_tables(frozen, p2q, reqa, trained, contextual,
                                                reqa_refined))
    log("P-R curves")
    task = load_paragraph_task("dev")
    curves = {}
    for key, idf in frozen:
        q, p, _ = task_embeddings(task, f"static:{key}", idf)
        curves[_label(key, idf)] = (*precision_recall_points(q, p, task.gold),
                                    frozen[key, idf]["metrics"]["ap"])
    if contextual:
        for side, label in (("plain", "MiniLM"), ("idf", "MiniLM w/ IDF")):
            best = contextual["best"][side]
            curves[f"{label} ({best['row']})"] = (*best["pr"], best["metrics"]["ap"])
    drawn = set()
    for (name, profile), reports in trained.items():   # one curve per row, paper profile first
        first = reports[0]
        if name not in drawn and first.get("best_training_checkpoint") and \
                Path(first["best_training_checkpoint"]).is_file():
            drawn.add(name)
            curves[f"{TRAINED[name][0]} ({profile}, seed {first['seed']})"] = (
                *refined_curve(first), first["test"]["ap"])
    plot_pr_curves(curves, OUT / "pr_curves.png", "SQuAD dev paragraph retrieval")
    log(f"wrote {OUT / 'tables.md'} and {OUT / 'pr_curves.png'}")
    print(json.dumps({"tables": str(OUT / "tables.md"), "png": str(OUT / "pr_curves.png")}))


if __name__ == "__main__":
    main()
