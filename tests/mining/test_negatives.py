"""The classifier's examples: gold pairs and 1:1:1 BM25 / dense / same-paragraph negatives,
never a known positive; the dev split keeps question groups whole."""

from __future__ import annotations

from collections import Counter

from helpers import TINY_SQUAD
from mining_helpers import BagOfWordsRetriever

from retrieval_qa.data.pool_index import known_positives
from retrieval_qa.data.reqa import build_reqa
from retrieval_qa.data.squad import parse_squad
from retrieval_qa.mining.negatives import dev_questions, sample_examples
from retrieval_qa.mining.neighbours import bm25_neighbours, dense_neighbours


def _sample(pool, seed=0, k=10):
    positives = known_positives(pool)
    bm25 = bm25_neighbours(pool, positives, k)
    r = BagOfWordsRetriever()
    q, c = r.encode_questions(pool.questions), r.encode_answers(pool.candidates)
    dense = dense_neighbours(q, c, positives, k)
    return positives, sample_examples(pool, positives, bm25, dense, seed,
                                      dense_score=lambda i, j: float(q[i] @ c[j]))


def test_known_positives_cover_copies_and_repeated_question_strings(train_pool):
    positives = known_positives(train_pool)
    gold_texts: dict[str, set[str]] = {}
    for p in train_pool.pairs:
        gold_texts.setdefault(p.question, set()).add(p.answer)
    for i, question in enumerate(train_pool.questions):
        want = {j for j, c in enumerate(train_pool.candidates) if c.text in gold_texts[question]}
        assert positives[i] == want
    # "What is fact 0 of place 0?" is asked in two paragraphs (two qids): both units exclude
    # both gold sentences
    units = [i for i, q in enumerate(train_pool.questions) if q == "What is fact 0 of place 0?"]
    assert len(units) == 2 and positives[units[0]] == positives[units[1]]
    assert len(positives[units[0]]) == 2


def test_one_negative_of_each_source_per_question_never_a_positive(train_pool):
    positives, sampled = _sample(train_pool)
    examples = sampled.examples
    by_source = Counter(e.source for e in examples)
    n_q = len(train_pool.questions)
    assert by_source == {"gold": len(train_pool.pairs), "bm25": n_q, "dense": n_q,
                         "same_document": n_q}  # 1:1:1, one of each per question
    assert sampled.shortfall == {"bm25": 0, "dense": 0, "same_document": 0}
    gold_pairs = {(p.question, p.answer) for p in train_pool.pairs}
    index = {c.id: i for i, c in enumerate(train_pool.candidates)}
    key_row = {k: i for i, k in enumerate(train_pool.question_keys)}
    per_question: dict[str, list] = {}
    for e in examples:
        assert e.label == (e.source == "gold")
        if e.label:
            assert (e.question, e.answer) in gold_pairs
            continue
        assert (e.question, e.answer) not in gold_pairs  # never a positive, by text
        assert index[e.answer_id] not in positives[key_row[e.question_id]]
        per_question.setdefault(e.question_id, []).append(e)
    for key, negatives in per_question.items():
        assert len({e.answer for e in negatives}) == 3  # three different sentences
        same = next(e for e in negatives if e.source == "same_document")
        gold_docs = {train_pool.candidates[g].doc_id for g in train_pool.gold[key_row[key]]}
        assert train_pool.candidates[index[same.answer_id]].doc_id in gold_docs
    assert all(e.dense_score == e.dense_score for e in examples)  # set (not NaN)


def test_negatives_come_from_the_top_ten(train_pool):
    positives = known_positives(train_pool)
    bm25 = bm25_neighbours(train_pool, positives, 10)
    _, sampled = _sample(train_pool)
    key_row = {k: i for i, k in enumerate(train_pool.question_keys)}
    index = {c.id: i for i, c in enumerate(train_pool.candidates)}
    for e in sampled.examples:
        if e.source == "bm25":
            assert index[e.answer_id] in {c for c, _ in bm25[key_row[e.question_id]]}
    assert all(len(b) == 10 for b in bm25)


def test_the_same_seed_samples_the_same_examples(train_pool):
    a, b, c = (_sample(train_pool, seed)[1].examples for seed in (1, 1, 2))
    assert a == b and a != c


def test_a_source_with_nothing_left_is_counted_not_filled():
    paragraphs, _ = parse_squad(TINY_SQUAD)
    pool, _ = build_reqa(paragraphs, pool="train")
    # "Where is Berlin?" has gold sentences in both paragraphs; the second paragraph's other
    # sentence is gold of "Which state has Munich?" only, so it stays a valid negative there
    positives, sampled = _sample(pool, k=2)
    counts = Counter(e.source for e in sampled.examples if not e.label)
    total = sum(counts.values()) + sum(sampled.shortfall.values())
    assert total == 3 * len(pool.questions)
    assert sampled.shortfall["same_document"] + sampled.shortfall["bm25"] + \
        sampled.shortfall["dense"] > 0  # a tiny pool runs out somewhere
    gold_pairs = {(p.question, p.answer) for p in pool.pairs}
    assert not any((e.question, e.answer) in gold_pairs for e in sampled.examples if not e.label)


def test_dev_split_is_a_tenth_of_whole_question_groups(train_pool):
    dev = dev_questions(train_pool, 0.1, seed=0)
    n = len(train_pool.pairs)
    dev_pairs = [p for p in train_pool.pairs if p.question_id in dev]
    assert 0.05 * n <= len(dev_pairs) <= 0.2 * n
    dev_strings = {p.question for p in dev_pairs}
    dev_answers = {p.answer for p in dev_pairs}
    for p in train_pool.pairs:
        if p.question_id not in dev:
            assert p.question not in dev_strings and p.answer not in dev_answers
