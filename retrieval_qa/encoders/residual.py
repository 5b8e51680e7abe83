"""Residual refinement networks over frozen embeddings (residual-embedding paper, 3.2,
Figures 2-3): ``y = l2norm(x + sf * branch(x))``.

- FCRR: the branch is 2 fully connected layers (``D -> hidden -> D``, ReLU, dropout).
- ConvRR: the branch reads the D-vector as a 1-channel sequence, one 1-d convolution (1024
  filters, window 5, stride 2), a max over positions, ReLU, dropout and a linear map back to
  D. (Figure 3's exact head is not in the text; max-pooling keeps the head's size
  independent of D, so the 384-d MiniLM vectors cost as little as GloVe's 50-d ones.)
- FCRR + ConvRR: an FCRR block followed by a ConvRR block (Tables 9-10, "FCRR + ConvRR").

:class:`FCRR`, :class:`ConvRR` and :class:`FCRRConvRR` are the refiners that
``model.refiner`` names (its ``_target_``, or the short names ``fcrr``, ``convrr`` and
``fcrr_convrr`` of retrieval_qa/registry.py); their keyword arguments are the keys of
conf/model/residual.yaml (the paper: sf = 1 for both models, dropout 0.1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ResidualBlock(nn.Module):
    """``forward(x[B, D]) = x + sf * branch(x)``, l2-normalised when ``normalize``.

    Args:
        branch: the residual branch, ``[B, D] -> [B, D]``.
        sf: the residual scale factor.
        normalize: l2-normalise the output.

    Example:

        >>> import torch
        >>> from torch import nn
        >>> block = ResidualBlock(nn.Identity(), sf=1.0)  # l2norm(2x) = l2norm(x)
        >>> block(torch.tensor([[3.0, 4.0]]))
        tensor([[0.6000, 0.8000]])
    """

    def __init__(self, branch: nn.Module, *, sf: float, normalize: bool = True) -> None:
        super().__init__()
        self.branch = branch
        self.sf = float(sf)
        self.normalize = normalize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.sf * self.branch(x)
        return F.normalize(y, dim=-1) if self.normalize else y


class FCBranch(nn.Sequential):
    """Two fully connected layers: ``Linear(D, hidden) - ReLU - Dropout - Linear(hidden, D)``.

    Args:
        dim: ``D``, the embeddings' width.
        hidden: the hidden width; None (or 0): ``dim``.
        dropout: the dropout probability after the ReLU.
    """

    def __init__(self, dim: int, *, hidden: int | None, dropout: float) -> None:
        hidden = hidden or dim
        super().__init__(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, dim))


class ConvBranch(nn.Module):
    """``Conv1d(1, filters, window, stride)`` over the vector's D positions, max over
    positions, ReLU, dropout, ``Linear(filters, D)``.

    Args:
        dim: ``D``, the embeddings' width (at least ``window``).
        filters: the convolution's output channels.
        window: the convolution's kernel size, in vector positions.
        stride: the convolution's stride.
        dropout: the dropout probability on the pooled filters.
    """

    def __init__(self, dim: int, *, filters: int, window: int, stride: int,
                 dropout: float) -> None:
        super().__init__()
        if dim < window:
            raise ValueError(f"ConvRR: embedding dimension {dim} is shorter than the window "
                             f"{window}; use a smaller conv window")
        self.conv = nn.Conv1d(1, filters, window, stride)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(filters, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # max over positions, then ReLU (the same value as ReLU then max: ReLU is monotonic),
        # then dropout on the pooled filters
        return self.out(self.dropout(F.relu(self.max_conv(x))))

    def max_conv(self, x: torch.Tensor, rows: int = 32) -> torch.Tensor:
        """``self.conv(x.unsqueeze(1)).amax(-1)`` at a third of the cost on a CPU: the
        position of each filter's maximum is found without autograd (``rows`` vectors at a
        time, so the [rows, filters, positions] scores stay in cache), then only the selected
        windows are convolved again with autograd, so the backward pass touches
        [B, filters, window] values instead of [B, filters, positions]. Same values; the
        same gradients except on exact ties between positions (measure zero for real
        inputs), where ``amax`` would split the gradient and this gives it to one position."""
        w = self.conv.weight.squeeze(1)                            # [F, window]
        windows = x.unfold(1, w.shape[1], self.conv.stride[0])     # [B, L, window]
        with torch.no_grad():
            at = torch.cat([torch.matmul(w, chunk.transpose(1, 2)).argmax(-1)
                            for chunk in windows.split(rows)])     # [B, F]
        picked = windows.gather(1, at.unsqueeze(-1).expand(-1, -1, w.shape[1]))
        return (picked * w).sum(-1) + self.conv.bias               # [B, F]


class FCRR(ResidualBlock):
    """FCRR for ``dim``-dimensional embeddings: ``l2norm(x + sf * FC(x))``, the branch two
    fully connected layers (:class:`FCBranch`).

    Args:
        dim: ``D``, the embeddings' width.
        sf: the residual scale factor (conf/model/residual.yaml ``sf``).
        dropout: the branch's dropout probability.
        fc_hidden: the branch's hidden width; None: ``dim``.
    """

    def __init__(self, dim: int, *, sf: float, dropout: float, fc_hidden: int | None) -> None:
        super().__init__(FCBranch(dim, hidden=fc_hidden, dropout=dropout), sf=sf)


class ConvRR(ResidualBlock):
    """ConvRR for ``dim``-dimensional embeddings: ``l2norm(x + sf * Conv(x))``, the branch a
    convolution (:class:`ConvBranch`).

    Args:
        dim: ``D``, the embeddings' width (at least ``conv_window``).
        sf: the residual scale factor (conf/model/residual.yaml ``sf``).
        dropout: the branch's dropout probability.
        conv_filters: the convolution's filters.
        conv_window: the convolution's width, in vector positions.
        conv_stride: the convolution's stride.
    """

    def __init__(self, dim: int, *, sf: float, dropout: float, conv_filters: int,
                 conv_window: int, conv_stride: int) -> None:
        super().__init__(ConvBranch(dim, filters=conv_filters, window=conv_window,
                                    stride=conv_stride, dropout=dropout), sf=sf)


class FCRRConvRR(nn.Sequential):
    """An :class:`FCRR` block, then a :class:`ConvRR` block ("FCRR + ConvRR").

    Args:
        dim: ``D``, the embeddings' width.
        sf: the residual scale factor of both blocks.
        dropout: the dropout probability of both branches.
        fc_hidden: the FCRR branch's hidden width; None: ``dim``.
        conv_filters: the ConvRR convolution's filters.
        conv_window: the ConvRR convolution's width.
        conv_stride: the ConvRR convolution's stride.
    """

    def __init__(self, dim: int, *, sf: float, dropout: float, fc_hidden: int | None,
                 conv_filters: int, conv_window: int, conv_stride: int) -> None:
        super().__init__(FCRR(dim, sf=sf, dropout=dropout, fc_hidden=fc_hidden),
                         ConvRR(dim, sf=sf, dropout=dropout, conv_filters=conv_filters,
                                conv_window=conv_window, conv_stride=conv_stride))
