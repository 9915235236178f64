"""explorer.heads: the head labels a model or its maps offer, in transformer.core.kinds' one format,
and one head's map with its token sides."""

import numpy as np
import pytest

from explorer.heads import head_map, labels_of_maps, labels_of_model
from transformer import TransformerConfig


@pytest.fixture(scope="module")
def config():
    return TransformerConfig(src_vocab_size=50, tgt_vocab_size=40, d_model=8, num_heads=2, dff=16,
                             num_encoder_layers=1, num_decoder_layers=2, max_len=16)


@pytest.fixture(scope="module")
def maps():
    """Maps shaped like OpenedModel.attention's for 1 encoder and 2 decoder layers of 2 heads,
    N = 3 source and T = 4 target tokens; every entry distinct."""
    n, t = 3, 4
    return {"encoder": np.arange(1 * 2 * n * n, dtype=float).reshape(1, 2, n, n),
            "decoder": 100 + np.arange(2 * 2 * t * t, dtype=float).reshape(2, 2, t, t),
            "cross": 200 + np.arange(2 * 2 * t * n, dtype=float).reshape(2, 2, t, n),
            "source_tokens": ["<s>", "a", "</s>"], "target_tokens": ["<s>", "x", "y", "z"]}


def test_labels_of_a_model_and_of_its_maps_agree(config, maps):
    labels = labels_of_model(config)
    assert labels == labels_of_maps(maps)
    assert labels == ["encoder L0 H0", "encoder L0 H1",
                      "decoder L0 H0", "decoder L0 H1", "decoder L1 H0", "decoder L1 H1",
                      "cross L0 H0", "cross L0 H1", "cross L1 H0", "cross L1 H1"]


def test_head_map_takes_the_heads_weights_and_token_sides(maps):
    weights, queries, keys = head_map(maps, "cross L1 H0")
    np.testing.assert_array_equal(weights, maps["cross"][1, 0])
    assert (queries, keys) == (maps["target_tokens"], maps["source_tokens"])
    weights, queries, keys = head_map(maps, "encoder L0 H1")
    np.testing.assert_array_equal(weights, maps["encoder"][0, 1])
    assert queries == keys == maps["source_tokens"]
    with pytest.raises(ValueError, match="cross L1 H2"):
        head_map(maps, "self L0 H0")  # the old decoding-page format is not a head label
