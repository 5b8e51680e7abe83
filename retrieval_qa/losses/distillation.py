"""Distillation of a teacher's scores over each question's candidate list into a student.

Each question ``b`` has a list of ``L`` candidates (column 0 its gold sentence, then the
first stage's negatives); ``mask[b, j]`` says which entries exist (a question whose first
stage gave fewer negatives has padded entries: they take no part and get no gradient).
With ``s = student / student_temperature`` and ``t = teacher / teacher_temperature``:

* ``kl``: ``KL(p_t || p_s) = sum_j p_t,j (log p_t,j - log p_s,j)``, ``p = softmax`` over the
  question's existing entries, averaged over the questions with at least two entries (a
  list of one entry has nothing to distil; such questions count for nothing);
* ``margin_mse`` (Hofstaetter et al. 2020, listwise): the mean over the existing negatives
  ``j >= 1`` of ``((s_0 - s_j) - (t_0 - t_j))^2``: the student copies the teacher's margin
  between the gold sentence and each negative.

The teacher's scores are constants (no gradient). Computed in float32.
"""

from __future__ import annotations

import torch
from torch import nn

from .precision import float32_region

KINDS = ("kl", "margin_mse")


def _checked(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> None:
    if student.dim() != 2 or student.shape != teacher.shape or student.shape != mask.shape:
        raise ValueError(f"student {tuple(student.shape)}, teacher {tuple(teacher.shape)} and "
                         f"mask {tuple(mask.shape)} must have one shape [B, L]")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {mask.dtype}")
    if student.shape[1] and not bool(mask[:, 0].all()):
        raise ValueError("column 0 (each question's gold sentence) must exist in every row")


def list_kl(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
            student_temperature: float, teacher_temperature: float) -> torch.Tensor:
    """Mean ``KL(softmax(teacher / T_t) || softmax(student / T_s))`` over the rows of
    ``mask`` with at least two entries (see the module docstring).

    Args:
        student: the student's scores ``[B, L]`` of each question's list (column 0 gold).
        teacher: the teacher's scores ``[B, L]``, same layout; no gradient.
        mask: bool ``[B, L]``, the entries that exist (column 0 must exist in every row).
        student_temperature: ``T_s`` (> 0), divides ``student``.
        teacher_temperature: ``T_t`` (> 0), divides ``teacher``.

    Returns:
        The scalar mean KL (0, still in the graph, when no row has two entries).
    """
    _checked(student, teacher, mask)
    with float32_region(student, teacher) as (student, teacher):
        low = torch.finfo(torch.float32).min
        s = torch.where(mask, student / student_temperature, low)
        t = torch.where(mask, teacher.detach() / teacher_temperature, low)
        log_ps, log_pt = torch.log_softmax(s, dim=1), torch.log_softmax(t, dim=1)
        per_entry = torch.where(mask, log_pt.exp() * (log_pt - log_ps), 0.0)
        rows = mask.sum(1) >= 2
        if not bool(rows.any()):
            return (s * 0).sum()  # nothing to distil: 0, still part of the graph
        return per_entry.sum(1)[rows].mean()


def margin_mse(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor,
               student_temperature: float, teacher_temperature: float) -> torch.Tensor:
    """Mean over the existing negatives of ``((s_0 - s_j) - (t_0 - t_j))^2`` with
    ``s = student / T_s``, ``t = teacher / T_t`` (see the module docstring).

    Args:
        student: the student's scores ``[B, L]`` of each question's list (column 0 gold).
        teacher: the teacher's scores ``[B, L]``, same layout; no gradient.
        mask: bool ``[B, L]``, the entries that exist (column 0 must exist in every row).
        student_temperature: ``T_s`` (> 0), divides ``student``.
        teacher_temperature: ``T_t`` (> 0), divides ``teacher``.

    Returns:
        The scalar mean squared margin error (0, still in the graph, without negatives).
    """
    _checked(student, teacher, mask)
    with float32_region(student, teacher) as (student, teacher):
        s = student / student_temperature
        t = teacher.detach() / teacher_temperature
        error = (s[:, :1] - s[:, 1:]) - (t[:, :1] - t[:, 1:])
        negatives = mask[:, 1:]
        if not bool(negatives.any()):
            return (s * 0).sum()
        return error.pow(2)[negatives].mean()


class ListDistillationLoss(nn.Module):
    """``loss(student [B, L], teacher [B, L], mask [B, L]) -> scalar``: :func:`list_kl` or
    :func:`margin_mse` (``kind``) with the two temperatures.

    Args:
        kind: ``"kl"`` or ``"margin_mse"`` (``model.distillation.loss``,
            conf/model/distill.yaml).
        student_temperature: ``T_s`` (> 0), divides the student's scores.
        teacher_temperature: ``T_t`` (> 0), divides the teacher's scores.

    ``forward`` takes the student's and the teacher's scores ``[B, L]`` of each question's
    list (column 0 its gold sentence) and the bool ``mask`` ``[B, L]`` of the entries that
    exist; the teacher's scores get no gradient.

    Example:

        >>> import torch
        >>> loss = ListDistillationLoss(kind="kl", student_temperature=1.0,
        ...                             teacher_temperature=1.0)
        >>> scores = torch.tensor([[3.0, 1.0, 0.0], [2.0, 0.5, 0.0]])
        >>> mask = torch.tensor([[True, True, True], [True, True, False]])
        >>> round(float(loss(scores, scores, mask)), 2)  # the student copies the teacher
        0.0
        >>> bool(loss(-scores, scores, mask) > 0)
        True
    """

    def __init__(self, *, kind: str, student_temperature: float,
                 teacher_temperature: float) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"distillation loss {kind!r}; expected one of {list(KINDS)}")
        for name, value in (("student_temperature", student_temperature),
                            ("teacher_temperature", teacher_temperature)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.kind = kind
        self.student_temperature = float(student_temperature)
        self.teacher_temperature = float(teacher_temperature)

    def forward(self, student: torch.Tensor, teacher: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        fn = list_kl if self.kind == "kl" else margin_mse
        return fn(student, teacher, mask, self.student_temperature, self.teacher_temperature)
