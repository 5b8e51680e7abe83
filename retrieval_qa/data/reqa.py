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
from .types import Candidate, QAPair, RetrievalPool

BUILDER_VERSION = "reqa-2"


def answer_sentence_index(spans: list[tuple[int, int]], starts: list[int], answer_start: int
                          ) -> int | None:
    """Index of the first span with start <= answer_start < end, else None."""
    i = bisect.bisect_right(starts, answer_start) - 1
    if i >= 0 and spans[i][0] <= answer_start < spans[i][1]:
        return i
    return None


def assemble_pool(dataset: str, pool: str, candidates: list[Candidate], pairs: list[QAPair],
                  gold_by: str = "text", source: str = "") -> RetrievalPool:
    """Group QA inputs by question text and attach gold candidate indices.

    ``gold_by="text"`` (ReQA): every candidate whose text equals an answer sentence is gold;
    ``gold_by="id"`` (MultiReQA): only the answer candidates themselves.
    """
    by_text: dict[str, list[int]] = {}
    by_id: dict[str, int] = {}
    for i, c in enumerate(candidates):
        by_text.setdefault(c.text, []).append(i)
        by_id[c.id] = i
    order: dict[str, int] = {}
    gold: list[set[int]] = []
    for pair in pairs:
        q = order.setdefault(pair.question, len(order))
        if q == len(gold):
            gold.append(set())
        if gold_by == "text":
            gold[q].update(by_text.get(pair.answer, ()))
        elif gold_by == "id":
            gold[q].add(by_id[pair.answer_id])
        else:
            raise ValueError(f"gold_by must be 'text' or 'id', got {gold_by!r}")
    return RetrievalPool(dataset, pool, candidates, list(order), [sorted(g) for g in gold],
                         pairs, source)


def build_reqa(paragraphs: Iterable[SquadParagraph], dataset: str = "reqa_squad",
               pool: str = "dev", source: str = "") -> tuple[RetrievalPool, dict]:
    """Build the ReQA pool of a SQuAD-format file. Returns (pool, notes) where notes counts
    the answers that fell outside every sentence (they are attached to the next sentence)."""
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
