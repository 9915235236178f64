"""transformer.core.kinds: the three attention kinds as data, the one head label format with its parser,
every head's label, layer counts from a config, and the one head-mask builder. (Moved here from
the figures' tests of figures.compare's labels and figures.decoding's ablation labels.)"""

import numpy as np
import pytest

from transformer.core.kinds import (
    KIND_NAMES,
    KINDS,
    head_label,
    head_labels,
    head_masks,
    kind,
    kind_by_label,
    layer_counts,
    parse_head_label,
)
from transformer.model.config import TransformerConfig

CONFIG = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=4, dff=32,
                           num_encoder_layers=3, num_decoder_layers=2, max_len=16)


def test_the_three_kinds_and_their_token_sides():
    assert KIND_NAMES == ("encoder", "decoder", "cross")
    sides = {name: (k.query_side, k.key_side) for name, k in KINDS.items()}
    assert sides == {"encoder": ("source", "source"), "decoder": ("target", "target"),
                     "cross": ("target", "source")}
    assert (KINDS["cross"].query_tokens, KINDS["cross"].key_tokens) == ("target_tokens",
                                                                        "source_tokens")
    assert KINDS["decoder"].mask == "decoder_mask"
    assert kind("cross") is KINDS["cross"]
    with pytest.raises(ValueError, match="must be one of"):
        kind("self")


def test_kind_by_label():
    for k in KINDS.values():
        assert kind_by_label(k.label) is k
    assert kind_by_label("Cross-attention").name == "cross"
    with pytest.raises(ValueError, match="no attention kind is labelled 'Cross'"):
        kind_by_label("Cross")


def test_layer_counts():
    assert layer_counts(CONFIG) == {"encoder": 3, "decoder": 2, "cross": 2}
    assert [KINDS[name].num_layers(CONFIG) for name in KIND_NAMES] == [3, 2, 2]


@pytest.mark.parametrize("head", [("encoder", 0, 0), ("decoder", 3, 7), ("cross", 1, 2),
                                  ("cross", 12, 10)])
def test_head_label_round_trip(head):
    assert parse_head_label(head_label(*head)) == head


def test_head_label_format_and_errors():
    assert head_label("cross", 1, 2) == "cross L1 H2"
    assert head_label("decoder", np.int64(0), np.int64(3)) == "decoder L0 H3"
    assert parse_head_label(" cross L1 H2 ") == ("cross", 1, 2)
    for bad in ["cross L1", "self L0 H0", "enc L0 H0", "cross L-1 H0", "", "cross 1 2"]:
        with pytest.raises(ValueError, match="cross L1 H2"):
            parse_head_label(bad)
    with pytest.raises(ValueError, match="kind must be one of"):
        head_label("self", 0, 0)
    with pytest.raises(ValueError, match="layer and head must be >= 0"):
        head_label("cross", -1, 0)


def test_head_labels_kind_by_kind_layer_by_layer():
    assert head_labels({"encoder": (1, 2), "cross": (2, 1)}) == [
        "encoder L0 H0", "encoder L0 H1", "cross L0 H0", "cross L1 H0"]
    assert head_labels({"encoder": (1, 1), "cross": (1, 1)}, kinds=("cross", "encoder")) == [
        "cross L0 H0", "encoder L0 H0"]
    every = head_labels({k: (n, CONFIG.num_heads) for k, n in layer_counts(CONFIG).items()})
    assert len(every) == (3 + 2 + 2) * 4 and len(set(every)) == len(every)
    assert every[0] == "encoder L0 H0" and "decoder L1 H3" in every and every[-1] == "cross L1 H3"


def test_head_masks_silence_labels_and_tuples():
    masks = head_masks(CONFIG, ["cross L1 H2", ("decoder", 0, 0), "encoder L2 H3"])
    assert {k: v.shape for k, v in masks.items()} == {
        "encoder": (3, 4), "decoder": (2, 4), "cross": (2, 4)}
    assert all(m.dtype == np.float32 for m in masks.values())
    for name, (layer, head) in {"cross": (1, 2), "decoder": (0, 0), "encoder": (2, 3)}.items():
        expected = np.ones_like(masks[name])
        expected[layer, head] = 0
        np.testing.assert_array_equal(masks[name], expected)
    every = head_labels({k: (n, CONFIG.num_heads) for k, n in layer_counts(CONFIG).items()})
    assert all(not m.any() for m in head_masks(CONFIG, every).values())
    assert all(m.all() for m in head_masks(CONFIG).values())


def test_head_masks_start_from_given_masks_without_changing_them():
    given = np.ones((2, 4), np.float32)
    given[0, 1] = 0.0
    masks = head_masks(CONFIG, ["cross L1 H0"], given={"cross": given})
    np.testing.assert_array_equal(masks["cross"], [[1, 0, 1, 1], [0, 1, 1, 1]])
    assert given[1, 0] == 1.0  # a copy was changed, not the caller's array
    with pytest.raises(ValueError, match=r"shape \(2, 4\) \(layers, heads\), got \(3, 4\)"):
        head_masks(CONFIG, given={"cross": np.ones((3, 4))})


@pytest.mark.parametrize("silenced, message", [
    (["cross L2 H0"], "the model has 2 cross layers"),
    (["encoder L0 H4"], "the model has 4 heads per layer"),
    (["self L0 H0"], "cross L1 H2"),
    (["cross L0"], "cross L1 H2"),
    ([("cross", 0)], "a silenced head must be"),
])
def test_head_masks_reject_heads_the_model_does_not_have(silenced, message):
    with pytest.raises(ValueError, match=message):
        head_masks(CONFIG, silenced)
