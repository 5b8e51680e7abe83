"""The inference artefact of every dual-encoder method: two towers that map text to vectors.

Saved as a folder: ``towers.pt`` (the towers' state dict only; no cross-encoder, decoder or
other training-only part), ``model.json`` (``_target_``: this loader class; ``builder``: the
function that rebuilds the towers from ``towers``; the similarity, max lengths, which
checkpoint the encoder came from) and ``tokenizer/``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..data.collate import first_copies
from ..data.tokenized import TokenizedTexts
from ..data.types import Candidate
from ..encoders.builders import exported_towers
from ..losses.similarity import retrieval_space
from ..registry import locate
from ..written import (
    Damaged,
    atomic_path,
    check,
    error_line,
    read_back,
    read_json,
    rebuilding,
    write_text,
)
from .artifact import (
    CONTENTS_KEY,
    DEFAULT_MAP_LOCATION,
    check_recorded_files,
    check_token_ids,
    load_tokenizer_folder,
    load_weights,
    record_files,
    refusing_damage,
    resolve_map_location,
    token_table_rows,
    tokenizer_ids,
)
from .graphed_encoding import GraphedEncoder

log = logging.getLogger(__name__)

DEFAULT_BUILDER = "retrieval_qa.encoders.build_dual_towers"  # exports that predate ``builder``


#: texts per resumable shard of a long encoding job, in batches (see ``work_dir``)
SHARD_BATCHES = 16


def _count(value) -> bool:
    """A whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_meta(meta: dict, meta_file: str | Path) -> None:
    """The settings an export's model.json must hold to encode as it was trained:
    ``similarity`` (dot or cosine), ``max_question_length`` and ``max_answer_length`` (whole
    numbers >= 1), ``answer_with_context`` (a bool, when given); else
    :class:`~retrieval_qa.written.Damaged` naming the file and the key.

    Args:
        meta: model.json's object.
        meta_file: its path (named in the error).
    """
    from ..losses.similarity import SIMILARITIES

    check(meta.get("similarity") in SIMILARITIES, meta_file,
          f"similarity {meta.get('similarity')!r} is not one of {list(SIMILARITIES)}")
    for key in ("max_question_length", "max_answer_length"):
        check(_count(meta.get(key)), meta_file,
              f"{key} {meta.get(key)!r} is not a length (a whole number >= 1)"
              if key in meta else f"no {key!r} (an older format, or damaged)")
    check(isinstance(meta.get("answer_with_context", False), bool), meta_file,
          f"answer_with_context {meta.get('answer_with_context')!r} is not true or false")


class DualEncoderInference:
    """``work_dir`` (optional): a folder where long encoding jobs keep finished shards
    (``SHARD_BATCHES`` batches each, in the longest-first order), so a job that crashed
    resumes without encoding them again. Shards are named by a digest of the side's whole
    text list and of the model (its settings and its weights), and each records the digest of
    its own texts, checked when read back: a shard of other texts, or of another model (a
    retrained one of the same settings too), is never silently reused.

    ``cuda_graphs`` (opt-in, ``rqa evaluate --cuda-graphs``; not yet measured on a GPU): on a
    GPU, pad every batch to ``batch_size`` rows and a width of a multiple of 16 tokens and
    replay each shape as a CUDA graph (:mod:`.graphed_encoding`; towers that cannot be
    captured run eagerly, with a warning). Off: each batch padded to its own longest text, as
    on the CPU.

    Args:
        towers: the trained :class:`~retrieval_qa.encoders.DualTowers` (or towers with the
            same ``encode_question`` / ``encode_answer`` / ``output_dim``); put in eval mode.
        tokenizer: the Hugging Face tokenizer of the towers.
        meta: the export's settings: ``similarity``, ``max_question_length``,
            ``max_answer_length``, ``answer_with_context``, ``towers`` and ``builder`` (to
            rebuild them), the checkpoint and the experiment.
        work_dir: the folder of resumable encoding shards; None: keep nothing.
        cuda_graphs: pad batches to fixed shapes and replay CUDA graphs on a GPU.

    Usually loaded from an export folder (``rqa train`` prints it; ``rqa export
    --output``) with :meth:`load` or :func:`~retrieval_qa.models.artifact.load_artifact`.

    Example:

        >>> model = DualEncoderInference.load("runs/dual_gru/checkpoint")  # doctest: +SKIP
        >>> q = model.encode_questions(["Who wrote Hamlet?"])  # doctest: +SKIP
        >>> a = model.encode_answers(["Shakespeare wrote Hamlet."])  # doctest: +SKIP
        >>> scores = q @ a.T  # [1, 1]  # doctest: +SKIP
    """

    def __init__(self, towers, tokenizer, meta: dict, work_dir: str | Path | None = None,
                 cuda_graphs: bool = False) -> None:
        self.towers = towers.eval()
        self.tokenizer = tokenizer
        self.meta = meta
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.cuda_graphs = cuda_graphs
        self._graphed: dict[tuple, GraphedEncoder] = {}
        self._weights_digest: str | None = None

    @property
    def device(self) -> torch.device:
        return next(self.towers.parameters()).device

    def _batch_encoder(self, side: str, device: torch.device, batch_size: int,
                       max_length: int):
        """What encodes one batch of ``side`` on ``device``: the tower itself, or on a GPU
        a :class:`GraphedEncoder` over it (one per side and batch size, kept across calls so
        its graphs are captured once)."""
        fn = self.towers.encode_question if side == "question" else self.towers.encode_answer
        if device.type != "cuda":
            return lambda batch: fn(**{k: v.to(device) for k, v in batch.items()})
        key = (side, device, batch_size, max_length, self.cuda_graphs)
        if key not in self._graphed:
            self._graphed[key] = GraphedEncoder(
                fn, device, rows=batch_size, max_width=max_length,
                pad_id=self.tokenizer.pad_token_id or 0, use_graphs=self.cuda_graphs)
        return self._graphed[key]

    @property
    def similarity(self) -> str:
        return self.meta["similarity"]

    def save(self, folder: str | Path) -> Path:
        """Write the export: ``towers.pt``, ``tokenizer/`` and, last, ``model.json``, which
        records every file written (size and SHA-256) and the tokenizer's number of ids
        (``contents``), so :meth:`load` refuses a folder missing a file, or holding another.

        Args:
            folder: the export folder (created; files in it are replaced).

        Returns:
            ``folder`` as a Path.

        Example:

            >>> model.save("runs/copy")  # doctest: +SKIP
            PosixPath('runs/copy')
        """
        folder = Path(folder)
        with atomic_path(folder / "towers.pt") as tmp:
            torch.save(self.towers.state_dict(), tmp)
        saved = self.tokenizer.save_pretrained(folder / "tokenizer")
        names = ["towers.pt", *(Path(f).resolve().relative_to(folder.resolve()).as_posix()
                                for f in saved if Path(f).is_file())]
        meta = {"_target_": f"{type(self).__module__}.{type(self).__qualname__}", **self.meta,
                CONTENTS_KEY: {"files": record_files(folder, names),
                               "tokenizer_ids": tokenizer_ids(self.tokenizer)}}
        write_text(folder / "model.json", json.dumps(meta, indent=2))  # last: the folder is whole
        return folder

    @classmethod
    def load(cls, folder: str | Path, map_location: str = DEFAULT_MAP_LOCATION
             ) -> DualEncoderInference:
        """The export in ``folder``: towers rebuilt by its ``builder`` from its ``towers``
        block, the saved weights loaded, the tokenizer read from ``tokenizer/`` (offline).

        Checked before anything is used: every file model.json records (exports of this
        version record them) present and unchanged, else (older exports) ``towers.pt`` and a
        whole tokenizer folder (``tokenizer_config.json`` and ``tokenizer.json``, or its slow
        vocabulary); the settings model.json holds (similarity, maximum lengths); the weights
        fit the towers; the tokenizer's vocabulary is real (not its special tokens alone),
        gives as many ids as it gave when exported, and no id beyond the token table. A
        failed check is an :class:`~retrieval_qa.errors.InputFileError` naming the file and
        the fix (export again): never a model that loads with a default in place of a file.

        Args:
            folder: an export folder (what :meth:`save` wrote).
            map_location: the device the towers go to: ``"auto"`` (the default, as
                :func:`~retrieval_qa.models.artifact.load_artifact`'s: the GPU when CUDA is
                available, else the CPU), ``"cpu"``, ``"cuda"``, ...

        Example:

            >>> model = DualEncoderInference.load("runs/dual_gru/checkpoint")  # doctest: +SKIP
        """
        folder = Path(folder)
        map_location = resolve_map_location(map_location)
        meta_file, weights_file = folder / "model.json", folder / "towers.pt"
        with refusing_damage():
            meta = read_json(meta_file, ("towers",))
            meta.pop("_target_", None)
            contents = meta.pop(CONTENTS_KEY, None)
            recorded_ids = None
            if contents is not None:
                if not isinstance(contents, dict) or "files" not in contents:
                    raise Damaged(meta_file, f"its {CONTENTS_KEY!r} is not a record of files")
                check_recorded_files(folder, contents["files"], meta_file)
                recorded_ids = contents.get("tokenizer_ids")
                check(recorded_ids is None or _count(recorded_ids), meta_file,
                      f"tokenizer_ids {recorded_ids!r} is not a count")
            weights = load_weights(weights_file, map_location)  # a missing file first
            check_meta(meta, meta_file)
            towers = locate(meta.get("builder", DEFAULT_BUILDER))(exported_towers(meta["towers"]))
            try:
                towers.load_state_dict(weights)
            except RuntimeError as e:
                raise Damaged(weights_file, f"does not fit the towers model.json describes "
                                            f"({error_line(e)})") from None
            towers.to(map_location)
            tokenizer = load_tokenizer_folder(folder / "tokenizer", recorded_ids)
            check_token_ids(tokenizer, token_table_rows(towers), folder / "tokenizer",
                            weights_file)
        return cls(towers, tokenizer, meta)

    def weights_digest(self) -> str:
        """A digest of the towers' weights (computed once; the towers are not trained here)."""
        if self._weights_digest is None:
            h = hashlib.sha256()
            for name, tensor in self.towers.state_dict().items():
                h.update(name.encode() + b"\0" + str(tensor.dtype).encode()
                         + str(tuple(tensor.shape)).encode())
                h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
                         .numpy().tobytes())
            self._weights_digest = h.hexdigest()
        return self._weights_digest

    def _digest(self, side: str, idx: list[int], texts, contexts) -> str:
        h = hashlib.sha256(json.dumps([side, self.meta, self.weights_digest()],
                                      sort_keys=True, default=str).encode())
        for i in idx:
            h.update(texts[i].encode() + b"\0")
            if contexts is not None:
                h.update(contexts[i].encode() + b"\0")
        return h.hexdigest()

    def _encode(self, side: str, texts, contexts, max_length, batch_size, progress):
        """Embeddings of ``texts`` (with ``contexts``); each distinct input is encoded once."""
        same = first_copies(texts, contexts)
        keep = [i for i, first in enumerate(same) if first == i]  # first copies, in order
        row = {i: k for k, i in enumerate(keep)}
        emb = self._encode_distinct(side, [texts[i] for i in keep],
                                    None if contexts is None else [contexts[i] for i in keep],
                                    max_length, batch_size, progress)
        return emb[[row[i] for i in same]]

    @torch.inference_mode()
    def _encode_distinct(self, side: str, texts, contexts, max_length, batch_size, progress):
        """Texts tokenised once, encoded longest first; on a GPU under bf16 autocast (the
        precision of ``trainer.precision: auto``), vectors returned in float32."""
        device = self.device
        encode = self._batch_encoder(side, device, batch_size, max_length)
        tokens = TokenizedTexts.build(self.tokenizer, texts, max_length, contexts, cache=False)
        lengths = tokens.lengths()
        # no autocast cache: a captured graph must not hold a weight copy the cache frees
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False,
                                  enabled=device.type == "cuda"
                                  and torch.cuda.is_bf16_supported())
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])  # longest first
        shard = batch_size * SHARD_BATCHES
        out = torch.empty(len(texts), self.towers.output_dim)
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            # one job = one side's whole text list: another list (e.g. a subset of the
            # questions) gets its own shards, the same list (the candidates again) reuses them
            job = self._digest(side, order, texts, contexts)[:12]
        with tqdm(total=len(texts), desc=f"encode {side}s", unit="text", disable=not progress,
                  leave=False) as bar:
            for k, lo in enumerate(range(0, len(order), shard)):
                idx = order[lo:lo + shard]
                digest = self._digest(side, idx, texts, contexts)
                path = self.work_dir / f"{side}-{job}-{k:05d}.pt" if self.work_dir else None
                if path is not None and path.exists() \
                        and (saved := self._read_shard(path, len(idx))) is not None:
                    if saved["digest"] != digest:
                        raise ValueError(f"{path} belongs to another encoding job (other "
                                         "texts or model); give this job its own work folder")
                    out[idx] = saved["embeddings"]
                    bar.update(len(idx))
                    continue
                # kept on the device until the shard is done: no read-back per batch, so the
                # host cuts the next batch while the GPU encodes this one
                part = torch.empty(len(idx), self.towers.output_dim, device=device)
                for b in range(0, len(idx), batch_size):
                    rows = idx[b:b + batch_size]
                    with autocast:
                        emb = encode(tokens.batch(rows))
                    part[b:b + len(rows)] = emb.float()
                    bar.update(len(rows))
                part = part.cpu()
                out[idx] = part
                if path is not None:  # written whole, then renamed: never half a shard
                    with atomic_path(path) as tmp:
                        torch.save({"digest": digest, "embeddings": part}, tmp)
        return retrieval_space(out, self.similarity)

    def _read_shard(self, path: Path, rows: int) -> dict | None:
        """A finished shard of ``rows`` embeddings, or None when it is damaged (a warning
        names it; the shard is encoded again)."""
        def read(p: Path) -> dict:
            saved = torch.load(p, map_location="cpu", weights_only=True)
            emb = saved["embeddings"]
            check(isinstance(saved["digest"], str) and isinstance(emb, torch.Tensor)
                  and tuple(emb.shape) == (rows, self.towers.output_dim), p,
                  f"not {rows} embeddings of size {self.towers.output_dim}")
            return saved

        try:
            return read_back(path, read, "an encoding shard")
        except Damaged as damage:
            rebuilding(damage, log)
            return None

    def encode_questions(self, texts: list[str], batch_size: int = 128,
                         progress: bool = True) -> torch.Tensor:
        """The question tower's embeddings of ``texts``, cut to ``max_question_length``
        tokens; each distinct text encoded once.

        Args:
            texts: the questions.
            batch_size: texts per forward pass.
            progress: show a progress bar.

        Returns:
            ``[len(texts), D]`` float32 on the CPU, in the retrieval space (l2-normalised
            when the model's similarity is cosine), so ``q @ a.T`` are the model's scores.

        Example:

            >>> q = model.encode_questions(["Who wrote Hamlet?"], progress=False)  # doctest: +SKIP
        """
        return self._encode("question", texts, None, self.meta["max_question_length"],
                            batch_size, progress)

    def encode_answers(self, answers: list[Candidate] | list[str], batch_size: int = 128,
                       progress: bool = True) -> torch.Tensor:
        """The answer tower's embeddings, cut to ``max_answer_length`` tokens.

        Args:
            answers: sentences, or :class:`~retrieval_qa.data.Candidate` objects (required
                when the model encodes sentence + context: ``answer_with_context``).
            batch_size: texts per forward pass.
            progress: show a progress bar.

        Returns:
            ``[len(answers), D]`` float32 on the CPU, in the retrieval space.

        Example:

            >>> a = model.encode_answers(pool.candidates, progress=False)  # doctest: +SKIP
        """
        texts = [a.text if isinstance(a, Candidate) else a for a in answers]
        contexts = None
        if self.meta.get("answer_with_context"):
            if not all(isinstance(a, Candidate) for a in answers):
                raise ValueError("this model encodes sentence + context: pass Candidates")
            contexts = [a.context for a in answers]
        return self._encode("answer", texts, contexts, self.meta["max_answer_length"],
                            batch_size, progress)
