"""Export a dual encoder as a sentence-transformers model folder (``rqa export --format
sentence-transformers``), giving the embeddings of ``rqa encode`` / :class:`DualEncoderInference`.

Two kinds of folder, chosen per model (``modules="auto"``; ``"custom"`` forces the second,
``"native"`` refuses it):

* **native**: sentence-transformers' own modules (``Transformer``, ``Pooling``, ``Dense``,
  ``Normalize``, a ``Router`` for two towers; :mod:`.native_modules`), for towers of a
  pretrained Hugging Face encoder with mean or CLS pooling and an optional projection. The
  folder loads with a plain ``SentenceTransformer(path)`` where retrieval_qa is not installed.
  Before it is written, its embeddings of a few probe texts are checked against the towers'.
* **custom**: the :class:`RetrievalTower` module of this package, for every other tower (GRU,
  LSTM, RNN or Transformer encoders, multi-hop attention pooling, input-type vectors, answers
  encoded with their context, the VAE's towers). It loads with
  ``SentenceTransformer(path, trust_remote_code=True)`` where retrieval_qa is installed.

The custom layout: a symmetric model (SDE: one tower for both sides) is **one module**, a
:class:`RetrievalTower` that wraps our tower with its tokenizer: ``model.encode_query``
tokenises with the question length, ``model.encode_document`` (and ``model.encode`` without a
task) with the answer length. An asymmetric model (ADE, ADE-STE, ADE-FTE, ADE-SPL, and other
two-tower methods) is a sentence-transformers ``Router`` with a ``query`` route (the question
tower) and a ``document`` route (the answer tower, also the default route), so ``encode_query``
and ``encode_document`` (or ``encode(..., task="query" | "document")``) pick the tower.

Each module's output is in the model's retrieval space (l2-normalised for cosine models, as
``retrieval_space`` does for ``rqa encode``), and the folder's similarity function is
``cosine`` or ``dot`` accordingly. Models whose answers are (sentence, context) pairs take
``(sentence, context)`` tuples on the document side.

``trust_remote_code=True`` is needed because the module class lives in this package
(``retrieval_qa.export.sentence_transformers.RetrievalTower``, found by import path):
sentence-transformers 6 asks for it for every module class outside its own namespace. The
tower is rebuilt from its config without loading any pretrained weights (a pretrained
encoder's architecture is read from ``encoder/config.json`` in the module folder), then its
weights are read from the module's ``model.safetensors``; towers of other builders (the
VAE's) are rebuilt by their builder, as ``rqa encode`` does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.collate import MODEL_KEYS, encode_texts
from ..losses.similarity import check_similarity, retrieval_space
from ..written import atomic_dir, write_text
from . import ST_MODULES
from .native_modules import InputModule, NotNative, Router, native_modules

#: tasks of sentence-transformers' ``encode_query`` / ``encode_document`` -> our sides
TASK_SIDES = {"query": "question", "document": "answer"}
DEFAULT_TASK = "document"  # as Router.for_query_document's default route
#: texts a native folder must embed as the towers do before it is written: short, with
#: punctuation and case, and one longer than any maximum length (both sides cut it)
PROBE_TEXTS = ["What is the capital of France?", "Paris.",
               "It is " + "a long answer about the river and the city, " * 120]
PROBE_TOL = 1e-4
TOWER_BUILDERS = ("retrieval_qa.encoders.build_dual_towers",
                  "retrieval_qa.encoders.builders.build_dual_towers")


def _plain_side(settings: dict) -> dict:
    return {"max_length": int(settings["max_length"]),
            "with_context": bool(settings.get("with_context", False))}


class RetrievalTower(InputModule):
    """One tower of a retrieval_qa dual encoder as a sentence-transformers input module.

    Args:
        tower: ``tower(input_ids, attention_mask, token_type_ids) -> [B, D]``, put in eval mode.
        tokenizer: its Hugging Face tokenizer.
        sides: ``{task: {"max_length": int, "with_context": bool}}`` for the tasks this
            module encodes (``query`` and/or ``document``).
        default_task: the task of ``encode`` called without one (a key of ``sides``).
        similarity: ``cosine`` (the output is l2-normalised) or ``dot``.
        spec: how :meth:`load` rebuilds the tower (:func:`export_sentence_transformers`).
    """

    config_file_name = "rqa_tower.json"
    forward_kwargs = {"task"}
    save_in_root = True

    def __init__(self, tower: nn.Module, tokenizer, sides: dict[str, dict], default_task: str,
                 similarity: str, spec: dict) -> None:
        super().__init__()
        unknown = sorted(set(sides) - set(TASK_SIDES))
        if not sides or unknown:
            raise ValueError(f"sides must be among {sorted(TASK_SIDES)}, got {sorted(sides)}")
        if default_task not in sides:
            raise ValueError(f"default_task={default_task!r} is not one of {sorted(sides)}")
        self.tower = tower.eval()
        self.tokenizer = tokenizer
        self.sides = {task: _plain_side(s) for task, s in sides.items()}
        self.default_task = default_task
        self.similarity = check_similarity(similarity)
        self.spec = dict(spec)

    # ---- what sentence-transformers asks of an input module ---------------------------
    def resolve_task(self, task: str | None) -> str:
        if task is None:
            return self.default_task
        if task not in self.sides:
            raise ValueError(f"task={task!r}: this module encodes {sorted(self.sides)}")
        return task

    def preprocess(self, inputs: Sequence[Any], prompt: str | None = None,
                   task: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        side = self.sides[self.resolve_task(task)]
        texts, contexts = [], []
        for item in inputs:
            if isinstance(item, str):
                texts.append(item)
                contexts.append(None)
            elif isinstance(item, (tuple, list)) and len(item) == 2 \
                    and all(isinstance(x, str) for x in item):
                texts.append(item[0])
                contexts.append(item[1])
            else:
                raise TypeError(f"expected a text or a (sentence, context) pair, got {item!r}")
        if prompt:
            texts = [prompt + t for t in texts]
        paired = [c is not None for c in contexts]
        if side["with_context"] and not all(paired):
            raise ValueError("this model encodes answers as (sentence, context): pass "
                             "(sentence, context) pairs to encode_document")
        if not side["with_context"] and any(paired):
            raise ValueError("this side encodes single texts, not (sentence, context) pairs")
        return encode_texts(self.tokenizer, texts, side["max_length"],
                            contexts if side["with_context"] else None)

    def forward(self, features: dict[str, Any], task: str | None = None,
                **kwargs) -> dict[str, Any]:
        inputs = {k: features[k] for k in MODEL_KEYS if k in features}
        emb = self.tower(inputs["input_ids"], inputs["attention_mask"],
                         inputs.get("token_type_ids"))
        features["sentence_embedding"] = retrieval_space(emb.float(), self.similarity)
        return features

    def get_embedding_dimension(self) -> int:
        return int(self.tower.output_dim)

    get_sentence_embedding_dimension = get_embedding_dimension  # sentence-transformers < 6

    @property
    def max_seq_length(self) -> int:
        return max(s["max_length"] for s in self.sides.values())

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        for s in self.sides.values():
            s["max_length"] = int(value)

    def get_config_dict(self) -> dict[str, Any]:
        from ..models.artifact import tokenizer_ids

        return {"sides": self.sides, "default_task": self.default_task,
                "similarity": self.similarity, "spec": self.spec,
                "tokenizer_ids": tokenizer_ids(self.tokenizer)}  # checked by load

    # ---- save / load --------------------------------------------------------------------
    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        out = Path(output_path)
        out.mkdir(parents=True, exist_ok=True)
        self.save_config(str(out))
        self.save_torch_weights(str(out), safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(out / "tokenizer")
        if self.spec.get("kind") == "tower" and self.spec.get("encoder_type") == "pretrained":
            self.tower.token_encoder.model.config.save_pretrained(out / "encoder")

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None,
             local_files_only: bool = False, **kwargs) -> RetrievalTower:
        """The module, its files checked first (:func:`~retrieval_qa.models.artifact.
        st_module_files`, :func:`~retrieval_qa.models.artifact.load_tokenizer_folder`, the
        tokenizer's ids within the token table): an InputFileError names a bad one."""
        from ..models import artifact as a
        from ..written import Damaged, error_line

        hub = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder,
               "revision": revision, "local_files_only": local_files_only}
        folder = Path(cls.load_dir_path(model_name_or_path, **hub))
        with a.refusing_damage("sentence-transformers model file", a.convert_again(folder)):
            config, weights = a.st_module_files(folder, cls.config_file_name)
            tokenizer = a.load_tokenizer_folder(folder / "tokenizer", config.get("tokenizer_ids"))
            try:
                module = cls(rebuild_tower(config["spec"], folder), tokenizer, config["sides"],
                             config["default_task"], config["similarity"], config["spec"])
            except (ValueError, KeyError, TypeError) as e:
                raise Damaged(folder / cls.config_file_name, f"does not describe a tower "
                                                             f"({error_line(e)})") from None
            try:
                cls.load_torch_weights(model_name_or_path, model=module, **hub)
            except Exception as e:  # noqa: BLE001 - safetensors' own error classes too
                raise Damaged(weights, f"not the weights of the tower {cls.config_file_name} "
                                       f"describes ({error_line(e)})") from None
            a.check_token_ids(tokenizer, a.token_table_rows(module.tower), folder / "tokenizer",
                              weights)
        return module.eval()


def rebuild_tower(spec: dict, folder: Path) -> nn.Module:
    """The tower of ``spec`` with placeholder weights (the caller loads the real ones).

    Args:
        spec: the module's ``spec`` from its rqa_tower.json (``kind``, ``side``, ``towers``, ...).
        folder: the module's folder (a pretrained encoder's ``encoder/config.json``).
    """
    from ..encoders import build_token_embedder, build_token_encoder, build_tower, exported_towers
    from ..registry import locate, takes, target_of

    towers_cfg = exported_towers(spec["towers"])
    if spec["kind"] == "builder":  # e.g. the VAE's towers: rebuilt as rqa encode does
        towers = locate(spec["builder"])(towers_cfg)
        return towers.question_tower if spec["side"] == "question" else towers.answer_tower
    enc = dict(towers_cfg["encoder"])
    if takes(target_of(enc, "towers.encoder", "encoder"), "model"):  # a pretrained model's
        from transformers import AutoConfig

        from ..pretrained import model_from_config

        if "gradient_checkpointing" in enc:
            enc["gradient_checkpointing"] = False  # inference only
        model = model_from_config(AutoConfig.from_pretrained(folder / "encoder"))
        token_encoder = build_token_encoder(enc, model=model)
    elif enc["vocab_size"] is None:  # pretrained word embeddings: a table of their shape
        vocab, dim = spec["embedding_shape"]
        embedder = build_token_embedder(enc, weight=torch.zeros(vocab, dim))
        token_encoder = build_token_encoder(enc, token_embedder=embedder)
    else:
        token_encoder = build_token_encoder(enc)
    tower = build_tower({**towers_cfg, "encoder": enc}, token_encoder=token_encoder,
                        projection_required=spec.get("sharing") == "ade_spl")
    if tower.input_types is not None and spec["side"] == "answer":
        return tower.for_side(1)
    return tower


def _spec(towers: nn.Module, side: str, meta: dict) -> dict:
    from ..encoders import DualTowers, PretrainedTokenEncoder, TokenEmbedder, Tower
    from ..models.inference import DEFAULT_BUILDER

    tower = towers.question_tower if side == "question" else towers.answer_tower
    builder = meta.get("builder", DEFAULT_BUILDER)
    towers_cfg = meta["towers"]
    spec = {"side": side, "sharing": getattr(towers, "sharing", None), "towers": towers_cfg,
            "builder": builder}
    plain_towers = (type(towers) is DualTowers and type(tower) is Tower
                    and (builder in TOWER_BUILDERS or (
                        builder.endswith("towers_from_config") and towers_cfg.get("type") != "vae")))
    if not plain_towers:
        return {**spec, "kind": "builder"}
    encoder = tower.token_encoder
    spec.update(kind="tower", encoder_type="pretrained"
                if isinstance(encoder, PretrainedTokenEncoder) else "embedder")
    embedder = getattr(encoder, "token_embedder", None)
    if isinstance(embedder, TokenEmbedder):
        spec["embedding_shape"] = list(embedder.embedding.weight.shape)
    return spec


def _dual_towers(inference) -> nn.Module:
    """The towers of a loaded export, checked to be exportable."""
    towers = getattr(inference, "towers", None)
    if towers is None or not hasattr(towers, "question_tower"):
        raise ValueError(f"{type(inference).__name__} has no question / answer towers: only "
                         "dual-encoder exports convert to sentence-transformers")
    if not hasattr(inference.tokenizer, "save_pretrained"):
        raise ValueError("this model reads frozen features, not text: nothing to export")
    return towers.eval()


def sentence_transformer_modules(inference) -> tuple[list[nn.Module], dict]:
    """The custom sentence-transformers modules (:class:`RetrievalTower`) of a loaded
    :class:`DualEncoderInference` and a description of what was built.

    Args:
        inference: the loaded export (its ``towers``, ``tokenizer`` and ``meta``).
    """
    towers = _dual_towers(inference)
    meta = inference.meta
    tokenizer = inference.tokenizer
    similarity = meta["similarity"]
    query = {"max_length": meta["max_question_length"], "with_context": False}
    document = {"max_length": meta["max_answer_length"],
                "with_context": bool(meta.get("answer_with_context"))}
    if towers.answer_tower is towers.question_tower:
        module = RetrievalTower(towers.question_tower, tokenizer,
                                {"query": query, "document": document}, DEFAULT_TASK,
                                similarity, _spec(towers, "question", meta))
        return [module], {"layout": "one RetrievalTower module (one tower for both sides)"}
    q = RetrievalTower(towers.question_tower, tokenizer, {"query": query}, "query", similarity,
                       _spec(towers, "question", meta))
    d = RetrievalTower(towers.answer_tower, tokenizer, {"document": document}, "document",
                       similarity, _spec(towers, "answer", meta))
    router = Router.for_query_document(query_modules=[q], document_modules=[d],
                                       default_route=DEFAULT_TASK)
    return [router], {"layout": "Router: query -> question tower, document (default) -> "
                                "answer tower"}


def check_probe(model, inference) -> None:
    """Raise :class:`NotNative` unless ``model`` embeds :data:`PROBE_TEXTS` on both sides as
    ``inference`` does (within :data:`PROBE_TOL`).

    Args:
        model: the ``SentenceTransformer`` built from the modules.
        inference: the loaded export it must match.
    """
    for task, reference in (("query", inference.encode_questions),
                            ("document", inference.encode_answers)):
        got = model.encode(PROBE_TEXTS, task=task, convert_to_tensor=True)
        diff = float((got.cpu() - reference(PROBE_TEXTS, progress=False)).abs().max())
        if not diff < PROBE_TOL:
            raise NotNative(f"sentence-transformers' modules give other {task} embeddings "
                            f"(max abs difference {diff:.2e} on probe texts)")


def export_sentence_transformers(checkpoint: str | Path, output: str | Path,
                                 model_card: bool = True, modules: str = "auto") -> dict:
    """Convert the exported model folder ``checkpoint`` (what ``rqa train`` / ``rqa export``
    wrote) into a sentence-transformers folder ``output``; returns a summary.

    Args:
        checkpoint: an exported dual-encoder folder.
        output: the folder to write, whole, then put in place of what was there (``rqa export``
            refuses one that holds files, unless ``--overwrite``).
        model_card: write sentence-transformers' model card (README.md).
        modules: ``auto`` (sentence-transformers' own modules where they express the towers,
            else the custom module), ``native`` (an error where they do not) or ``custom``.

    Returns:
        A summary: the ``output``, which ``modules`` were written (and ``why_custom`` for a
        fallback), ``similarity_fn_name``, ``sharing``, ``embedding_dim`` and ``load`` (the
        call that loads the folder).

    Raises:
        NotNative: ``modules="native"`` and sentence-transformers' modules cannot express it.

    Example:

        >>> summary = export_sentence_transformers(  # doctest: +SKIP
        ...     "runs/dual_gru/checkpoint", "runs/st")
        >>> summary["load"]  # doctest: +SKIP
        "SentenceTransformer('runs/st', trust_remote_code=True)"
    """
    import tempfile

    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    from ..models.artifact import load_artifact

    if modules not in ST_MODULES:
        raise ValueError(f"modules={modules!r}; expected one of {list(ST_MODULES)}")
    inference = load_artifact(checkpoint, map_location="cpu")
    _dual_towers(inference)
    meta = inference.meta
    similarity = "cosine" if meta["similarity"] == "cosine" else "dot"
    output = Path(output)
    kind, why_custom = "custom", "asked for (modules='custom')"
    with tempfile.TemporaryDirectory(prefix="rqa-st-export-") as staging, \
            atomic_dir(output, "--output") as folder:  # whole or not at all
        if modules != "custom":
            try:
                native, built = native_modules(inference.towers, inference.tokenizer, meta,
                                               staging)
                model = SentenceTransformer(modules=native, similarity_fn_name=similarity,
                                            device="cpu")
                check_probe(model, inference)
                kind = "native"
            except NotNative as e:
                if modules == "native":
                    raise NotNative(f"{checkpoint}: sentence-transformers' own modules cannot "
                                    f"express this model: {e} (fix: modules 'auto' or "
                                    "'custom', --st-modules on the command line)") from e
                why_custom = str(e)
        if kind == "custom":
            custom, built = sentence_transformer_modules(inference)
            model = SentenceTransformer(modules=custom, similarity_fn_name=similarity,
                                        device="cpu")
        model.save(str(folder), create_model_card=model_card)
        built = {"modules": kind, **built,
                 **({"why_custom": why_custom} if kind == "custom" else {})}
        load = (f"SentenceTransformer({str(output)!r})" if kind == "native" else
                f"SentenceTransformer({str(output)!r}, trust_remote_code=True)")
        provenance = {"source": str(Path(checkpoint).resolve()), "source_meta": meta, **built,
                      "similarity_fn_name": similarity,
                      "sentence_transformers": sentence_transformers.__version__, "load": load}
        write_text(folder / "rqa_export.json", json.dumps(provenance, indent=2))
    return {"format": "sentence-transformers", "output": str(output),
            "checkpoint": str(checkpoint), **built, "similarity_fn_name": similarity,
            "sharing": getattr(inference.towers, "sharing", None),
            "embedding_dim": int(inference.towers.output_dim), "load": load}
