"""The cross-encoder reranker's export loads in sentence-transformers with equal scores."""

import pytest
import torch

from retrieval_qa.classifiers.reranker import CrossEncoderReranker
from tests.helpers import WORDS, save_tiny_bert_model, word_tokenizer

PAIRS = [("what is the fact", "the fact is a place"), ("where is the city", "a city"),
         ("who is about", "the question of the place is about a city of the fact")]


@pytest.fixture
def reranker(tmp_path):
    save_tiny_bert_model(tmp_path / "bert", word_tokenizer(WORDS), hidden=16)
    settings = CrossEncoderReranker.settings({"pretrained": str(tmp_path / "bert"),
                                              "fallback": None, "max_length": 24})
    torch.manual_seed(0)
    return CrossEncoderReranker(**settings)


@pytest.mark.filterwarnings("ignore:You are trying to .self.log")
def test_a_training_step_updates_the_head(reranker):
    enc = reranker.encode([q for q, _ in PAIRS], [s for _, s in PAIRS])
    loss = reranker.training_step({**enc, "labels": torch.tensor([1, 0, 0])}, 0)
    loss.backward()
    assert torch.isfinite(loss) and reranker.network.classifier.weight.grad.abs().sum() > 0


def test_export_loads_in_sentence_transformers_with_our_scores(reranker, tmp_path):
    from sentence_transformers import CrossEncoder

    reranker.eval()
    ours = reranker.score_pairs([q for q, _ in PAIRS], [s for _, s in PAIRS])
    folder = reranker.export(tmp_path / "export")
    ce = CrossEncoder(str(folder), local_files_only=True, device="cpu")
    theirs = torch.as_tensor(ce.predict(PAIRS, convert_to_tensor=True)).float()
    assert torch.allclose(ours, theirs, atol=1e-5), (ours, theirs)
    again = CrossEncoderReranker.load(folder)
    assert torch.allclose(again.score_pairs([q for q, _ in PAIRS], [s for _, s in PAIRS]),
                          ours, atol=1e-6)


@pytest.mark.filterwarnings("ignore:You are trying to .self.log")
def test_a_listwise_step_is_the_grouped_softmax_of_the_question_groups(reranker):
    from retrieval_qa.classifiers.reranker_data import RerankExample
    from retrieval_qa.classifiers.train_reranker import _collate, question_groups
    from retrieval_qa.losses.listwise import grouped_softmax_loss

    examples = [RerankExample(q, s, int(i == 0), "gold" if i == 0 else "bm25")
                for q in ("what is the fact", "where is the city")
                for i, (_, s) in enumerate(PAIRS)]
    groups = question_groups(examples)
    assert [len(g) for g in groups] == [3, 3] and all(g[0].label == 1 for g in groups)
    batch = _collate(reranker, listwise=True)(groups)
    assert batch["group"].tolist() == [0, 0, 0, 1, 1, 1]
    reranker.eval()  # no dropout: the step's loss can be recomputed
    loss = reranker.training_step(batch, 0)
    logits = reranker(**{k: batch[k] for k in ("input_ids", "attention_mask",
                                                "token_type_ids") if k in batch})
    torch.testing.assert_close(loss, grouped_softmax_loss(logits, batch["group"],
                                                          batch["labels"]))


def test_a_paragraph_reader_keeps_its_reading_through_export_and_reads_paragraphs_in_training(
        tmp_path):
    from retrieval_qa.classifiers.reranker_data import RerankExample
    from retrieval_qa.classifiers.train_reranker import _collate

    save_tiny_bert_model(tmp_path / "bert", word_tokenizer(WORDS), hidden=16)
    base = {"pretrained": str(tmp_path / "bert"), "fallback": None, "max_length": 64}
    with pytest.raises(ValueError, match="reads="):
        CrossEncoderReranker.settings({**base, "reads": "paragraph"})
    reader = CrossEncoderReranker(**CrossEncoderReranker.settings(
        {**base, "reads": "sentence_and_paragraph"}))
    again = CrossEncoderReranker.load(reader.export(tmp_path / "export"))
    assert again.reads == "sentence_and_paragraph"
    assert CrossEncoderReranker.load(CrossEncoderReranker(**CrossEncoderReranker.settings(
        base)).export(tmp_path / "plain")).reads == "sentence"
    examples = [RerankExample("where is the city", "a city", 1, "gold",
                              "the fact is a place a city"),
                RerankExample("where is the city", "the fact", 0, "bm25", "the fact")]
    sentence_only = CrossEncoderReranker(**CrossEncoderReranker.settings(base))
    long = _collate(reader, listwise=True)([examples])["attention_mask"].sum(1).tolist()
    short = _collate(sentence_only, listwise=True)([examples])["attention_mask"].sum(1).tolist()
    # the gold sentence's paragraph (a separator and 7 words) is read; the negative is its
    # whole paragraph, read alone
    assert long[0] == short[0] + 8 and long[1] == short[1]
