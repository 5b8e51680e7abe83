"""The inference artefact of every dual-encoder method: two towers that map text to vectors.

Saved as a folder: ``towers.pt`` (the towers' state dict only; no cross-encoder, decoder or
other training-only part), ``model.json`` (``_target_``: this loader class; ``builder``: the
function that rebuilds the towers from ``towers``; the similarity, max lengths, which
checkpoint the encoder came from) and ``tokenizer/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..data.collate import encode_texts, token_lengths
from ..data.types import Candidate
from ..losses.similarity import retrieval_space
from ..registry import locate

DEFAULT_BUILDER = "retrieval_qa.encoders.build_dual_towers"  # exports that predate ``builder``


class DualEncoderInference:
    def __init__(self, towers, tokenizer, meta: dict) -> None:
        self.towers = towers.eval()
        self.tokenizer = tokenizer
        self.meta = meta

    @property
    def similarity(self) -> str:
        return self.meta["similarity"]

    def save(self, folder: str | Path) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(self.towers.state_dict(), folder / "towers.pt")
        meta = {"_target_": f"{type(self).__module__}.{type(self).__qualname__}", **self.meta}
        (folder / "model.json").write_text(json.dumps(meta, indent=2))
        self.tokenizer.save_pretrained(folder / "tokenizer")
        return folder

    @classmethod
    def load(cls, folder: str | Path, map_location: str = "cpu") -> DualEncoderInference:
        from transformers import AutoTokenizer

        folder = Path(folder)
        meta = json.loads((folder / "model.json").read_text())
        meta.pop("_target_", None)
        towers = locate(meta.get("builder", DEFAULT_BUILDER))(meta["towers"])
        towers.load_state_dict(torch.load(folder / "towers.pt", map_location=map_location))
        tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer", local_files_only=True)
        return cls(towers, tokenizer, meta)

    def _batches(self, texts: list[str], contexts: list[str] | None, max_length: int,
                 batch_size: int, desc: str, progress: bool):
        """Batches of similar token length, longest first (little padding)."""
        lengths = token_lengths(self.tokenizer, texts, max_length, contexts)
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        for lo in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress,
                       leave=False):
            idx = order[lo:lo + batch_size]
            yield idx, encode_texts(self.tokenizer, [texts[i] for i in idx], max_length,
                                    [contexts[i] for i in idx] if contexts is not None else None)

    @torch.inference_mode()
    def _encode(self, side: str, texts, contexts, max_length, batch_size, progress):
        device = next(self.towers.parameters()).device
        fn = self.towers.encode_question if side == "question" else self.towers.encode_answer
        out: torch.Tensor | None = None
        for idx, batch in self._batches(texts, contexts, max_length, batch_size,
                                        f"encode {side}s", progress):
            emb = fn(**{k: v.to(device) for k, v in batch.items()}).float().cpu()
            if out is None:
                out = torch.empty(len(texts), emb.shape[1])
            out[idx] = emb
        if out is None:
            return torch.empty(0, self.towers.output_dim)
        return retrieval_space(out, self.similarity)

    def encode_questions(self, texts: list[str], batch_size: int = 128,
                         progress: bool = True) -> torch.Tensor:
        return self._encode("question", texts, None, self.meta["max_question_length"],
                            batch_size, progress)

    def encode_answers(self, answers: list[Candidate] | list[str], batch_size: int = 128,
                       progress: bool = True) -> torch.Tensor:
        texts = [a.text if isinstance(a, Candidate) else a for a in answers]
        contexts = None
        if self.meta.get("answer_with_context"):
            if not all(isinstance(a, Candidate) for a in answers):
                raise ValueError("this model encodes sentence + context: pass Candidates")
            contexts = [a.context for a in answers]
        return self._encode("answer", texts, contexts, self.meta["max_answer_length"],
                            batch_size, progress)
