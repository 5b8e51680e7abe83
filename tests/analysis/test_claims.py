"""Claims: figures computed from records, the tables rendered from them, and the checks that
keep a typed figure out of the summaries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval_qa.analysis import claims as C
from retrieval_qa.analysis import results_tables as T
from retrieval_qa.data import Candidate, RetrievalPool
from retrieval_qa.errors import InputFileError
from retrieval_qa.evaluation import ledger
from retrieval_qa.evaluation.per_question import write_per_question

POOL = RetrievalPool("toy", "test", [Candidate(f"c{i}", f"s{i}", "", f"d{i}") for i in range(8)],
                     questions=["q0", "q1", "q2", "q3"], gold=[[0], [1], [2], [3]])


def _record(path: Path, ranks) -> Path:
    return write_per_question(path, POOL, np.asarray(ranks, dtype=np.float64), None, (1, 5))


@pytest.fixture
def study(tmp_path) -> Path:
    """results/toy/ with two seeds of two settings, a report and a times file."""
    results = tmp_path / "results"
    folder = results / "toy"
    folder.mkdir(parents=True)
    for name, ranks in (("a1", [1, 2, 4, 1]), ("a2", [1, 1, 4, 2]),
                        ("b1", [1, 1, 1, 2]), ("b2", [1, 1, 3, 1])):
        _record(folder / f"{name}.questions.jsonl.gz", ranks)
    (folder / "report.json").write_text(json.dumps({"runs": [
        {"name": "x", "test": {"mrr": 10.0}}, {"name": "x", "test": {"mrr": 12.0}},
        {"name": "y", "test": {"mrr": 99.0}}]}))
    (folder / "times.tsv").write_text("step\tseconds\nfit\t60\ntest\t30\n")
    (folder / "claims.yaml").write_text("""\
study: toy
title: A toy study
summary: "B scores {b}, {gain} over A"
claims:
  - id: a
    what: setting A
    figure: {kind: mean, metric: mrr, records: [a1.questions.jsonl.gz, a2.questions.jsonl.gz]}
    seeds: [1, 2]
    rule: the validation's best
    family: toy
    command: rqa evaluate A
  - id: b
    what: setting B
    figure: {kind: mean, metric: mrr, records: [b1.questions.jsonl.gz, b2.questions.jsonl.gz]}
    seeds: [1, 2]
    family: toy
  - id: gain
    what: B minus A
    figure: {kind: paired, metric: mrr, a: [a1.questions.jsonl.gz, a2.questions.jsonl.gz],
             b: [b1.questions.jsonl.gz, b2.questions.jsonl.gz]}
  - id: x
    what: a report's runs
    figure: {kind: json, pool: toy/test, files: [report.json], list: runs, where: {name: x},
             key: test.mrr}
  - id: time
    what: minutes
    figure: {kind: sum, file: times.tsv, column: seconds, scale: 0.0166666667, digits: 1,
             unit: " min"}
""")
    (folder / "README.md").write_text("# Toy\n\n<!-- claims:toy -->\n<!-- /claims -->\n\n"
                                      "<!-- claims:looks:toy -->\n<!-- /claims -->\n")
    for name in ("a1", "a2", "b1", "b2"):
        r = C.read_record(folder / f"{name}.questions.jsonl.gz")
        ledger.record(dataset="toy", pool="test", metrics=r.metrics(), questions=4,
                      kind="evaluate", name=name[0], family="toy", seed=int(name[1]),
                      ranks=r.ranks, path=results / "ledger.jsonl")
    return results


def test_figures_from_records(study):
    (s,) = C.load_studies(study)
    figures = {c.id: C.compute(c) for c in s.claims}
    a = [100 * np.mean(1 / np.array(r, float)) for r in ([1, 2, 4, 1], [1, 1, 4, 2])]
    assert figures["a"].value == pytest.approx(np.mean(a), abs=1e-9)
    assert figures["a"].interval[1] == pytest.approx(np.std(a, ddof=1), abs=1e-9)
    assert figures["a"].text == f"{np.mean(a):.2f} ± {np.std(a, ddof=1):.2f}"
    assert figures["gain"].text.startswith("+") and figures["gain"].interval[0] == "ci"
    assert figures["x"].text == "11.00 ± 1.41"
    assert figures["time"].text == "1.5 min"
    assert (figures["a"].pool, figures["a"].questions) == ("toy/test", 4)


def test_render_then_check(study, tmp_path):
    repo = tmp_path
    for name in ("README.md", "docs/results.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("<!-- claims:overview -->\n<!-- /claims -->\n"
                                 "<!-- claims:toy -->\n<!-- /claims -->\n")
    assert T.render(study, repo, write=True)  # the first render fills the blocks
    assert T.render(study, repo, write=False) == {}
    readme = (study / "toy" / "README.md").read_text()
    assert "| setting A |" in readme and "| the validation's best | 2 |" in readme
    assert "| toy/test | a | 1, 2 | 2 |" in readme
    overview = (repo / "README.md").read_text()
    assert "B scores" in overview and "{b}" not in overview
    # a digit changed by hand is found, and rendering puts it back
    text = readme.replace(C.compute(C.load_studies(study)[0].claims[0]).text, "99.99 ± 0.01")
    (study / "toy" / "README.md").write_text(text)
    assert "results/toy/README.md" in T.render(study, repo, write=False)


def test_stray_figures(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Python 3.11 and SQuAD v1.1 are versions; `lr=1e-4` is code.\n"
                    "<!-- claims:x -->\n| 12.34 |\n<!-- /claims -->\n"
                    "But 76.17 here, 3.06x there, 26 % and 8 min are typed figures.\n")
    assert [f.split(": ")[1] for f in T.stray_figures(page)] == ["76.17", "3.06x", "26 %",
                                                                 "8 min"]


def test_bad_claims(study):
    path = study / "toy" / "claims.yaml"
    text = path.read_text()
    path.write_text(text.replace("b2.questions", "missing.questions", 1))
    with pytest.raises(InputFileError, match="no committed record"):
        C.load_studies(study)
    path.write_text(text.replace("    family: toy\n    command: rqa evaluate A\n",
                                 "    family: toy\n    subset: half\n    goal: 90\n", 1))
    with pytest.raises(InputFileError, match="a goal is set on the whole pool"):
        C.load_studies(study)
    path.write_text(text.replace("kind: sum", "kind: median"))
    with pytest.raises(InputFileError, match="figure kind 'median'"):
        C.load_studies(study)


def test_a_subset_must_say_so(study):
    (s,) = C.load_studies(study)
    claim = s.claims[0]
    figure = C.compute(claim)
    figure.pool, figure.questions = "reqa_squad/dev", 1000
    with pytest.raises(ValueError, match="say `subset:`"):
        C.pool_text(claim, figure)
    claim.subset = "1,000 questions drawn with seed 0"
    assert "subset: 1,000 questions" in C.pool_text(claim, figure)


def test_summary_length(study):
    (s,) = C.load_studies(study)
    s.summary = " ".join(["word"] * (T.SUMMARY_WORDS + 1))
    with pytest.raises(ValueError, match="shorten it"):
        T.summary_text(s)
