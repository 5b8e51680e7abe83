"""The papers' tables live in conf/tables/ only; the analyses and experiment scripts read them."""

from __future__ import annotations

import pytest

from retrieval_qa.analysis.ablation import GAM_TERMS, TERM_LABELS, ablation_variants
from retrieval_qa.analysis.common import paper_table, paper_table_rows
from retrieval_qa.config import conf_dir
from retrieval_qa.losses.gam import RELATION_NAMES

TABLES = sorted(p.stem for p in (conf_dir() / "tables").glob("*.yaml"))


@pytest.mark.parametrize("name", TABLES)
def test_every_table_has_a_title_and_named_rows(name):
    rows = paper_table_rows(name)
    assert rows and all(r["name"] for r in rows)
    assert len({r["name"] for r in rows}) == len(rows)


def test_endx_tables_4_to_6():
    assert set(TABLES) >= {"endx_table2", "endx_table4", "endx_table5", "endx_table6"}
    assert paper_table("endx_table4")["ENDX-BERTs"] == {"mrr": 64.93, "r@1": 52.23, "r@5": 81.36}
    assert paper_table("endx_table6")["BERTQA"]["ms"] == 6939.61
    t5 = paper_table("endx_table5")
    assert list(t5)[:2] == ["Dual-BERTs", "ENDX-BERTs"]


def test_table5_removes_each_gam_relation_once():
    assert sorted(GAM_TERMS) == sorted(RELATION_NAMES)
    assert [v["name"] for v in ablation_variants()] == list(paper_table("endx_table5"))[2:]
    assert TERM_LABELS["qa"] == "L_q|a"


def test_residual_tables_9_and_10():
    t9, t10 = paper_table("residual_table9"), paper_table("residual_table10")
    assert t9["FCRR"] == {"r@1": 40.5, "avg_recall": 64.3}
    assert t10["Only ELMo"] == {"r@1": 6.7, "avg_recall": 22.5}
    assert t10["FCRR + ConvRR + fine-tuned question embed."]["r@1"] == 14.65
