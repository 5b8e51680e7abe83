"""The list distillation losses on plain tensors: KL of equal distributions is 0, the gradient
moves the student towards the teacher, the temperatures act as written, margin-MSE equals a
hand computation, and padded list entries neither count nor get a gradient."""

import math

import pytest
import torch

from retrieval_qa.losses.distillation import ListDistillationLoss, list_kl, margin_mse

TEACHER = torch.tensor([[3.0, 1.0, 0.5, -1.0], [0.2, 2.5, 0.0, 1.0]])
STUDENT = torch.tensor([[1.0, 2.0, 0.0, 0.5], [1.5, -0.5, 0.3, 0.0]])
FULL = torch.ones(2, 4, dtype=torch.bool)


def _kl_by_hand(student, teacher, ts=1.0, tt=1.0):
    """KL(p_t || p_s) of one list, written out with math."""
    def softmax(xs):
        e = [math.exp(x) for x in xs]
        return [v / sum(e) for v in e]
    ps = softmax([x / ts for x in student])
    pt = softmax([x / tt for x in teacher])
    return sum(a * (math.log(a) - math.log(b)) for a, b in zip(pt, ps, strict=True))


def test_kl_of_equal_distributions_is_zero_and_otherwise_the_written_sum():
    assert float(list_kl(TEACHER, TEACHER, FULL, 1.0, 1.0)) == pytest.approx(0.0, abs=1e-6)
    # equal distributions under different temperatures: student / 2 == teacher / 4
    assert float(list_kl(TEACHER / 2, TEACHER, FULL, 1.0, 2.0)) == pytest.approx(0, abs=1e-6)
    expected = sum(_kl_by_hand(s.tolist(), t.tolist()) for s, t in zip(STUDENT, TEACHER,
                                                                        strict=True)) / 2
    assert float(list_kl(STUDENT, TEACHER, FULL, 1.0, 1.0)) == pytest.approx(expected, rel=1e-5)
    assert float(list_kl(STUDENT, TEACHER, FULL, 1.0, 1.0)) > 0


def test_the_kl_gradient_moves_the_student_towards_the_teacher():
    student = STUDENT.clone().requires_grad_(True)
    teacher = TEACHER.clone().requires_grad_(True)
    list_kl(student, teacher, FULL, 2.0, 1.0).backward()
    assert teacher.grad is None or not teacher.grad.any()  # the teacher is a constant
    # d KL / d s_j = (p_s,j - p_t,j) / (T_s * rows): descent raises what the teacher prefers
    ps = torch.softmax(STUDENT / 2.0, 1)
    pt = torch.softmax(TEACHER, 1)
    torch.testing.assert_close(student.grad, (ps - pt) / 2.0 / 2)
    moved = list_kl(student.detach() - 0.5 * student.grad, TEACHER, FULL, 2.0, 1.0)
    assert moved < list_kl(STUDENT, TEACHER, FULL, 2.0, 1.0)


def test_temperatures_scale_the_scores_before_the_softmax():
    for ts, tt in ((0.5, 3.0), (4.0, 0.25)):
        torch.testing.assert_close(list_kl(STUDENT, TEACHER, FULL, ts, tt),
                                   list_kl(STUDENT / ts, TEACHER / tt, FULL, 1.0, 1.0))
        by_hand = sum(_kl_by_hand(s.tolist(), t.tolist(), ts, tt)
                      for s, t in zip(STUDENT, TEACHER, strict=True)) / 2
        assert float(list_kl(STUDENT, TEACHER, FULL, ts, tt)) == pytest.approx(by_hand, rel=1e-5)
    # a cold teacher is its argmax: the KL becomes the cross-entropy of that entry
    cold = list_kl(STUDENT, TEACHER, FULL, 1.0, 1e-3)
    ce = -torch.log_softmax(STUDENT, 1)[torch.arange(2), TEACHER.argmax(1)].mean()
    torch.testing.assert_close(cold, ce, atol=1e-4, rtol=1e-4)
    # a hot teacher is uniform: KL(uniform || p_s) = -log L - mean_j log p_s,j
    hot = list_kl(STUDENT, TEACHER, FULL, 1.0, 1e6)
    uniform = (-math.log(4) - torch.log_softmax(STUDENT, 1).mean(1)).mean()
    torch.testing.assert_close(hot, uniform, atol=1e-4, rtol=1e-4)


def test_margin_mse_equals_the_hand_computation():
    s, t = STUDENT / 2.0, TEACHER / 0.5
    by_hand = [((s[b, 0] - s[b, j]) - (t[b, 0] - t[b, j])) ** 2
               for b in range(2) for j in range(1, 4)]
    expected = float(sum(by_hand) / len(by_hand))
    assert float(margin_mse(STUDENT, TEACHER, FULL, 2.0, 0.5)) == pytest.approx(expected,
                                                                                 rel=1e-5)
    # row 0 written out in numbers: s = [0.5, 1, 0, 0.25], t = [6, 2, 1, -2]
    row0 = ((0.5 - 1 - 4) ** 2 + (0.5 - 0 - 5) ** 2 + (0.25 - 8) ** 2) / 3
    one = torch.tensor([[True, True, True, True], [True, False, False, False]])
    assert float(margin_mse(STUDENT, TEACHER, one, 2.0, 0.5)) == pytest.approx(row0, rel=1e-5)
    assert float(margin_mse(TEACHER + 7.0, TEACHER, FULL, 1.0, 1.0)) == pytest.approx(0, abs=1e-5)


@pytest.mark.parametrize("fn", [list_kl, margin_mse])
def test_padded_entries_do_not_count_and_get_no_gradient(fn):
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    student = STUDENT.clone()
    student[mask.logical_not()] = 1e4           # garbage in the padding
    teacher = TEACHER.clone()
    teacher[mask.logical_not()] = -1e4
    student.requires_grad_(True)
    loss = fn(student, teacher, mask, 1.0, 1.0)
    loss.backward()
    assert not student.grad[mask.logical_not()].any()
    # equal to the loss over the unpadded lists alone
    rows = [fn(STUDENT[b:b + 1, :n], TEACHER[b:b + 1, :n], torch.ones(1, n, dtype=torch.bool),
               1.0, 1.0) for b, n in ((0, 3), (1, 2))]
    expected = sum(rows) / 2 if fn is list_kl else (2 * rows[0] + rows[1]) / 3
    torch.testing.assert_close(loss, expected)


def test_lists_of_one_entry_have_nothing_to_distil():
    one = torch.tensor([[True, False, False, False], [True, True, True, True]])
    torch.testing.assert_close(list_kl(STUDENT, TEACHER, one, 1.0, 1.0),
                               list_kl(STUDENT[1:], TEACHER[1:], FULL[1:], 1.0, 1.0))
    alone = torch.tensor([[True, False, False, False]] * 2)
    student = STUDENT.clone().requires_grad_(True)
    for fn in (list_kl, margin_mse):
        zero = fn(student, TEACHER, alone, 1.0, 1.0)
        zero.backward()
        assert float(zero.detach()) == 0.0 and not student.grad.any()


def test_the_module_checks_its_settings_and_inputs():
    loss = ListDistillationLoss(kind="margin_mse", student_temperature=2.0,
                                teacher_temperature=0.5)
    torch.testing.assert_close(loss(STUDENT, TEACHER, FULL),
                               margin_mse(STUDENT, TEACHER, FULL, 2.0, 0.5))
    with pytest.raises(ValueError, match="expected one of"):
        ListDistillationLoss(kind="mse", student_temperature=1.0, teacher_temperature=1.0)
    with pytest.raises(ValueError, match="teacher_temperature must be > 0"):
        ListDistillationLoss(kind="kl", student_temperature=1.0, teacher_temperature=0.0)
    with pytest.raises(ValueError, match="one shape"):
        list_kl(STUDENT, TEACHER[:, :3], FULL, 1.0, 1.0)
    with pytest.raises(ValueError, match="column 0"):
        list_kl(STUDENT, TEACHER, torch.zeros(2, 4, dtype=torch.bool), 1.0, 1.0)
    with pytest.raises(TypeError, match="bool"):
        list_kl(STUDENT, TEACHER, FULL.float(), 1.0, 1.0)
