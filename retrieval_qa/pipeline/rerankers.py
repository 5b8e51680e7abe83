"""The reranker of a pipeline, built from its ``reranker:`` block by the registry
(:func:`~retrieval_qa.registry.instantiate`): a block names its class by ``_target_``, or by
``kind`` (``cross_encoder``, the kind of a block that names none), and is merged over the
settings of its kind (``conf/pipeline/stages/<kind>.yaml``).

A reranker is any class whose objects have ``top_k`` (the fused candidates it rescores per
question), ``depths``, ``weight`` (its share of the head's score, or ``"tune"``), ``gate``
and ``gate_quantiles`` (its confidence gate, :mod:`.gate`), ``select`` and ``select_se`` (how
``tune`` picks, :func:`.reranking.select_setting`) and :meth:`pair_scorer` (questions,
sentences -> scores; the scorer may carry ``text_of``, candidate -> the text it reads for it,
else it reads the sentence)."""

from __future__ import annotations

__all__ = ["SELECT", "CrossEncoderStage"]

#: how ``tune`` picks among the validation settings (:func:`.reranking.select_setting`)
SELECT = ("best", "least_reliance")


class CrossEncoderStage:
    """A cross-encoder export (:class:`~retrieval_qa.classifiers.reranker.CrossEncoderReranker`)
    rescoring each question's fused ``top_k``.

    Args:
        checkpoint: a cross-encoder export (``python -m retrieval_qa.classifiers.train_reranker
            --output``).
        top_k: the fused candidates rescored per question, or ``"tune"``: the one of
            ``depths`` of best validation MRR.
        batch_size: pairs scored at once.
        weight: the reranker's share of the head's score (1: its order alone, 0: the fused
            order), or ``"tune"``: chosen on the validation side.
        depths: the depths that ``top_k: tune`` chooses from (each pair of the validation
            side is scored once, at the deepest).
        gate: None (every head reranked), a confidence threshold in [0, 1] below which a
            question keeps its fused order (:mod:`.gate`), or ``"tune"``: none or one of the
            validation confidences' ``gate_quantiles``, chosen on the validation side.
        gate_quantiles: the quantiles ``gate: tune`` tries, each in (0, 1).
        select: how ``tune`` picks among the validation settings: ``best`` (best MRR) or
            ``least_reliance`` (the least weight of those within ``select_se`` paired standard
            errors of the best; :func:`.reranking.select_setting`).
        select_se: ``least_reliance``'s width, in standard errors (>= 0).

    Example:

        >>> stage = CrossEncoderStage(checkpoint="runs/reranker/model", top_k="tune",
        ...                           batch_size=64, weight="tune", depths=[20, 5, 10],
        ...                           gate=None, gate_quantiles=[0.1, 0.2])
        >>> stage.weight, stage.depths, stage.gate
        ('tune', [5, 10, 20], None)
        >>> scores = stage.pair_scorer()(["who wrote it?"],  # doctest: +SKIP
        ...                              ["She wrote it in 1850."])
    """

    kind = "cross_encoder"

    def __init__(self, *, checkpoint: str, top_k: int | str, batch_size: int,
                 weight: float | str, depths: list[int], gate: float | str | None,
                 gate_quantiles: list[float], select: str = "best",
                 select_se: float = 1.0) -> None:
        if not isinstance(checkpoint, str) or not checkpoint:
            raise ValueError(f"checkpoint={checkpoint!r} is not a folder (fix: give the folder "
                             "of an exported cross-encoder)")
        depths = list(depths or [])
        whole = [("batch_size", batch_size), *(("depths", d) for d in depths)]
        if top_k != "tune":
            whole.append(("top_k", top_k))
        elif not depths:
            raise ValueError("top_k=tune needs depths to choose from (fix: e.g. "
                             "depths=[5, 10, 20])")
        for key, value in whole:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key}={value!r} is not a whole number >= 1")
        if weight != "tune" and (isinstance(weight, bool) or not isinstance(weight, int | float)
                                 or not 0 <= weight <= 1):
            raise ValueError(f"weight={weight!r} is neither a number in [0, 1] nor tune (fix: "
                             "1: the reranker's order alone, 0: the fused order, tune: chosen "
                             "on the validation side)")
        if gate not in (None, "tune") and (isinstance(gate, bool) or not isinstance(
                gate, int | float) or not 0 <= gate <= 1):
            raise ValueError(f"gate={gate!r} is neither a confidence in [0, 1], null nor tune "
                             "(fix: null: every head reranked, tune: chosen on the validation "
                             "side)")
        quantiles = list(gate_quantiles or [])
        if gate == "tune" and not quantiles:
            raise ValueError("gate=tune needs gate_quantiles to choose from (fix: e.g. "
                             "gate_quantiles=[0.05, 0.1, 0.2])")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) and 0 < x < 1
                   for x in quantiles):
            raise ValueError(f"gate_quantiles={quantiles!r}: each must be a number in (0, 1)")
        if select not in SELECT:
            raise ValueError(f"select={select!r} is not one of {list(SELECT)} (fix: best: the "
                             "validation side's best MRR, least_reliance: the least weight "
                             "within select_se standard errors of it)")
        if isinstance(select_se, bool) or not isinstance(select_se, int | float) \
                or select_se < 0:
            raise ValueError(f"select_se={select_se!r} is not a number >= 0")
        self.select, self.select_se = select, float(select_se)
        self.gate = gate if gate in (None, "tune") else float(gate)
        self.gate_quantiles = [float(x) for x in quantiles]
        self.checkpoint, self.top_k, self.batch_size = checkpoint, top_k, batch_size
        self.depths = sorted(set(depths)) if top_k == "tune" else [top_k]
        self.weight = weight if weight == "tune" else float(weight)

    def pair_scorer(self, model=None):
        """``(questions, sentences) -> scores`` (a numpy array) of ``model`` (an object with
        ``score_pairs(questions, sentences, batch_size)``; default: the export of
        ``checkpoint``, loaded now, on the GPU where there is one), with ``text_of``
        (candidate -> the text ``model`` reads for it: its ``candidate_text(sentence,
        paragraph)`` where it has one, else the sentence)."""
        if model is None:
            from ..classifiers.reranker import CrossEncoderReranker
            from ..models.artifact import resolve_map_location

            model = CrossEncoderReranker.load(self.checkpoint, resolve_map_location("auto"))

        def score_pairs(questions, sentences):
            return model.score_pairs(questions, sentences, self.batch_size).cpu().numpy()

        reader = getattr(model, "candidate_text", None)
        if reader is not None:  # else the sentence, reranking's default
            score_pairs.text_of = lambda c: reader(c.text, c.context)
        return score_pairs
