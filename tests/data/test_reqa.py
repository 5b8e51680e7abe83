from helpers import TINY_SQUAD

from retrieval_qa.data.reqa import answer_sentence_index, build_reqa
from retrieval_qa.data.squad import parse_squad
from retrieval_qa.data.stats import pool_stats


def _pool():
    paragraphs, _ = parse_squad(TINY_SQUAD)
    return build_reqa(paragraphs)


def test_candidates_dedup_on_sentence_and_paragraph():
    pool, notes = _pool()
    texts = [c.text for c in pool.candidates]
    assert texts == ["Paris is the capital of France.", "It has the Eiffel Tower.",
                     "Berlin is in Germany.", "Berlin is in Germany.", "Munich is in Bavaria."]
    # the same sentence in two paragraphs gives two candidates with different contexts
    assert pool.candidates[2].context != pool.candidates[3].context
    # as in the reference, the context keeps its own characters (a newline here); the
    # splitter reads the newline as a space
    paragraphs, _ = parse_squad(TINY_SQUAD)
    assert pool.candidates[0].context == paragraphs[0].context and "\n" in paragraphs[0].context
    assert notes["answers_outside_sentences"] == 0


def test_qa_inputs_questions_and_gold():
    pool, _ = _pool()
    # q2 has two answers in the same sentence: one QA input; "Where is Berlin?" is asked twice
    assert len(pool.pairs) == 5
    assert pool.questions == ["What is the capital of France?", "What tower is in Paris?",
                              "Where is Berlin?", "Which state has Munich?"]
    # gold = every candidate with the answer sentence's text, whatever the paragraph
    assert pool.gold == [[0], [1], [2, 3], [4]]
    stats = pool_stats(pool)
    assert (stats["candidates"], stats["qa_inputs"], stats["questions"],
            stats["answer_sentences"]) == (5, 5, 4, 4)
    assert stats["questions_per_answer"]["max"] == 1
    # paragraphs of 3 and 2 sentences: no sentence is its whole paragraph
    assert stats["candidates_per_context"]["histogram"] == {"2": 1, "3": 1}
    assert stats["whole_context_candidates"] == stats["questions_with_a_whole_context_gold"] == 0


def test_answer_sentence_index_first_span_containing_start():
    spans = [(0, 5), (6, 10), (12, 20)]
    starts = [0, 6, 12]
    assert answer_sentence_index(spans, starts, 0) == 0
    assert answer_sentence_index(spans, starts, 9) == 1
    assert answer_sentence_index(spans, starts, 10) is None  # end is exclusive
    assert answer_sentence_index(spans, starts, 11) is None
    assert answer_sentence_index(spans, starts, 19) == 2
