"""A tiny hand-made pool for the pipeline tests."""

from __future__ import annotations

from retrieval_qa.data.types import Candidate, QAPair, RetrievalPool

PARAGRAPHS = [
    ["Paris is the capital of France.", "The Eiffel Tower stands in Paris.",
     "France borders Spain."],
    ["Berlin is the capital of Germany.", "Munich is in Bavaria.",
     "Germany has many rivers."],
    ["Rome is the capital of Italy.", "The Colosseum is in Rome.",
     "Paris is the capital of France."],  # a gold copy in another paragraph
]
QUESTIONS = [("What is the capital of France?", [(0, 0), (2, 2)]),
             ("Where is the Eiffel Tower?", [(0, 1)]),
             ("What is the capital of Germany?", [(1, 0)]),
             ("Which state is Munich in?", [(1, 1)]),
             ("Where is the Colosseum?", [(2, 1)])]


def tiny_pool(name: str = "dev") -> RetrievalPool:
    candidates = []
    index = {}
    for p, sentences in enumerate(PARAGRAPHS):
        context = " ".join(sentences)
        for s, text in enumerate(sentences):
            index[(p, s)] = len(candidates)
            candidates.append(Candidate(f"c{p}-{s}", text, context, f"d{p}"))
    questions, gold, pairs = [], [], []
    for q, (text, golds) in enumerate(QUESTIONS):
        questions.append(text)
        gold.append([index[g] for g in golds])
        for g in golds:
            c = candidates[index[g]]
            pairs.append(QAPair(text, c.text, c.context, f"q{q}", c.id))
    return RetrievalPool("tiny", name, candidates, questions, gold, pairs)
