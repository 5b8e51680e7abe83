"""How a data module's texts become token batches: the lengths and padding settings, the ids
tokenised once per text list (the token memo) and the collators that cut batches from them.

With a tokenizer, every text list (a pool's candidates and questions, the training pairs'
questions and answers) is tokenised once by :meth:`~.tokenized.TokenizedTexts.build` (which
also caches on disk) and kept for the life of the module; batches are cut from those ids, and
the length buckets and the evaluation order read their token counts off them. With frozen
features (:class:`~.features.FeatureTable`) there are no tokens: the table takes the
tokenizer's place and batches hold ``"features"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .collate import PairCollator, TextCollator, first_copies, token_lengths
from .features import FeatureTable
from .pair_lengths import pair_lengths
from .tokenized import TokenizedTexts
from .types import QAPair, RetrievalPool


@dataclass(frozen=True)
class TokenSettings:
    """Lengths, answer segments and padding of the token batches: the keys of that name in
    ``conf/data/reqa_squad.yaml``.

    Args:
        max_question_length: question tokens, special tokens included (longer truncated).
        max_answer_length: answer tokens (sentence, or sentence + context).
        answer_with_context: encode each answer as (sentence, context) segments.
        pad_to_multiple_of: pad each batch's length up to a multiple of this many tokens;
            None: to the batch's longest.
    """

    max_question_length: int
    max_answer_length: int
    answer_with_context: bool
    pad_to_multiple_of: int | None

    def __post_init__(self) -> None:
        if self.pad_to_multiple_of is not None and int(self.pad_to_multiple_of) < 1:
            raise ValueError(f"data.pad_to_multiple_of={self.pad_to_multiple_of!r}; expected "
                             "null or a positive number of tokens")

    @classmethod
    def from_block(cls, block: Mapping) -> TokenSettings:
        """These settings out of a ``data`` block's values (its other keys ignored).

        Args:
            block: a mapping holding (at least) every field's key.
        """
        return cls(**{f.name: block[f.name] for f in fields(cls)})


def load_features(features: str | Path | FeatureTable | None) -> FeatureTable | None:
    """``data.features`` as a table: read when it is a path, as given otherwise.

    Args:
        features: a ``torch.save``'d ``{texts, vectors}`` file, a table, or None.
    """
    if features is not None and not isinstance(features, FeatureTable):
        return FeatureTable.load(features)
    return features


@dataclass
class EvalSide:
    """One side of an evaluation pool (its candidates or its questions) as a loader needs it.

    Args:
        lengths: each item's token count (1 each with frozen features).
        collate_fn: the collator cutting its batches.
    """

    lengths: list[int]
    collate_fn: TextCollator


class TokenMemo:
    """Token ids of a data module's text lists, each tokenised once, and the collators and
    lengths read off them.

    Args:
        tokenizer: a Hugging Face tokenizer (unused, may be None, with ``features``).
        settings: lengths, answer segments and padding.
        features: frozen features in place of tokens (:func:`load_features`), or None.
    """

    def __init__(self, tokenizer, settings: TokenSettings,
                 features: FeatureTable | None = None) -> None:
        self.settings = settings
        self.features = features
        self.tokenizer = features if features is not None else tokenizer
        self._memo: dict = {}

    @property
    def pretokenized(self) -> bool:
        """Batches are cut from ids tokenised beforehand (any tokenizer; frozen features
        have no tokens)."""
        return self.features is None

    def memo(self, owner: Any, build: Callable[[], Any]) -> Any:
        """``build()`` once per ``owner`` (a pool or a pair list, kept alive here so its id
        is not reused) for the life of this memo.

        Args:
            owner: the object the built value belongs to.
            build: makes the value on first use.
        """
        if id(owner) not in self._memo:
            self._memo[id(owner)] = (owner, build())
        return self._memo[id(owner)][1]

    def pool_tokens(self, pool: RetrievalPool) -> tuple[TokenizedTexts, TokenizedTexts]:
        """(candidates, questions) of ``pool`` as :class:`TokenizedTexts`.

        Args:
            pool: an evaluation pool.
        """
        s = self.settings

        def build():
            contexts = [c.context for c in pool.candidates] if s.answer_with_context else None
            return (TokenizedTexts.build(self.tokenizer, [c.text for c in pool.candidates],
                                         s.max_answer_length, contexts),
                    TokenizedTexts.build(self.tokenizer, pool.questions,
                                         s.max_question_length))
        return self.memo(pool, build)

    def pair_tokens(self, pairs: Sequence[QAPair]) -> tuple[TokenizedTexts, TokenizedTexts]:
        """(questions, answers) of training pairs as :class:`TokenizedTexts`.

        Args:
            pairs: the training pairs (the list itself is the memo's key).
        """
        s = self.settings

        def build():
            contexts = [p.context for p in pairs] if s.answer_with_context else None
            return (TokenizedTexts.build(self.tokenizer, [p.question for p in pairs],
                                         s.max_question_length),
                    TokenizedTexts.build(self.tokenizer, [p.answer for p in pairs],
                                         s.max_answer_length, contexts))
        return self.memo(pairs, build)

    def pair_lengths(self, pairs: Sequence[QAPair], unit: str) -> list[int]:
        """:func:`~.pair_lengths.pair_lengths` with these settings (token counts read off
        the pre-tokenised ids: the same numbers).

        Args:
            pairs: training pairs.
            unit: ``tokens`` or ``chars`` (``data.bucket_unit``).
        """
        s = self.settings
        if unit == "tokens" and self.pretokenized:
            q, a = self.pair_tokens(pairs)
            return [x + y for x, y in zip(q.lengths(), a.lengths(), strict=True)]
        return pair_lengths(pairs, self.tokenizer, s.max_question_length,
                            s.max_answer_length, unit, s.answer_with_context)

    def pair_collator(self, pairs: Sequence[QAPair]) -> PairCollator:
        """The collator of training batches over ``pairs`` (items ``(index, pair[, weight])``).

        Args:
            pairs: the training pairs the items' indices point into.
        """
        s = self.settings
        return PairCollator(self.tokenizer, s.max_question_length, s.max_answer_length,
                            s.answer_with_context,
                            self.pair_tokens(pairs) if self.pretokenized else None,
                            s.pad_to_multiple_of)

    def eval_sides(self, pool: RetrievalPool) -> tuple[EvalSide, EvalSide]:
        """(candidates, questions) of ``pool``: their token counts and collators.

        Args:
            pool: an evaluation pool.
        """
        s = self.settings
        texts = [c.text for c in pool.candidates]
        contexts = self.candidate_contexts(pool)
        cand_tokens = q_tokens = None
        if self.pretokenized:
            cand_tokens, q_tokens = self.pool_tokens(pool)
            cand_len, q_len = cand_tokens.lengths(), q_tokens.lengths()
        else:
            cand_len = token_lengths(self.tokenizer, texts, s.max_answer_length, contexts)
            q_len = token_lengths(self.tokenizer, pool.questions, s.max_question_length)
        candidates = TextCollator(self.tokenizer, s.max_answer_length, "answer",
                                  s.answer_with_context, cand_tokens, s.pad_to_multiple_of)
        questions = TextCollator(self.tokenizer, s.max_question_length, "question",
                                 tokens=q_tokens, pad_to_multiple_of=s.pad_to_multiple_of)
        return EvalSide(cand_len, candidates), EvalSide(q_len, questions)

    def candidate_contexts(self, pool: RetrievalPool) -> list[str] | None:
        """The candidates' second segments (their paragraphs) when answers carry them.

        Args:
            pool: an evaluation pool.
        """
        return ([c.context for c in pool.candidates] if self.settings.answer_with_context
                else None)

    def first_copies(self, pool: RetrievalPool) -> list[int]:
        """Each candidate's first candidate with the same encoder input (text, and context
        when answers carry it; :func:`~.collate.first_copies`).

        Args:
            pool: an evaluation pool.
        """
        return first_copies([c.text for c in pool.candidates], self.candidate_contexts(pool))

    def check_pairs_covered(self, pairs: Sequence[QAPair], what: str) -> None:
        """With frozen features: every question and answer of ``pairs`` has a vector (else
        :meth:`~.features.FeatureTable.check_covers` raises); nothing without them.

        Args:
            pairs: training pairs.
            what: how the error names them (``"training"``).
        """
        if self.features is not None:
            self.features.check_covers((p.question for p in pairs), f"{what} question")
            self.features.check_covers((p.answer for p in pairs), f"{what} answer")

    def check_pool_covered(self, pool: RetrievalPool, what: str) -> None:
        """With frozen features: every question and candidate of ``pool`` has a vector;
        nothing without them.

        Args:
            pool: an evaluation pool.
            what: how the error names it (``"validation"``, ``"test"``).
        """
        if self.features is not None:
            self.features.check_covers(pool.questions, f"{what} question")
            self.features.check_covers((c.text for c in pool.candidates), f"{what} candidate")
