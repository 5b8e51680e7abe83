"""What README.md, docs/results.md and every results/*/README.md state is what the committed
records give: every generated table recomputed from its records, no typed figure outside them,
every summary short, and every look of the committed ledger that names a record matches it."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_qa.analysis import claims as C
from retrieval_qa.analysis import results_tables as T
from retrieval_qa.evaluation import ledger

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
SUMMARIES = [REPO / "README.md", REPO / "docs" / "results.md",
             *sorted((REPO / "docs" / "papers").glob("*.md")),
             *sorted(RESULTS.glob("*/README.md"))]


def test_every_table_is_what_its_records_give():
    """A changed digit, a figure whose record is gone or a look count that the ledger does not
    give fails here (fix: `rqa results` rewrites the tables)."""
    assert T.render(RESULTS, REPO, write=False) == {}


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_figure_without_a_record(path):
    assert T.stray_figures(path) == [], (
        f"{path.relative_to(REPO)}: figures typed outside the generated tables; give each a "
        "claim in results/<study>/claims.yaml or move it to the study's NOTES.md")


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*/README.md")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_study_summaries_are_short(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 150


def test_every_study_has_claims():
    with_claims = {p.parent.name for p in RESULTS.glob(f"*/{C.CLAIMS_FILE}")}
    readmes = {p.parent.name for p in RESULTS.glob("*/README.md")}
    assert readmes <= with_claims, f"studies without claims.yaml: {sorted(readmes - with_claims)}"


def test_committed_looks_match_their_records():
    """Each look of results/ledger.jsonl that names a committed record has that record's
    ranks and MRR (the reconstruction of the looks behind results/ is checked, not trusted)."""
    looks = ledger.read(RESULTS / C.LEDGER)
    named = [e for e in looks if e.get("record")]
    assert named
    for e in named:
        record = C.read_record(REPO / e["record"])
        assert ledger.ranks_digest(record.ranks) == e["ranks"], e["record"]
        assert record.metrics()["mrr"] == pytest.approx(e["metrics"]["mrr"], abs=1e-4)
        assert ledger.is_test_pool(e["dataset"], e["pool"])


def test_headlines_name_their_rule():
    for study in C.load_studies(RESULTS):
        for c in study.claims:
            if c.family and c.figure["kind"] != "paired":
                assert c.rule, f"{c.key}: a headline names the rule that chose it"
