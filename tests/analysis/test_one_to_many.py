"""Table 4 / Figure 2: subset sizes and nesting on a hand-made pool; the command end to end."""

from __future__ import annotations

import json

import pytest
from helpers import eval_conf

from retrieval_qa.data import load_pool
from retrieval_qa.data.types import Candidate, QAPair, RetrievalPool
from retrieval_qa.evaluation.dense import evaluate_model
from retrieval_qa.models.artifact import load_artifact
from retrieval_qa.models.inference import DualEncoderInference


def hand_pool() -> RetrievalPool:
    """Answer sentence s0 has 8 questions, s1 has 5, s2 has 2, s3 has 1; question "shared"
    asks both s1 and s3 (one question, two answer sentences)."""
    cands = [Candidate(f"s{i}", f"sentence {i}", "ctx", "p0") for i in range(5)]
    pairs = []
    for cid, n in (("s0", 8), ("s1", 4), ("s2", 2)):
        pairs += [QAPair(f"q{cid}-{j}", f"sentence {cid[1]}", "ctx", f"{cid}-{j}", cid)
                  for j in range(n)]
    pairs += [QAPair("shared", "sentence 1", "ctx", "x1", "s1"),
              QAPair("shared", "sentence 3", "ctx", "x2", "s3")]
    questions = list(dict.fromkeys(p.question for p in pairs))
    gold = [sorted({int(p.answer_id[1]) for p in pairs if p.question == q}) for q in questions]
    return RetrievalPool("hand", "dev", cands, questions, gold, pairs)


def test_subset_sizes_and_nesting():
    from retrieval_qa.analysis.one_to_many import subset_rows

    pool = hand_pool()
    rows = subset_rows(pool, range(1, 9))
    sizes = {k: r["sizes"]["questions"] for k, r in rows.items()}
    # 15 questions; s1 has 5 questions (4 + "shared"); s3 only 1, but "shared" is kept via s1
    assert sizes == {1: 15, 2: 15, 3: 13, 4: 13, 5: 13, 6: 8, 7: 8, 8: 8}
    assert {k: r["sizes"]["answer_sentences"] for k, r in rows.items()} == {
        1: 4, 2: 3, 3: 2, 4: 2, 5: 2, 6: 1, 7: 1, 8: 1}
    for k in range(1, 8):
        assert set(rows[k + 1]["rows"]) <= set(rows[k]["rows"])
        assert [pool.questions[i] for i in rows[k]["rows"]] == rows[k]["pool"].questions
        assert rows[k]["pool"].candidates == pool.candidates


def test_one_to_many_end_to_end(env, tmp_path, rqa, assert_png, monkeypatch):
    calls = []
    original = DualEncoderInference.encode_questions

    def counting(self, texts, *a, **kw):
        calls.append(len(texts))
        return original(self, texts, *a, **kw)

    monkeypatch.setattr(DualEncoderInference, "encode_questions", counting)
    out = rqa("analyze", "one-to-many", "--model", f"Dual-GRUs={env.dual['checkpoint']}",
              "--model", f"ENDX-GRUs={env.endx['checkpoint']}",
              "--model", f"ENDX-GRUs={env.endx['checkpoint']}",  # a second "seed"
              "--data-dir", env.data, "--pool", "dev", "--output-dir", tmp_path, "--quiet")
    assert len(calls) == 2  # each folder encodes its questions once for all k
    assert out["analysis"] == "one-to-many"
    assert out["subset_sizes"]["1"]["questions"] == 25 and out["subset_sizes"]["8"] == {
        "questions": 9, "qa_pairs": 9, "answer_sentences": 1}
    for name in ("table4.md", "table4.json", "one_to_many.md", "one_to_many.json",
                 "figure2.png"):
        assert (tmp_path / name).is_file(), name
    assert_png(tmp_path / "figure2.png")
    t4 = json.loads((tmp_path / "table4.json").read_text())
    assert [r["model"] for r in t4["rows"]] == ["Dual-GRUs", "ENDX-GRUs"]
    endx = t4["rows"][1]
    # exact: the same folder twice, the same computation
    assert endx["runs"] == 2 and endx["mrr"]["n"] == 2 and endx["mrr"]["std"] == 0.0
    assert 0 < endx["mrr"]["mean"] <= 100
    md = (tmp_path / "table4.md").read_text()
    assert "| Dual-GRUs |" in md and "| ENDX-GRUs |" in md and "9 questions" in md
    full = json.loads((tmp_path / "one_to_many.json").read_text())
    assert len(full["rows"]) == 2 * 8 and full["ks"] == list(range(1, 9))
    k1 = next(r for r in full["rows"] if r["model"] == "Dual-GRUs" and r["k"] == 1)
    # k = 1 is the whole pool: rqa evaluate --checkpoint's MRR, the same computation (the
    # same encoding batches and scores, not the training's test): equal up to the rounding
    pool, _ = load_pool("reqa_squad", "dev", env.data)
    whole = evaluate_model(load_artifact(env.dual["checkpoint"]), pool, batch_size=128,
                           progress=False, **eval_conf())
    assert k1["mrr"]["mean"] == pytest.approx(whole.metrics["mrr"], abs=1e-4)
