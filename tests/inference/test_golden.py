"""Every number the app shows for the bundled checkpoints equals what was recorded before the
refactors (tests/fixtures/make_golden_maps.py): maps, Q/K/V, scores, log-probabilities, the
greedy translation with its per-step attention, and beam search."""

import numpy as np
import pytest
from fixtures.make_golden_maps import CHECKPOINTS, OUT, record


@pytest.fixture(scope="module")
def golden():
    with np.load(OUT, allow_pickle=False) as data:
        return dict(data)


@pytest.fixture(scope="module")
def now():
    return record()


def test_the_same_arrays_are_recorded(golden, now):
    assert sorted(now) == sorted(golden)


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_numbers_are_unchanged(golden, now, checkpoint):
    keys = [k for k in golden if k.startswith(checkpoint + "/")]
    assert keys
    for key in keys:
        expected, actual = golden[key], now[key]
        assert actual.shape == expected.shape, key
        if expected.dtype.kind in "US":  # tokens
            assert actual.tolist() == expected.tolist(), key
        elif expected.dtype.kind in "iub":
            np.testing.assert_array_equal(actual, expected, err_msg=key)
        else:
            # float32 arithmetic in another order (TensorFlow's own kernels instead of oneDNN's,
            # one 2-D matmul per projection) moves these by at most 2.4e-6; a wrong mask, head
            # or weight moves them by far more.
            np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=key)
