"""What a cross-encoder reads for a candidate: the sentence, or the sentence and its paragraph."""

import pytest

from retrieval_qa.classifiers.candidate_text import candidate_text, check_reads


def test_a_paragraph_reader_reads_the_sentence_first_then_its_paragraph():
    text = candidate_text("It has a tower.", "Paris is big. It has a tower.",
                          "sentence_and_paragraph", "[SEP]")
    assert text.startswith("It has a tower. [SEP] ") and text.endswith("Paris is big. It has a tower.")


@pytest.mark.parametrize("paragraph", ["", "  ", " Paris is big. "])
def test_a_sentence_that_is_its_whole_paragraph_is_read_alone(paragraph):
    assert candidate_text("Paris is big.", paragraph, "sentence_and_paragraph", "[SEP]") \
        == "Paris is big."


def test_a_sentence_reader_ignores_the_paragraph_and_unknown_modes_are_refused():
    assert candidate_text("It has a tower.", "Paris is big.", "sentence", "[SEP]") \
        == "It has a tower."
    with pytest.raises(ValueError, match="sentence_and_paragraph"):
        check_reads("paragraph")
