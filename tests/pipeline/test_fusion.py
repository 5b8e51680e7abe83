import numpy as np
import pytest

from retrieval_qa.pipeline.fusion import average_ranks, convex, normalise, rrf, simplex_grid


def _as_dict(fused):
    return dict(zip(fused[0].tolist(), fused[1].tolist(), strict=True))


def test_average_ranks_share_ties():
    assert average_ranks(np.array([3.0, 5.0, 3.0, 1.0])).tolist() == [2.5, 1.0, 2.5, 4.0]


def test_rrf_sums_reciprocal_ranks_over_the_lists_that_hold_a_candidate():
    a = (np.array([7, 3, 5]), np.array([9.0, 4.0, 4.0]))  # 3 and 5 tie: rank 2.5 each
    b = (np.array([5, 8]), np.array([0.8, 0.1]))
    got = _as_dict(rrf([a, b], k=10))
    assert got == pytest.approx({7: 1 / 11, 3: 1 / 12.5, 5: 1 / 12.5 + 1 / 11, 8: 1 / 12})


def test_normalisations():
    s = np.array([2.0, 4.0, 6.0])
    assert normalise(s, "minmax").tolist() == [0.0, 0.5, 1.0]
    assert normalise(np.array([3.0, 3.0]), "minmax").tolist() == [1.0, 1.0]
    z = normalise(s, "zscore")
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    assert normalise(np.array([3.0, 3.0]), "zscore").tolist() == [0.0, 0.0]


def test_convex_minmax_fills_a_missing_candidate_with_the_lists_minimum():
    a = (np.array([1, 2, 3]), np.array([10.0, 6.0, 2.0]))  # minmax 1, 0.5, 0
    b = (np.array([3, 4]), np.array([0.9, 0.5]))          # minmax 1, 0
    got = _as_dict(convex([a, b], [0.25, 0.75]))
    assert got == pytest.approx({1: 0.25, 2: 0.125, 3: 0.75, 4: 0.0})


def test_convex_zscore_missing_takes_the_lowest_z():
    a = (np.array([1, 2]), np.array([1.0, 3.0]))  # z -1, 1
    b = (np.array([2, 5]), np.array([5.0, 1.0]))  # z 1, -1
    got = _as_dict(convex([a, b], [0.5, 0.5], "zscore"))
    assert got == pytest.approx({1: -1.0, 2: 1.0, 5: -1.0})


def test_simplex_grid_covers_every_weight_vector_summing_to_one():
    g = simplex_grid(3, 0.5)
    assert sorted(map(tuple, g.tolist())) == sorted([(1, 0, 0), (0, 1, 0), (0, 0, 1),
                                                     (0.5, 0.5, 0), (0.5, 0, 0.5),
                                                     (0, 0.5, 0.5)])
    assert len(simplex_grid(3, 0.1)) == 66
