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
    assert get[("endx_table2", "BM25", "mrr")]["paper"] == 52.96
    assert get[(None, "BM25 (train pool)", "mrr")]["paper"] is None
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
