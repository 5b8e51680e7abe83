"""`rqa compare` on per-question records, run files, run folders and sweep folders made here."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval_qa.analysis.compare import compare_settings, load_settings
from retrieval_qa.cli import main
from retrieval_qa.data.types import Candidate, RetrievalPool
from retrieval_qa.evaluation.per_question import read_per_question, write_per_question

N = 300


def pool(n=N):
    cands = [Candidate(f"c{i}", "a b c " * (1 + i % 5), f"d{i}", "ctx") for i in range(n)]
    return RetrievalPool("toy", "dev", cands, [f"{('What', 'Who')[i % 2]} {i}?"
                                               for i in range(n)], [[i] for i in range(n)])


def record(path, seed, shift=0.0, n=N):
    """Ranks 1..20 at random; ``shift`` > 0 moves a share of the questions to rank 1."""
    rng = np.random.default_rng(seed)
    ranks = rng.integers(1, 21, n).astype(float)
    ranks[rng.random(n) < shift] = 1.0
    return write_per_question(path, pool(n), ranks, ranks, (1, 5, 10))


def test_compare_command_finds_a_real_difference_and_not_a_null_one(tmp_path, capsys):
    a, b, c = (record(tmp_path / f"{x}.jsonl.gz", s, sh)
               for x, s, sh in (("a", 1, 0.0), ("b", 2, 0.5), ("c", 1, 0.0)))
    assert main(["compare", f"A={a}", f"B={b}", f"C={c}", "--output",
                 str(tmp_path / "cmp.md")]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ab, ac = out["comparisons"]
    assert (ab["a"], ab["b"], ac["b"]) == ("A", "B", "C")
    assert ab["metrics"]["mrr"]["p_holm"] < 0.01 and ab["metrics"]["mrr"]["ci95"][0] > 0
    assert ab["metrics"]["mrr"]["diff"] == pytest.approx(
        read_per_question(b).metrics()["mrr"] - read_per_question(a).metrics()["mrr"])
    assert ac["metrics"]["mrr"]["p"] == 1.0 and ac["metrics"]["mrr"]["ci95"] == [0.0, 0.0]
    assert (ac["wins"], ac["ties"], ac["losses"]) == (0, N, 0)
    assert ab["wins"] + ab["ties"] + ab["losses"] == N
    assert out["metrics"] == ["mrr", "r@1", "r@5", "r@10", "doc_mrr"]
    md = (tmp_path / "cmp.md").read_text()
    assert "| A | B | mrr |" in md and json.loads((tmp_path / "cmp.json").read_text())
    # the same call gives the same numbers (fixed seeds)
    assert main(["compare", f"A={a}", f"B={b}", f"C={c}"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["comparisons"] == out["comparisons"]


def test_seeds_are_averaged_per_question_and_tested_at_seed_level(tmp_path):
    specs = [f"Base={record(tmp_path / f'b{s}.jsonl.gz', s)}" for s in (1, 2, 3)]
    specs += [f"New={record(tmp_path / f'n{s}.jsonl.gz', 10 + s, 0.3)}" for s in (1, 2, 3)]
    settings = load_settings(specs)
    assert [(s.name, len(s.records)) for s in settings] == [("Base", 3), ("New", 3)]
    out = compare_settings(settings, metrics=["mrr"])
    row = out["comparisons"][0]
    st = row["metrics"]["mrr"]["seed_test"]
    assert (row["seeds_a"], row["seeds_b"], st["n_a"], st["n_b"]) == (3, 3, 3, 3)
    means = [np.mean([r.metrics()["mrr"] for r in s.records]) for s in settings]
    assert row["metrics"]["mrr"]["diff"] == pytest.approx(means[1] - means[0])
    assert st["welch_p"] < 0.05 and st["permutation_relabellings"] == 20
    # 3 seeds against 3: the exact permutation test cannot go below 2 / 20
    assert st["permutation_p"] >= st["permutation_p_min"] == pytest.approx(0.1)
    assert "mean over its setting's seeds" in out["question_scores"]
    from retrieval_qa.analysis.compare import markdown

    md = markdown(out)
    assert "mean over its setting's seeds" in md and "min 0.1; n=3,3" in md


def test_run_folders_sweep_folders_and_run_files(tmp_path):
    for label, seed, shift in (("base", 1, 0.0), ("base", 2, 0.0), ("better", 3, 0.4)):
        run = tmp_path / "sweep" / label / "dual" / f"cpu-seed{seed}"
        run.mkdir(parents=True)
        (run / "sweep.json").write_text(json.dumps({"label": label, "index": seed}))
        (run / "result.json").write_text("{}")
        record(run / "per_question.jsonl.gz", seed, shift)
    settings = load_settings([str(tmp_path / "sweep")])
    assert [(s.name, len(s.records)) for s in settings] == [("base", 2), ("better", 1)]
    one = load_settings([str(tmp_path / "sweep" / "base" / "dual" / "cpu-seed1"),
                         str(tmp_path / "sweep" / "better" / "dual" / "cpu-seed3")])
    assert [s.name for s in one] == ["cpu-seed1", "cpu-seed3"]
    run_file = tmp_path / "r.jsonl"
    run_file.write_text("".join(json.dumps({"question": q, "gold_rank": 2.0}) + "\n"
                                for q in pool().questions))
    both = compare_settings(load_settings(
        [str(run_file), str(tmp_path / "sweep" / "base" / "dual" / "cpu-seed1")]))
    assert both["comparisons"][0]["metrics"]["mrr"]["a"] == pytest.approx(50.0)
    assert "doc_mrr" not in both["metrics"]  # the run file has no doc ranks


def test_unpaired_or_missing_inputs_are_clear_errors(tmp_path, capsys):
    a = record(tmp_path / "a.jsonl.gz", 1)
    short = record(tmp_path / "s.jsonl.gz", 1, n=N - 1)
    assert main(["compare", str(a), str(short)]) == 2
    assert "not the same questions" in capsys.readouterr().err
    assert main(["compare", str(a)]) == 2
    assert "at least two settings" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(tmp_path / "empty")]) == 2
    assert "without per_question.jsonl.gz" in capsys.readouterr().err
    assert main(["compare", str(a), str(a), "--samples", "0"]) == 2
    assert "--samples 0" in capsys.readouterr().err
    assert main(["compare", f"A={a}", f"B={a}", "--metrics", "ndcg"]) == 2
    assert "--metrics ndcg" in capsys.readouterr().err


def run_file(path, questions):
    path.write_text("".join(json.dumps({"question": q, "gold_rank": 1.0 + i % 3}) + "\n"
                            for i, q in enumerate(questions)))
    return path


def test_files_of_other_questions_are_refused_even_with_the_same_count(tmp_path, capsys):
    """Run files and records pair by row; the question-text digest (and a record's pool
    fingerprint) must agree, or two pools of the same size would pair silently."""
    ours = pool().questions
    other = [f"Where {i}?" for i in range(N)]
    a = run_file(tmp_path / "a.jsonl", ours)
    b = run_file(tmp_path / "b.jsonl", other)
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "question_texts_sha1" in err and "same pool" in err
    rec = record(tmp_path / "r.jsonl.gz", 1)
    assert main(["compare", str(rec), str(b)]) == 2  # a record and a run file of another pool
    assert "question_texts_sha1" in capsys.readouterr().err
    assert main(["compare", str(rec), str(a)]) == 0  # the same questions pair
    capsys.readouterr()
    shuffled = run_file(tmp_path / "s.jsonl", ours[1:] + ours[:1])
    assert main(["compare", str(a), str(shuffled)]) == 2  # same texts, another order


def test_a_record_without_a_text_digest_pairs_by_id_with_a_warning(tmp_path, caplog):
    import gzip

    rec = record(tmp_path / "r.jsonl.gz", 1)
    lines = gzip.open(rec, "rt").read().splitlines()
    header = json.loads(lines[0])
    del header["question_texts_sha1"]
    old = tmp_path / "old.jsonl.gz"
    with gzip.open(old, "wt") as f:
        f.write("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with caplog.at_level("WARNING"):
        out = compare_settings(load_settings([str(old), str(run_file(tmp_path / "a.jsonl",
                                                                      pool().questions))]))
    assert "share no question digest" in caplog.text
    assert out["comparisons"][0]["metrics"]["mrr"]["a"] == pytest.approx(
        read_per_question(old).metrics()["mrr"])


def test_breakdown_by_question_type_and_answer_length(tmp_path):
    from retrieval_qa.analysis.breakdown import answer_bin, breakdown, question_type

    a = read_per_question(record(tmp_path / "a.jsonl.gz", 1))
    b = read_per_question(record(tmp_path / "b.jsonl.gz", 2, 0.5))
    by_type = breakdown(a, b, "qword")
    assert [r["group"] for r in by_type] == ["what", "who"]
    assert sum(r["questions"] for r in by_type) == N
    assert all(r["wins"] + r["ties"] + r["losses"] == r["questions"] for r in by_type)
    by_len = breakdown(a, b, "answer_words")  # answers of 3, 6, ..., 15 words
    assert [r["group"] for r in by_len] == ["1-10", "11-20"]
    total = sum(r["diff"] * r["questions"] for r in by_len) / N
    assert total == pytest.approx(b.metrics()["mrr"] - a.metrics()["mrr"])
    assert (question_type("in"), answer_bin(41), answer_bin(10)) == ("other", ">40", "1-10")
