"""MultiReQA SQuAD train without the MRQA train file: the MultiReQA train boundaries
(``multireqa/train/SQuAD/candidates.json.gz``) laid over the paragraphs of the SQuAD v1.1
train file (``squad/train-v1.1.json.gz``).

MultiReQA's offsets index MRQA contexts, and MRQA's SQuAD contexts are the SQuAD paragraphs
unchanged (checked on dev: 2,067 of 2,067 identical). The MRQA train file is not here, and a
boundary's context key is a list of MRQA question ids (random hex, unrelated to SQuAD ids),
so each MultiReQA context is matched to a SQuAD paragraph by its text instead:

* same length: the last sentence ends at ``len(paragraph.rstrip())``;
* the offsets fit the text (:func:`boundary_problems`): every span lies inside the paragraph
  and holds text, and everything outside the spans (before, between, after) is whitespace
  (a span may start on whitespace: MultiReQA's first span starts at 0 even when the
  paragraph starts with a space; candidate texts are stripped);
* at least as many SQuAD questions as the key has qids (MRQA drops a few questions whose
  answer it could not find in the text, never adds one).

Paragraphs with the same text are first joined into one holding the questions of every copy
(MRQA keeps one context per text). A context with a single fitting paragraph takes it; short
contexts fit many paragraphs of their length, and among those the cheapest pairs are taken
(:func:`match_cost`: answers that fall in no sentence, a question count other than the qid
count, implausible boundaries), each context and each paragraph at most once (see
:func:`match_contexts`). What cannot be matched is counted, never
dropped silently (:class:`RebuildReport`).

The pool is then built with the MultiReQA rules (:mod:`.multireqa`): candidates are the
spans, a question's gold are the spans that contain its answer span, the unit is the question
id. Differences from a pool built from the MRQA file, stated in every output (the pool's
``source`` and the notes): question ids are the SQuAD file's (synthetic for most of the
rebuilt train file, see shared/data/SOURCES.md), answer spans are SQuAD's ``answer_start``
(the first occurrence of the answer text for most questions of the rebuilt file, wrong for
about 0.6 %) rather than MRQA's detected spans, and questions that MRQA dropped are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

from .multireqa import Boundary
from .reqa import assemble_pool
from .squad import SquadParagraph
from .types import MRQA_QID, Candidate, QAPair, RetrievalPool

REBUILD_VERSION = "multireqa-train-rebuild-1"
#: sentence-final characters: a span that ends otherwise is counted (a soft check)
_SENTENCE_END = set(".?!\"'”’)]:;")


@dataclass
class RebuildReport:
    """What the rebuild matched and what it could not (every count is reported).

    Attributes:
        multireqa_contexts: the contexts of the boundaries.
        boundaries: the boundaries (candidates).
        squad_paragraphs: the SQuAD file's paragraphs.
        squad_questions: their questions.
        repeated_paragraphs_merged: copies of a paragraph text joined into one.
        matched_contexts: contexts given a paragraph.
        unmatched_contexts: no SQuAD paragraph fits the offsets.
        ambiguous_contexts: several paragraphs fit (resolved, counted).
        boundaries_of_unmatched: candidates lost with unmatched contexts.
        paragraphs_without_context: SQuAD paragraphs no MultiReQA context matched.
        questions_without_context: their questions (not in the pool).
        qid_count_differs: matched contexts with fewer qids than questions.
        spans_not_at_word_start: soft: a span starting right after a non-space.
        spans_without_sentence_end: soft: a non-final span ending without . ? ! etc.
        answers_across_sentences: answer span in no single sentence: no gold.
        questions_without_gold: questions with no gold sentence.
        unmatched_examples: a few unmatched contexts, for the notes.
    """

    multireqa_contexts: int = 0
    boundaries: int = 0
    squad_paragraphs: int = 0
    squad_questions: int = 0
    repeated_paragraphs_merged: int = 0    # copies of a paragraph text joined into one
    matched_contexts: int = 0
    unmatched_contexts: int = 0            # no SQuAD paragraph fits the offsets
    ambiguous_contexts: int = 0            # several paragraphs fit (resolved, counted)
    boundaries_of_unmatched: int = 0       # candidates lost with unmatched contexts
    paragraphs_without_context: int = 0    # SQuAD paragraphs no MultiReQA context matched
    questions_without_context: int = 0     # their questions (not in the pool)
    qid_count_differs: int = 0             # matched contexts with fewer qids than questions
    spans_not_at_word_start: int = 0       # soft: a span starting right after a non-space
    spans_without_sentence_end: int = 0    # soft: a non-final span ending without . ? ! etc.
    answers_across_sentences: int = 0      # answer span in no single sentence: no gold
    questions_without_gold: int = 0
    unmatched_examples: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def boundary_problems(context: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """Why ``spans`` (end-exclusive, in sentence order) are not sentence boundaries of
    ``context``; empty when they fit: inside the text, each holding some text, in order
    without overlap, and nothing but whitespace outside them.

    Args:
        context: the paragraph's text.
        spans: the sentence spans, end-exclusive, in order.
    """
    problems = []
    previous = 0
    for k, (s, e) in enumerate(spans):
        if not 0 <= s < e <= len(context):
            problems.append(f"span {k} [{s}, {e}) outside the text (length {len(context)})")
            return problems
        if s < previous:
            problems.append(f"span {k} [{s}, {e}) overlaps the previous one")
            return problems
        if context[previous:s].strip():
            problems.append(f"text before span {k} is not whitespace: {context[previous:s]!r}")
        if not context[s:e].strip():
            problems.append(f"span {k} [{s}, {e}) holds only whitespace")
        previous = e
    if context[previous:].strip():
        problems.append(f"text after the last span is not whitespace: {context[previous:][:40]!r}")
    return problems


def soft_checks(context: str, spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(spans starting right after a non-space character, non-final spans not ending on a
    sentence-final character): plausible sentence boundaries have neither, but a splitter can
    legitimately produce both (e.g. ``end.[3]Next`` or a list without full stops).

    Args:
        context: the paragraph's text.
        spans: the sentence spans, end-exclusive, in order.
    """
    mid_word = sum(1 for s, _ in spans if s > 0 and not context[s - 1].isspace())
    no_end = sum(1 for _, e in spans[:-1] if context[e - 1] not in _SENTENCE_END)
    return mid_word, no_end


def group_boundaries(boundaries: Iterable[Boundary]) -> dict[str, list[Boundary]]:
    """The boundaries of each context key, in sentence order (the ``_k`` of the id).

    Args:
        boundaries: the MultiReQA boundaries.
    """
    from .multireqa import parse_candidate_id

    groups: dict[str, list[tuple[int, Boundary]]] = {}
    for b in boundaries:
        groups.setdefault(b.context_key, []).append((parse_candidate_id(b.candidate_id)[2], b))
    return {k: [b for _, b in sorted(v, key=lambda t: t[0])] for k, v in groups.items()}


def match_cost(paragraph: SquadParagraph, spans: Sequence[tuple[int, int]], qids: int
               ) -> tuple[int, int, int]:
    """How well a fitting paragraph explains a context, lower is better: (answers of its
    questions that lie in no single span, 1 if its question count differs from the qid
    count, soft-check violations).

    Args:
        paragraph: the SQuAD paragraph.
        spans: the context's sentence spans.
        qids: the qids of the context's key.
    """
    across = sum(1 for qa in paragraph.qas for a in qa.answers
                 if not any(s <= a.start and a.start + len(a.text) <= e for s, e in spans))
    return across, int(len(paragraph.qas) != qids), sum(soft_checks(paragraph.context, spans))


def match_contexts(groups: dict[str, list[Boundary]], paragraphs: Sequence[SquadParagraph],
                   report: RebuildReport) -> dict[str, int]:
    """Context key -> index into ``paragraphs``. A paragraph fits a context when it has the
    context's length, :func:`boundary_problems` finds nothing and it has at least as many
    questions as the key has qids. Contexts with one fitting paragraph left take it (which
    may leave another context with one); when none is left with one, the cheapest remaining
    (context, paragraph) pair (:func:`match_cost`, then key and paragraph order) is taken,
    and so on; each context and each paragraph at most once. Short contexts (one or two
    sentences) fit many paragraphs of their length; the answers of a paragraph's questions,
    which must lie inside its sentences, tell them apart.

    Args:
        groups: each context key's boundaries (:func:`group_boundaries`).
        paragraphs: the SQuAD paragraphs (repeated texts merged).
        report: counts what is matched and what is not (updated in place).
    """
    import heapq

    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(paragraphs):
        by_length.setdefault(len(p.context.rstrip()), []).append(i)
    options: dict[str, set[int]] = {}
    holders: dict[int, set[str]] = {}
    edges: list[tuple[tuple[int, int, int], str, int]] = []
    for key, bounds in groups.items():
        spans = [(b.start, b.end) for b in bounds]
        qids = key.count("/") + 1
        fits = [i for i in by_length.get(spans[-1][1], ())
                if len(paragraphs[i].qas) >= qids
                and not boundary_problems(paragraphs[i].context, spans)]
        options[key] = set(fits)
        for i in fits:
            holders.setdefault(i, set()).add(key)
            edges.append((match_cost(paragraphs[i], spans, qids), key, i))
    report.ambiguous_contexts = sum(1 for key in groups if len(options[key]) > 1)
    fitting = {key: len(o) for key, o in options.items()}
    heapq.heapify(edges)
    matched: dict[str, int] = {}
    single = sorted(key for key, o in options.items() if len(o) == 1)

    def take(key: str, i: int) -> None:
        matched[key] = i
        for other in holders.pop(i, set()) - {key}:
            options[other].discard(i)
            if len(options[other]) == 1 and other not in matched:
                single.append(other)
        for j in options.pop(key):
            if j != i:
                holders.get(j, set()).discard(key)

    while True:
        while single:
            key = single.pop()
            if key not in matched and len(options.get(key, ())) == 1:
                take(key, next(iter(options[key])))
        while edges:
            _, key, i = heapq.heappop(edges)
            if key not in matched and i in options.get(key, ()):
                take(key, i)
                break
        else:
            break
    for key in sorted(set(groups) - set(matched)):
        report.unmatched_contexts += 1
        report.boundaries_of_unmatched += len(groups[key])
        if len(report.unmatched_examples) < 10:
            report.unmatched_examples.append(
                {"context_key": key[:60], "last_end": groups[key][-1].end,
                 "sentences": len(groups[key]), "qids": key.count("/") + 1,
                 "fitting_paragraphs": fitting[key]})
    return matched


def merge_repeated_paragraphs(paragraphs: Sequence[SquadParagraph]) -> list[SquadParagraph]:
    """One paragraph per distinct context text, holding the questions of every copy in file
    order (MRQA keeps one context per text, with the questions of all its copies).

    Args:
        paragraphs: the SQuAD file's paragraphs.
    """
    merged: dict[str, SquadParagraph] = {}
    for p in paragraphs:
        first = merged.get(p.context)
        merged[p.context] = p if first is None else replace(first, qas=first.qas + p.qas)
    return list(merged.values())


def rebuild_multireqa_train(boundaries: Sequence[Boundary], paragraphs: Sequence[SquadParagraph],
                            dataset: str = "multireqa_squad", pool: str = "train",
                            source: str = "") -> tuple[RetrievalPool, dict]:
    """The MultiReQA pool of ``boundaries`` over the text of ``paragraphs`` (see the module
    docstring); notes hold the :class:`RebuildReport`.

    Args:
        boundaries: the MultiReQA train boundaries.
        paragraphs: the SQuAD train file's paragraphs.
        dataset: the pool's dataset name.
        pool: the pool's name.
        source: the pool's ``source`` sentence.
    """
    report = RebuildReport(boundaries=len(boundaries), squad_paragraphs=len(paragraphs),
                           squad_questions=sum(len(p.qas) for p in paragraphs))
    paragraphs = merge_repeated_paragraphs(paragraphs)
    report.repeated_paragraphs_merged = report.squad_paragraphs - len(paragraphs)
    groups = group_boundaries(boundaries)
    report.multireqa_contexts = len(groups)
    matched = match_contexts(groups, paragraphs, report)
    report.matched_contexts = len(matched)
    by_paragraph = {i: key for key, i in matched.items()}
    candidates: list[Candidate] = []
    pairs: list[QAPair] = []
    for i, para in enumerate(paragraphs):
        key = by_paragraph.get(i)
        if key is None:
            report.paragraphs_without_context += 1
            report.questions_without_context += len(para.qas)
            continue
        context = para.context
        bounds = groups[key]
        spans = [(b.start, b.end) for b in bounds]
        if len(para.qas) != key.count("/") + 1:
            report.qid_count_differs += 1
        mid_word, no_end = soft_checks(context, spans)
        report.spans_not_at_word_start += mid_word
        report.spans_without_sentence_end += no_end
        cands = [Candidate(b.candidate_id, context[b.start:b.end].strip(), context, key)
                 for b in bounds]
        candidates += cands
        for qa in para.qas:
            gold: dict[str, Candidate] = {}
            for ans in qa.answers:
                s, e = ans.start, ans.start + len(ans.text)
                inside = [c for c, (cs, ce) in zip(cands, spans, strict=True)
                          if cs <= s and e <= ce]
                if not inside:
                    report.answers_across_sentences += 1
                for c in inside:
                    gold.setdefault(c.id, c)
            if not gold:
                report.questions_without_gold += 1
            pairs += [QAPair(qa.question, c.text, context, qa.id, c.id) for c in gold.values()]
    built = assemble_pool(dataset, pool, candidates, pairs, "id", source, MRQA_QID)
    notes = {"question_unit": MRQA_QID, "rebuilt": True, "rebuild_version": REBUILD_VERSION,
             "question_ids": report.squad_questions - report.questions_without_context,
             "questions_with_gold": len(built.questions),
             "questions_without_gold": report.questions_without_gold,
             "rebuild": report.to_dict(),
             "rebuild_note": REBUILD_NOTE}
    return built, notes


REBUILD_NOTE = ("MultiReQA SQuAD train rebuilt: the MultiReQA train sentence boundaries over the "
                "text of squad/train-v1.1.json.gz (the MRQA train file is absent); question ids "
                "and answer offsets are those of that SQuAD file, questions MRQA dropped are "
                "kept (retrieval_qa/data/multireqa_train.py)")
