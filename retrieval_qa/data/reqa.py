"""ReQA builder: sentences, candidates, QA inputs and gold sets from SQuAD-format paragraphs.

The rules are those of the reference ReQA evaluation (see docs in the README):

1. the context is split into sentences (the splitter reads newlines as spaces; sentence
   texts and the paragraph keep the context's own characters, as the reference does);
2. every sentence of every paragraph is a candidate, deduplicated on (sentence, paragraph);
3. for each question and answer, the answer sentence is the first sentence span with
   ``start <= answer_start < end``; each distinct answer sentence of a question is a QA input;
4. gold for a question: every candidate whose text equals one of its answer sentences,
   whatever its paragraph; questions are aggregated by their text.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .splitter import split_sentences
from .squad import SquadParagraph
from .types import QUESTION_TEXT, QUESTION_UNITS, Candidate, QAPair, RetrievalPool, unit_by_id

BUILDER_VERSION = "reqa-2"


def answer_sentence_index(spans: list[tuple[int, int]], starts: list[int], answer_start: int
                          ) -> int | None:
    """Index of the first span with start <= answer_start < end, else None.

    Args:
        spans: the sentence spans, end-exclusive, in order.
        starts: their starts.
        answer_start: the answer's first character.
    """
    i = bisect.bisect_right(starts, answer_start) - 1
    if i >= 0 and spans[i][0] <= answer_start < spans[i][1]:
        return i
    return None


def assemble_pool(dataset: str, pool: str, candidates: list[Candidate], pairs: list[QAPair],
                  gold_by: str = "text", source: str = "",
                  question_unit: str = QUESTION_TEXT) -> RetrievalPool:
    """Group QA inputs into evaluation units and attach gold candidate indices.

    Args:
        dataset: the pool's dataset name.
        pool: the pool's name.
        candidates: the candidate sentences.
        pairs: the QA inputs.
        gold_by: ``text`` (ReQA): every candidate whose text equals an answer sentence is gold;
            ``id`` (MultiReQA, a collection): only the answer candidates themselves.
        source: the pool's ``source`` sentence.
        question_unit: ``question_text`` (ReQA): inputs with the same question string are one
            unit; ``mrqa_qid`` (MultiReQA) and ``question_id`` (a collection): inputs with the
            same question id are one unit, so two units can share a string.
    """
    if gold_by not in ("text", "id"):
        raise ValueError(f"gold_by must be 'text' or 'id', got {gold_by!r}")
    if question_unit not in QUESTION_UNITS:
        raise ValueError(f"question_unit must be one of {QUESTION_UNITS}, got {question_unit!r}")
    by_qid = unit_by_id(question_unit)
    by_text: dict[str, list[int]] = {}
    by_id: dict[str, int] = {}
    for i, c in enumerate(candidates):
        by_text.setdefault(c.text, []).append(i)
        by_id[c.id] = i
    order: dict[str, int] = {}
    texts: list[str] = []
    gold: list[set[int]] = []
    for pair in pairs:
        q = order.setdefault(pair.question_id if by_qid else pair.question, len(order))
        if q == len(gold):
            gold.append(set())
            texts.append(pair.question)
        if gold_by == "text":
            gold[q].update(by_text.get(pair.answer, ()))
        else:
            gold[q].add(by_id[pair.answer_id])
    return RetrievalPool(dataset, pool, candidates, texts, [sorted(g) for g in gold], pairs,
                         source, question_unit, list(order) if by_qid else [])


def reassemble(pool: RetrievalPool, name: str, candidates: list[Candidate],
               pairs: list[QAPair]) -> RetrievalPool:
    """A sub-pool of ``pool`` (some of its candidates and QA inputs) under the same rules: its
    question unit and the gold rule that goes with it (text for ReQA, id for MultiReQA and a
    collection).

    Args:
        pool: the pool whose rules apply.
        name: the sub-pool's name.
        candidates: its candidates.
        pairs: its QA inputs.
    """
    gold_by = "id" if pool.by_id else "text"
    return assemble_pool(pool.dataset, name, candidates, pairs, gold_by, pool.source,
                         pool.question_unit)


def build_reqa(paragraphs: Iterable[SquadParagraph], dataset: str = "reqa_squad",
               pool: str = "dev", source: str = "") -> tuple[RetrievalPool, dict]:
    """Build the ReQA pool of a SQuAD-format file. Returns (pool, notes) where notes counts
    the answers that fell outside every sentence (they are attached to the next sentence).

    Args:
        paragraphs: the SQuAD paragraphs.
        dataset: the pool's dataset name.
        pool: the pool's name.
        source: the pool's ``source`` sentence.
    """
    candidates: list[Candidate] = []
    cand_key: dict[tuple[str, str], str] = {}
    doc_ids: dict[str, str] = {}
    pairs: list[QAPair] = []
    outside: list[str] = []
    for para in paragraphs:
        context = para.context
        doc = doc_ids.setdefault(context, f"p{len(doc_ids)}")
        spans = split_sentences(context)
        starts = [s for s, _ in spans]
        ids = []
        for k, (s, e) in enumerate(spans):
            text = context[s:e]
            key = (text, context)
            if key not in cand_key:
                cand_key[key] = f"{doc}s{k}"
                candidates.append(Candidate(cand_key[key], text, context, doc))
            ids.append(cand_key[key])
        for qa in para.qas:
            seen: set[str] = set()
            for ans in qa.answers:
                i = answer_sentence_index(spans, starts, ans.start)
                if i is None:
                    # The start falls between sentences (whitespace): take the next sentence.
                    outside.append(qa.id)
                    i = min(bisect.bisect_right(starts, ans.start), len(spans) - 1)
                s, e = spans[i]
                text = context[s:e]
                if text not in seen:
                    seen.add(text)
                    pairs.append(QAPair(qa.question, text, context, qa.id, ids[i]))
    notes = {"answers_outside_sentences": len(outside), "outside_question_ids": outside[:20]}
    return assemble_pool(dataset, pool, candidates, pairs, "text", source), notes
