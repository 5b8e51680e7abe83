"""Encoding batches of a few fixed shapes, each replayed as one CUDA graph.

Encoding a pool on a GPU is bound by the host: a small transformer's forward is a few hundred
kernel launches, each with Python and dispatch work, for kernels that finish in
microseconds. :class:`GraphedEncoder` pads every batch to ``rows`` rows and to a width that is
a multiple of ``width_multiple`` tokens (at most ``max_width``), so a pool's batches take a
handful of shapes. The first batch of a shape runs the tower once (warm-up), then captures
its forward as a CUDA graph; every later batch of that shape copies its ids into the graph's
input buffers and replays the graph: one launch.

Padding changes nothing that is computed for the real rows: padded positions have attention
mask 0 (a tower masks them, as for any padded batch), and the filler rows are dropped.
Filler rows attend to their first position only (mask 1 there), so no row is fully masked.

Where a tower cannot be captured (an operation that reads a value back to the host, as
``pack_padded_sequence`` does with the lengths of a recurrent tower), the first capture fails,
a warning says why, and this encoder runs every batch eagerly from then on. Off CUDA (CPU
tests) the padded batches run eagerly: the same shapes and results, no graphs.

The tensor a replay returns is the graph's own output buffer: read it (copy it out) before
the next call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

#: batch widths are padded up to a multiple of this many tokens (a few shapes per pool)
WIDTH_MULTIPLE = 16


def padded_width(w: int, multiple: int, max_width: int) -> int:
    """``w`` rounded up to a multiple of ``multiple``, but no wider than ``max_width`` (nor
    narrower than ``w``).

    Args:
        w: the batch's width, in tokens.
        multiple: the width step, in tokens.
        max_width: the widest padded width, in tokens.

    Example:

        >>> padded_width(17, 16, 64), padded_width(60, 16, 64), padded_width(70, 16, 64)
        (32, 64, 70)
    """
    return max(w, min(-(-w // multiple) * multiple, max_width))


class GraphedEncoder:
    """``encoder(batch) -> [n, D]`` for ``batch`` = ``{"input_ids", "attention_mask"[,
    "token_type_ids"]}``, each ``LongTensor[n, w]`` on the host, ``n <= rows``.

    Args:
        fn: the tower's encoding function of the same keyword arguments (called under the
            caller's autocast and inference mode; the caller must open autocast with
            ``cache_enabled=False`` when graphs are used: a graph may not keep a cached
            weight copy that the cache frees later).
        device: where the padded batches run (graphs only on CUDA).
        rows: the rows every batch is padded to (>= 1).
        max_width: the widest padded width, in tokens (>= 1).
        pad_id: the tokenizer's padding id (fills ``input_ids``; other keys are filled with 0).
        width_multiple: widths are padded up to a multiple of this many tokens.
        use_graphs: capture and replay CUDA graphs (on CUDA only); False: always eager.
    """

    def __init__(self, fn: Callable[..., torch.Tensor], device: torch.device, rows: int,
                 max_width: int, pad_id: int, width_multiple: int = WIDTH_MULTIPLE,
                 use_graphs: bool = True) -> None:
        if rows < 1 or max_width < 1 or width_multiple < 1:
            raise ValueError(f"rows={rows}, max_width={max_width}, "
                             f"width_multiple={width_multiple}; expected positive numbers")
        self.fn, self.device, self.rows = fn, torch.device(device), rows
        self.max_width, self.pad_id, self.width_multiple = max_width, pad_id, width_multiple
        self.use_graphs = use_graphs and self.device.type == "cuda"
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict, torch.Tensor]] = {}
        self.failure: str | None = None

    def width(self, w: int) -> int:
        """The padded width of a batch whose longest row has ``w`` tokens."""
        return padded_width(w, self.width_multiple, self.max_width)

    def pad(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` padded to ``[rows, width(w)]`` on the host."""
        n, w = batch["input_ids"].shape
        if n > self.rows:
            raise ValueError(f"a batch of {n} rows for an encoder of {self.rows} rows")
        width = self.width(w)
        pin = self.device.type == "cuda"  # page-locked: the copy to the GPU runs async
        out = {}
        for key, value in batch.items():
            fill = self.pad_id if key == "input_ids" else 0
            padded = torch.full((self.rows, width), fill, dtype=value.dtype, pin_memory=pin)
            padded[:n, :w] = value
            out[key] = padded
        out["attention_mask"][n:, 0] = 1  # filler rows: one position, never fully masked
        return out

    def __call__(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        n = batch["input_ids"].shape[0]
        padded = self.pad(batch)
        if not self.use_graphs:
            return self.fn(**{k: v.to(self.device, non_blocking=True)
                              for k, v in padded.items()})[:n]
        key = tuple((k, tuple(v.shape)) for k, v in sorted(padded.items()))
        if key not in self.graphs:
            try:
                self.graphs[key] = self._capture(padded)
            except Exception as exc:  # noqa: BLE001 - any capture failure: run eagerly
                self.failure = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                log.warning("CUDA graphs off for this encoder (capture failed: %s); "
                            "encoding eagerly", self.failure)
                self.use_graphs, self.graphs = False, {}
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                return self(batch)
        graph, inputs, output = self.graphs[key]
        for k, v in padded.items():
            inputs[k].copy_(v, non_blocking=True)
        graph.replay()
        return output[:n]

    def _capture(self, padded: dict[str, torch.Tensor]):
        inputs = {k: v.to(self.device) for k, v in padded.items()}
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):  # warm-up off the capture (lazy initialisation)
            self.fn(**inputs)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = self.fn(**inputs)
        return graph, inputs, output
