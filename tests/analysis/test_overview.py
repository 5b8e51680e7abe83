"""results/ beside the papers' numbers: tables, evaluations and training reports are read,
seeds grouped, paper numbers attached from conf/tables, missing paper rows listed."""

from __future__ import annotations

import json

from retrieval_qa.analysis.overview import collect_results, grouped, markdown, plot_table


def write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_collect_results_reads_every_kind_of_file(tmp_path):
    write(tmp_path / "endx" / "table4.json", {"rows": [
        {"model": "Dual-BERTs", "mrr": {"mean": 60.0, "std": 1.0, "n": 3}, "r@1": 50.0}]})
    write(tmp_path / "table2" / "BM25-dev.json", {"metrics": {"mrr": 70.0, "r@1": 60.0},
                                                  "dataset": "reqa_squad", "pool": "dev"})
    write(tmp_path / "table2" / "BM25-train.json", {"metrics": {"mrr": 50.0},
                                                    "dataset": "reqa_squad", "pool": "train"})
    for seed, mrr in ((1, 40.0), (2, 44.0)):
        write(tmp_path / "gpu" / f"s{seed}" / "result.json", {
            "experiment": "dual_gru", "profile": "gpu", "seed": seed,
            "test": {"metrics": {"mrr": mrr, "r@1": 30.0, "r@5": 50.0}}})
    write(tmp_path / "copy" / "result.json", {  # the same run kept twice
        "experiment": "dual_gru", "profile": "gpu", "seed": 1,
        "test": {"metrics": {"mrr": 40.0, "r@1": 30.0, "r@5": 50.0}}})
    write(tmp_path / "other" / "result.json", {"experiment": "fcrr", "profile": "cpu",
                                               "last_val": {"val/r@1": 19.0}})
    write(tmp_path / "endx" / "runs" / "table4" / "Dual-BERTs" / "dual_gru-seed3" / "result.json",
          {"experiment": "dual_gru", "profile": "gpu", "seed": 3,  # a table's per-run file
           "test": {"metrics": {"mrr": 99.0, "r@1": 30.0, "r@5": 50.0}}})
    (tmp_path / "broken.json").write_text("{")
    entries = collect_results(tmp_path)
    get = {(e["table"], e["method"], e["metric"]): e for e in entries}
    t4 = get[("endx_table4", "Dual-BERTs", "mrr")]
    assert (t4["ours"], t4["spread"], t4["runs"], t4["paper"]) == (60.0, 1.0, 3, 60.19)
    # evaluations name their pool; both pools of conf/tables/endx_table2.yaml's `pools` sit
    # beside the paper's number (whose pool the figure's legend states)
    assert get[("endx_table2", "BM25 (dev pool)", "mrr")]["paper"] == 52.96
    assert get[("endx_table2", "BM25 (train pool)", "mrr")]["paper"] == 52.96
    gru = get[("endx_table2", "Dual-GRUs (gpu profile)", "mrr")]
    assert (gru["ours"], gru["runs"], gru["paper"]) == (42.0, 2, 55.24)
    assert round(gru["spread"], 4) == 2.8284
    assert get[(None, "fcrr (cpu profile) [val]", "r@1")]["ours"] == 19.0
    quoted = get[("endx_table2", "USE-QA (quoted)", "mrr")]
    assert quoted["ours"] is None and quoted["paper"] == 61.23
    assert list(grouped(entries))[-1] is None
    text = markdown(entries)
    assert "| Dual-GRUs (gpu profile) | mrr | 42.00 ± 2.83 | 2 | 55.24 |" in text
    fig = plot_table(entries, "endx_table2")
    assert len(fig.axes) == 3
    assert [ax.get_xlabel() for ax in fig.axes] == ["MRR (%)", "R@1 (%)", "R@5 (%)"]
    assert fig.axes[0].get_ylabel().startswith("method")
    assert not any(ax.get_legend() for ax in fig.axes)  # below the panels, over no bar
    (legend,) = fig.legends
    assert "its pool: dev per the ENDX paper" in legend.get_texts()[1].get_text()


def test_one_method_from_two_files_is_labelled_apart(tmp_path):
    """Dual-BERTs of a seeds table and of a single evaluation, both on dev: two bars, labelled
    by profile and seeds; a pool a paper table is not about stays out of it."""
    write(tmp_path / "endx" / "seeds.json", {"table": "endx_table2", "rows": [
        {"name": "Dual-BERTs", "profile": "cpu", "seeds": [1, 2, 3], "test_pool": "reqa_squad/dev",
         "mrr": {"mean": 71.8, "std": 0.1, "n": 3}},
        {"name": "ENDX-BERTs", "profile": "cpu", "seeds": [1, 2, 3], "mrr": 68.0}]})
    write(tmp_path / "table2" / "Dual-BERTs-dev.json", {
        "metrics": {"mrr": 72.8}, "dataset": "reqa_squad", "pool": "dev",
        "training": {"experiment": "dual_bert", "profile": "cpu", "seed": 42}})
    write(tmp_path / "table2" / "BM25-test.json", {"metrics": {"mrr": 50.0},
                                                   "dataset": "multireqa_squad", "pool": "test"})
    entries = collect_results(tmp_path)
    ours = {e["method"]: e for e in entries if e["metric"] == "mrr" and e["ours"] is not None}
    assert set(ours) == {"Dual-BERTs (cpu profile, 3 seeds, dev pool)",
                         "Dual-BERTs (cpu profile, seed 42, dev pool)",
                         "ENDX-BERTs (cpu profile, 3 seeds)", "BM25 (test pool)"}
    assert ours["Dual-BERTs (cpu profile, seed 42, dev pool)"]["paper"] == 71.06
    assert ours["BM25 (test pool)"]["table"] is None


def test_old_pool_tables_leave_the_paper_table_and_declared_references_join_it(tmp_path):
    """results/endx/side_by_side.json ran on the pools of the splitter before the reference
    splitter: shown apart, marked; the rows' `reference:` (conf/tables) are Table 2's, marked
    when their settings are not the profile's."""
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    for rel in ("endx/side_by_side.json", "endx/confounds/sweep_table_dual_minilm.json",
                *(f"endx/records/dual_gru_seed{s}.questions.jsonl.gz" for s in (1, 2, 3))):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / "results" / rel, tmp_path / rel)
    get = {(e["table"], e["method"], e["metric"]): e for e in collect_results(tmp_path)}
    gru = get[("endx_table2", "Dual-GRUs", "mrr")]
    assert (round(gru["ours"], 2), round(gru["spread"], 2), gru["runs"]) == (20.58, 0.95, 3)
    assert gru["source"] == "endx/records/dual_gru_seed{1,2,3}.questions.jsonl.gz"
    assert round(get[("endx_table2", "ENDX-BERTs [other settings]", "mrr")]["ours"], 2) == 67.60
    old = get[(None, "Dual-GRUs [old pools]", "mrr")]
    assert (old["ours"], old["source"]) == (21.2574, "endx/side_by_side.json")
    assert not any(e["table"] == "endx_table2" and e["source"] == "endx/side_by_side.json"
                   for e in get.values())
