"""sentence-transformers' own modules for the towers they can express, so that the exported
folder loads with a plain ``SentenceTransformer(path)``: no remote code, no retrieval_qa.

A tower is expressible when it is a pretrained Hugging Face encoder (BERT, MiniLM, the T5
encoder, ...) with mean or CLS pooling and an optional linear projection, reading plain texts
with no side marker. It becomes ``Transformer`` (the model's weights and its tokenizer) ->
``Pooling`` -> ``Dense`` (identity activation, the projection's weight and bias, if any) ->
``Normalize`` (cosine models, and towers that normalise themselves). One tower for both sides
(SDE) is one plain stack whose ``Transformer`` cuts questions at the question length
(``task="query"``) and answers at the answer length (``task="document"``, or no task); two
towers (ADE and its variants) are a ``Router`` with a ``query`` route (the question tower)
and a ``document`` route (the answer tower, also the default). Token type ids reach the model
as in the suite: only when the tokenizer makes them and the model takes them.

:func:`native_modules` raises :class:`NotNative` naming what cannot be expressed (another
token encoder or pooler, input-type vectors, answers encoded with their context, towers of
another kind such as the VAE's); the caller then writes the custom module instead.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from torch import nn

from ..requirements import require

# sentence-transformers 6's module API (InputModule, Router.for_query_document, the module
# layout below); checked first, so an older release fails here with the version it needs
require("sentence-transformers", "6.0", "the sentence-transformers export")
from sentence_transformers.base.modules import InputModule  # noqa: E402, F401 (for the custom module)
from sentence_transformers.sentence_transformer.modules import (  # noqa: E402
    Dense,
    Normalize,
    Pooling,
    Router,
    Transformer,
)

POOLING_MODES = {"MeanPooler": "mean", "ClsPooler": "cls"}


class NotNative(ValueError):
    """What keeps a model from being written with sentence-transformers' own modules."""


def check_tower(tower: nn.Module, tokenizer) -> None:
    """Raise :class:`NotNative` unless ``tower`` is a pretrained encoder, mean or CLS pooling
    and an optional linear projection, with no input-type vector.

    Args:
        tower: one side's tower.
        tokenizer: the export's tokenizer (CLS pooling needs right padding).
    """
    from transformers import PreTrainedModel

    from ..encoders import PretrainedTokenEncoder, Projection, Tower

    if type(tower) is not Tower:
        raise NotNative(f"its {type(tower).__name__} towers are not a token encoder, a pooler "
                        "and a projection")
    if tower.input_types is not None:
        raise NotNative("its tower adds an input-type vector per side to every token")
    encoder = tower.token_encoder
    if not isinstance(encoder, PretrainedTokenEncoder):
        kind = getattr(encoder, "kind", type(encoder).__name__)
        raise NotNative(f"its token encoder is a {kind} (not a pretrained Hugging Face model)")
    if not isinstance(encoder.model, PreTrainedModel):
        raise NotNative(f"its encoder {type(encoder.model).__name__} is part of a Hugging "
                        "Face model, not one that loads on its own")
    pooler = type(tower.pooler).__name__
    if pooler not in POOLING_MODES:
        raise NotNative(f"its pooler is a {pooler} (sentence-transformers pools by mean or CLS)")
    if pooler == "ClsPooler" and tokenizer.padding_side != "right":
        raise NotNative("it pools the first position (CLS) of a left-padding tokenizer")
    if tower.projection is not None and type(tower.projection) is not Projection:
        raise NotNative(f"its projection is a {type(tower.projection).__name__}")


def _transformer(tower: nn.Module, tokenizer, folder: Path, lengths: dict[str, int],
                 default_task: str) -> Transformer:
    """A ``Transformer`` over the tower's model and tokenizer (written to ``folder`` and read
    back, as sentence-transformers will read them)."""
    encoder = tower.token_encoder
    encoder.model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    processor_kwargs = {}
    names = list(getattr(tokenizer, "model_input_names", []))
    if "token_type_ids" in names and not encoder.takes_token_types:  # as the suite drops them
        processor_kwargs["model_input_names"] = [n for n in names if n != "token_type_ids"]
    return Transformer(str(folder), max_seq_length=lengths[default_task],
                       query_length=lengths["query"], document_length=lengths["document"],
                       processor_kwargs=processor_kwargs)


def _stack(tower: nn.Module, tokenizer, folder: Path, lengths: dict[str, int],
           default_task: str, similarity: str, dense: dict[int, Dense]) -> list[nn.Module]:
    modules = [_transformer(tower, tokenizer, folder, lengths, default_task),
               Pooling(tower.pooler.output_dim, POOLING_MODES[type(tower.pooler).__name__])]
    projection = tower.projection
    if projection is not None:
        if id(projection) not in dense:  # ADE-SPL: one Dense for both routes, saved once
            linear = projection.linear
            bias = linear.bias is not None
            dense[id(projection)] = Dense(
                linear.in_features, linear.out_features, bias=bias,
                activation_function=nn.Identity(), init_weight=linear.weight.detach().clone(),
                init_bias=linear.bias.detach().clone() if bias else None)
        modules.append(dense[id(projection)])
    if similarity == "cosine" or tower.normalize:
        modules.append(Normalize())
    return modules


def native_modules(towers: nn.Module, tokenizer, meta: dict, workdir: str | Path
                   ) -> tuple[list[nn.Module], dict]:
    """The sentence-transformers modules of ``towers`` (a :class:`DualTowers` of a
    ``DualEncoderInference`` with ``meta``) and a description; the models and tokenizers are
    staged under ``workdir`` (needed only until the modules are saved). Raises
    :class:`NotNative` when the towers cannot be expressed.

    Args:
        towers: the export's dual towers.
        tokenizer: the export's tokenizer.
        meta: the export's model.json (``max_question_length``, ``max_answer_length``,
            ``similarity``, ``answer_with_context``).
        workdir: a folder to stage the models and tokenizers in.

    Returns:
        The modules (one plain stack for one tower on both sides, else one ``Router`` with a
        query and a document route) and ``{"layout": ...}``, the layout in words.
    """
    from ..encoders import DualTowers

    if "query_length" not in inspect.signature(Transformer).parameters:
        import sentence_transformers

        raise NotNative(f"sentence-transformers {sentence_transformers.__version__} has no "
                        "per-task maximum length (6.0 or newer has)")
    if type(towers) is not DualTowers:
        raise NotNative(f"its {type(towers).__name__} are rebuilt by their own builder")
    if meta.get("answer_with_context"):
        raise NotNative("it encodes answers with their context, as (sentence, context) pairs")
    question, answer = towers.question_tower, towers.answer_tower
    for tower in (question, answer):
        check_tower(tower, tokenizer)
    lengths = {"query": int(meta["max_question_length"]),
               "document": int(meta["max_answer_length"])}
    workdir, dense = Path(workdir), {}
    if answer is question:
        stack = _stack(question, tokenizer, workdir / "sde", lengths, "document",
                       meta["similarity"], dense)
        return stack, {"layout": "one plain stack (one tower for both sides): "
                                 + " -> ".join(type(m).__name__ for m in stack)}
    routes = {task: _stack(tower, tokenizer, workdir / task, lengths, task,
                           meta["similarity"], dense)
              for task, tower in (("query", question), ("document", answer))}
    router = Router.for_query_document(query_modules=routes["query"],
                                       document_modules=routes["document"],
                                       default_route="document")
    return [router], {"layout": "Router: query -> question tower, document (default) -> "
                                "answer tower, each "
                                + " -> ".join(type(m).__name__ for m in routes["query"])}
