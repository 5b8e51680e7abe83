"""Labelled (question, answer sentence, context) examples of the supervised-mining classifier
(section 4.1 of the paper), their files, and how they are tokenised.

An example is a gold pair (label 1) or a negative (label 0) with where it came from
(``source``: ``gold``, ``bm25``, ``dense`` or ``same_document``); the sampler that makes them
is :mod:`retrieval_qa.mining.negatives`.

Tokenised input (:func:`encode_triples`), the paper's concatenation with segment ids::

    [CLS] question [SEP] answer sentence [SEP] context [SEP]
      0      0       0         1           1      c      c

with ``c = context_segment`` (2: a segment of its own, see
:meth:`retrieval_qa.mining.classifier.MiningClassifier`; 1: the context shares the answer's
segment). The question is cut to ``max_question_length`` tokens, then the answer sentence and
the context share what is left of ``max_length`` (the context is cut first). Without contexts
the input is ``[CLS] question [SEP] sentence [SEP]`` (the ENDX paper's BERTQA).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from ..errors import DataFormatError
from ..written import atomic_path

SOURCES = ("gold", "bm25", "dense", "same_document")


@dataclass(frozen=True)
class ClassifierExample:
    """One labelled example (one line of an examples file).

    Attributes:
        question: the question.
        answer: the answer sentence.
        context: the sentence's context (its paragraph).
        label: 1 a gold pair, 0 a negative.
        source: where it came from, one of :data:`SOURCES`.
        question_id: the question's unit key in its pool (qid or text).
        answer_id: the candidate id of the sentence.
        dense_score: the dense retriever's similarity of the pair; NaN: unknown.
    """

    question: str
    answer: str
    context: str
    label: int              # 1: a gold pair, 0: a negative
    source: str             # one of SOURCES
    question_id: str        # the question's unit key in its pool (qid or text)
    answer_id: str          # the candidate id of the sentence
    dense_score: float = float("nan")  # the dense retriever's similarity of the pair

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def write_examples(path: str | Path, examples: Iterable[ClassifierExample]) -> None:
    """One JSON object a line, written to a temporary file and renamed (never half a file).

    Args:
        path: the examples file (JSON lines).
        examples: the examples to write.
    """
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for ex in examples:
            f.write(ex.to_json() + "\n")


def read_examples(path: str | Path) -> list[ClassifierExample]:
    """The examples of a file :func:`write_examples` wrote; a line that is not one is a
    :class:`~retrieval_qa.errors.DataFormatError` naming it.

    Args:
        path: the examples file (JSON lines; blank lines are skipped).
    """
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(ClassifierExample(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                raise DataFormatError(path, f"line {n}", f"not a classifier example ({e})",
                                      "delete the folder holding it: the examples are built "
                                      "again") from None
    return out


def example_counts(examples: Sequence[ClassifierExample]) -> dict[str, Any]:
    """Examples, positives, negatives per source and the share of positives.

    Args:
        examples: the examples counted.
    """
    by_source = {s: 0 for s in SOURCES}
    for ex in examples:
        by_source[ex.source] += 1
    positives = sum(ex.label for ex in examples)
    return {"examples": len(examples), "positives": positives,
            "negatives": len(examples) - positives, "by_source": by_source,
            "questions": len({ex.question_id for ex in examples}),
            "positive_share": round(positives / len(examples), 4) if examples else None}


def _ids(tokenizer, texts: Sequence[str], max_length: int | None = None) -> list[list[int]]:
    """Token ids without special tokens; each distinct text tokenised once."""
    unique = list(dict.fromkeys(texts))
    kwargs = {"truncation": True, "max_length": max_length} if max_length else {}
    ids = tokenizer(unique, add_special_tokens=False, **kwargs)["input_ids"] if unique else []
    by_text = dict(zip(unique, ids, strict=True))
    return [by_text[t] for t in texts]


def encode_triples(tokenizer, questions: Sequence[str], answers: Sequence[str],
                   contexts: Sequence[str] | None, max_length: int,
                   max_question_length: int, context_segment: int = 2
                   ) -> dict[str, torch.Tensor]:
    """``{"input_ids", "attention_mask", "token_type_ids"}`` (``LongTensor[B, L]``, padded to
    the batch's longest, ``L <= max_length``) of the concatenation in the module docstring.

    Args:
        tokenizer: the classifier's tokenizer (its ``cls``, ``sep`` and ``pad`` ids).
        questions: the questions.
        answers: the answer sentences, one per question.
        contexts: the contexts, one per question; None: ``[CLS] q [SEP] a [SEP]``.
        max_length: the most tokens of a row, special tokens included.
        max_question_length: the question is cut first to this many tokens.
        context_segment: the segment id of the context's tokens.
    """
    if not len(questions) == len(answers) == (len(contexts) if contexts is not None
                                               else len(answers)):
        raise ValueError(f"{len(questions)} questions, {len(answers)} answers and "
                         f"{len(contexts) if contexts is not None else '-'} contexts")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    pad_id = tokenizer.pad_token_id or 0
    specials = 4 if contexts is not None else 3
    if max_length < specials + 2:
        raise ValueError(f"max_length={max_length} leaves no room for the texts")
    q_ids = _ids(tokenizer, questions, max(1, min(max_question_length,
                                                  max_length - specials - 1)))
    a_ids = _ids(tokenizer, answers)
    c_ids = _ids(tokenizer, contexts) if contexts is not None else None
    rows, types = [], []
    for k, (q, a) in enumerate(zip(q_ids, a_ids, strict=True)):
        room = max_length - specials - len(q)
        a = a[:room]
        ids = [cls_id, *q, sep_id, *a, sep_id]
        seg = [0] * (len(q) + 2) + [1] * (len(a) + 1)
        if c_ids is not None:
            c = c_ids[k][:room - len(a)]
            ids += [*c, sep_id]
            seg += [context_segment] * (len(c) + 1)
        rows.append(ids)
        types.append(seg)
    width = max((len(r) for r in rows), default=0)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(rows), width), dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (r, s) in enumerate(zip(rows, types, strict=True)):
        input_ids[i, :len(r)] = torch.tensor(r)
        token_type_ids[i, :len(s)] = torch.tensor(s)
        attention_mask[i, :len(r)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "token_type_ids": token_type_ids}


class ExampleDataset(Dataset):
    """The examples as a map-style dataset (items are :class:`ClassifierExample` objects).

    Args:
        examples: the examples.
    """

    def __init__(self, examples: Sequence[ClassifierExample]) -> None:
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> ClassifierExample:
        return self.examples[i]


class ExampleCollator:
    """Batches of :class:`ClassifierExample`: the encoder inputs of :func:`encode_triples`
    plus ``labels`` (float) and ``dense_score`` (float, NaN where unknown).

    Args:
        tokenizer: the classifier's tokenizer.
        max_length: the most tokens of a row.
        max_question_length: the question is cut first to this many tokens.
        with_context: read the examples' contexts; False: leave them out.
        context_segment: the segment id of the context's tokens.
    """

    def __init__(self, tokenizer, max_length: int, max_question_length: int,
                 with_context: bool = True, context_segment: int = 2) -> None:
        self.tokenizer = tokenizer
        self.max_length, self.max_question_length = max_length, max_question_length
        self.with_context, self.context_segment = with_context, context_segment

    def __call__(self, examples: Sequence[ClassifierExample]) -> dict[str, torch.Tensor]:
        batch = encode_triples(
            self.tokenizer, [e.question for e in examples], [e.answer for e in examples],
            [e.context for e in examples] if self.with_context else None,
            self.max_length, self.max_question_length, self.context_segment)
        batch["labels"] = torch.tensor([float(e.label) for e in examples])
        batch["dense_score"] = torch.tensor([float(e.dense_score) for e in examples])
        return batch
