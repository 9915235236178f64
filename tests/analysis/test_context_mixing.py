"""transformer.analysis.context_mixing's arithmetic on hand-made vectors."""

import numpy as np

from transformer.analysis.context_mixing import MIN_SCORE, cosine_distances, normalized


def test_cosine_distances_are_one_minus_the_cosine_per_query_and_key():
    clean = np.array([[1.0, 0.0], [0.0, 2.0]])  # (q=2, d)
    zeroed = np.array([[[1.0, 0.0], [0.0, 3.0]],  # key 0 zeroed: nothing moved
                       [[0.0, 1.0], [-1.0, 0.0]]])  # key 1 zeroed: both turned 90 degrees
    got = cosine_distances(clean, zeroed)  # (q, k)
    np.testing.assert_allclose(got, [[0.0, 1.0], [0.0, 1.0]], atol=1e-12)
    # a zero vector counts as unmoved rather than NaN
    assert cosine_distances(np.zeros((1, 2)), np.ones((1, 1, 2)))[0, 0] == 0.0


def test_normalized_rows_drop_noise_then_sum_to_one_and_empty_rows_stay_empty():
    scores = np.array([[0.2, 0.6, MIN_SCORE / 2], [MIN_SCORE / 3, 0.0, 0.0]])
    got = normalized(scores)
    np.testing.assert_allclose(got[0], [0.25, 0.75, 0.0])
    assert (got[1] == 0).all()
