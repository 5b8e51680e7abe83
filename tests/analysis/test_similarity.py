"""Figure 3: similarity matrices of ENDX cross-, ENDX dual- and baseline dual-embeddings."""

from __future__ import annotations

import json

import pytest
import torch

from retrieval_qa.analysis.similarity import resolve_run


def test_similarity_end_to_end(env, tmp_path, rqa, assert_png):
    out = rqa("analyze", "similarity", "--endx-run", env.endx_run,
              "--dual-model", env.dual["checkpoint"], "--data-dir", env.data, "--pool", "dev",
              "--output-dir", tmp_path)
    assert out["analysis"] == "similarity" and out["questions"] == 9  # the 9-question answer
    assert_png(tmp_path / "figure3.png")
    data = json.loads((tmp_path / "figure3.json").read_text())
    assert len(data["questions"]) == 9 and "Fact 0 of place 0" in data["answer"]["text"]
    assert set(data["matrices"]) == {"cross_endx", "dual_endx", "dual_baseline"}
    for key, m in data["matrices"].items():
        m = torch.tensor(m)
        assert m.shape == (9, 9), key
        assert torch.equal(m, m.T), key  # exact: symmetrised as (S + S^T) / 2
        p = torch.tensor(data["neighbour_probabilities"][key])
        assert torch.allclose(p.sum(1), torch.ones(9), atol=1e-5)
        assert (p.diag() > 0).all()  # the self pair is kept, as the model's GAM keeps it
    assert data["gam_exclude_self"] is False and set(data["similarity"]) == {"cross", "dual"}
    # the ENDX dual matrix is the exported towers' own question similarity
    from retrieval_qa.models.inference import DualEncoderInference

    q = DualEncoderInference.load(env.endx["checkpoint"]).encode_questions(
        data["questions"], progress=False)
    assert torch.allclose(torch.tensor(data["matrices"]["dual_endx"], dtype=torch.float64),
                          (q @ q.T).double(),
                          atol=1e-4)
    for agreement in data["agreement_with_cross"].values():
        assert agreement["kl_qq_from_cross"] >= 0


def test_similarity_given_answer_and_cap(env, tmp_path, rqa):
    ckpt, model = resolve_run(env.endx_run)
    out = rqa("analyze", "similarity", "--endx-checkpoint", ckpt, "--endx-model", model,
              "--dual-model", env.dual["checkpoint"], "--answer",
              "Fact 1 of place 0 is about the city number 1.", "--max-questions", "2",
              "--tag", "x", "--data-dir", env.data, "--output-dir", tmp_path)
    data = json.loads((tmp_path / "figure3_x.json").read_text())
    assert out["questions"] == 2 and len(data["matrices"]["cross_endx"]) == 2
    assert (tmp_path / "figure3_x.png").is_file()


def test_answer_with_one_question_is_refused(env, tmp_path):
    from retrieval_qa.analysis.common import pick_answer
    from retrieval_qa.data import load_pool

    pool, _ = load_pool("reqa_squad", "dev", env.data)
    with pytest.raises(ValueError, match="at least 2"):
        pick_answer(pool, "Fact 2 of place 0 is about the city number 2.")
    cand, qs = pick_answer(pool)
    assert len(qs) == 9 and cand.doc_id == pool.candidates[0].doc_id
