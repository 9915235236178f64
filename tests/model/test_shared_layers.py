"""Depth costs compute, not tracing (issue 36, item 3): inside the compiled functions every model
of a config shares, a stack of SHARED_LAYER_MIN layers or more runs each layer through one layer
function traced once (the first layer its template, each layer's weights its arguments). Here:
it computes exactly what the layers traced one by one compute (decode, beam search, maps with
Q/K/V, head masks, T5's relative positions), and it is traced once whatever the depth.

The time it saves is measured, not asserted (24 + 24 layers: trace and first call of the greedy
loop and the maps; python /tmp-free command in bench/real_models.py's docstring)."""

import numpy as np
import pytest

from testkit.variants import random_variant
from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.inference import compiled
from transformer.model import transformer as model_module

SOURCE, TARGET = "Friday, March 5, 2021", "2021-03-05"


@pytest.fixture(scope="module")
def base():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def outputs(ckpt):
    """What the pages ask of a model, from fresh compiled functions."""
    compiled._SHARED_LOOPS.clear()
    ckpt.model.__dict__.pop("_layer_functions", None)
    mask = {"cross": np.ones((ckpt.config.num_decoder_layers, ckpt.config.num_heads),
                             np.float32)}
    mask["cross"][1, 0] = 0
    greedy = ckpt.translate(SOURCE, head_mask=mask)
    beam = ckpt.translate(SOURCE, beam_width=3)
    maps = ckpt.attention(SOURCE, TARGET, details=True)
    return greedy, beam, maps


@pytest.mark.parametrize("overrides", [
    dict(num_encoder_layers=5, num_decoder_layers=6),
    dict(num_encoder_layers=4, num_decoder_layers=4, norm_first=True, norm="rms",
         relative_attention=True, relative_buckets=8, relative_max_distance=6,
         positional="none", feedforward="gated", activation="gelu_tanh", use_bias=False),
], ids=["post-LN", "T5-like"])
def test_the_layer_function_computes_what_the_unrolled_layers_compute(base, monkeypatch,
                                                                      overrides):
    ckpt = random_variant(base, seed=4, **overrides)
    shared = outputs(ckpt)
    assert set(ckpt.model.__dict__.get("_layer_functions", {})) == {"encoder", "decoder"}
    monkeypatch.setattr(model_module, "SHARED_LAYER_MIN", 10**6)  # every layer traced alone
    unrolled = outputs(ckpt)
    assert "_layer_functions" not in ckpt.model.__dict__
    for a, b in zip(shared[:2], unrolled[:2]):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose([s.log_prob for s in a.steps],
                                   [s.log_prob for s in b.steps], rtol=0, atol=1e-5)
    maps, reference = shared[2], unrolled[2]
    for key in reference:
        if isinstance(reference[key], np.ndarray) and reference[key].dtype.kind == "f":
            np.testing.assert_allclose(maps[key], reference[key], rtol=1e-5, atol=1e-5,
                                       err_msg=key)


def test_each_stack_is_traced_once_whatever_its_depth(base):
    ckpt = random_variant(base, seed=5, num_encoder_layers=8, num_decoder_layers=8)
    compiled._SHARED_LOOPS.clear()
    ckpt.translate(SOURCE)
    functions = ckpt.model.__dict__["_layer_functions"]
    # the greedy loop: the encoder once; the decoder once for its one step function
    assert functions["encoder"].experimental_get_tracing_count() == 1
    assert functions["decoder"].experimental_get_tracing_count() == 1
