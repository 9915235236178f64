"""transformer.analysis.alti_logit's arithmetic on small hand-made inputs (the model-level
oracle is tests/inference/test_alti_logit.py)."""

import numpy as np
import pytest

from transformer.analysis.alti import Norm
from transformer.analysis.alti_logit import alti_logit, readouts


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_the_adjoint_is_the_transpose_of_the_linearised_norm(kind):
    rng = np.random.default_rng(0)
    norm = Norm(kind, rng.normal(size=6), rng.normal(size=6) if kind == "layer" else None, 1e-5)
    z, u, v = rng.normal(size=(3, 6)), rng.normal(size=(3, 6)), rng.normal(size=(3, 6))
    scale = norm.scale(z)
    np.testing.assert_allclose((u * norm.linear(v, scale)).sum(-1),
                               (norm.adjoint(u, scale) * v).sum(-1), atol=1e-12)


def test_post_ln_readouts_go_down_through_every_later_norm():
    rng = np.random.default_rng(1)
    norms = [{k: (Norm("rms", rng.normal(size=4), None, 1e-6), rng.uniform(0.5, 2, (2, 1)))
              for k in ("self", "cross", "ffn")} for _ in range(2)]
    u = rng.normal(size=(2, 4))
    got = readouts(u, 2, post_ln=norms)
    down = u
    for layer in (1, 0):
        for k in ("ffn", "cross", "self"):
            down = norms[layer][k][0].adjoint(down, norms[layer][k][1])
            if k != "ffn":
                np.testing.assert_allclose(got[k][layer], down)


def test_updates_spread_over_the_inputs_by_the_rollout():
    """One decoder layer, 2 source tokens, 2 steps: the self updates reach the prefix tokens
    themselves (before the first layer each position is its own token), the cross updates the
    source through R_enc."""
    self_updates = [np.array([[1.0, 0.0], [0.5, 2.0]])]
    cross_updates = [np.array([[3.0, -1.0], [0.0, 1.0]])]
    r_enc = np.array([[0.75, 0.25], [0.5, 0.5]])
    got = alti_logit(self_updates, cross_updates, r_enc, np.zeros((1, 2, 4)))
    np.testing.assert_allclose(got["source"], cross_updates[0] @ r_enc)
    np.testing.assert_allclose(got["target"], self_updates[0])
    np.testing.assert_allclose(got["layer_source"][0], got["source"])
