"""transformer.model.bounds: weights proven to compute finite float32 numbers for every input.

The speed on an opus-mt-sized model (75M weights, 300 MB) is measured, not asserted:
    .venv/bin/python -c "import time, numpy as np; from tests.model.test_bounds import
    opus_weights; from transformer.model.bounds import check_weight_bounds as c;
    cfg, w = opus_weights(); t = time.perf_counter(); c(cfg, w); print(time.perf_counter() - t)"
"""

from pathlib import Path

import numpy as np
import pytest

from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.checkpoint.errors import CheckpointError
from transformer.checkpoint.format import build_model
from transformer.model.bounds import SAFE_LIMIT, check_weight_bounds
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.model.weights import WeightError, assign_weights, weight_arrays, weight_shapes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCE_TABLE = "source_embedding/source_token_embedding/embeddings"


def opus_weights(vocab: int = 59_514, seed: int = 0):
    """(config, weights) of opus-mt-en-fr's shapes (as transformer.importers.hf.marian maps it:
    shared and tied embeddings with a logits bias, swish, post-LN), drawn as Glorot-uniform
    kernels, unit gains and zero biases: a freshly initialised model of that size."""
    config = TransformerConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=512, num_heads=8, dff=2048,
        num_encoder_layers=6, num_decoder_layers=6, max_len=512, positional="sinusoidal_concat",
        share_embeddings=True, tie_output=True, output_bias=True, activation="swish",
        layer_norm_epsilon=1e-5, pad_id=0, start_id=0, end_id=2, source_start=False)
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in weight_shapes(config).items():
        if name.endswith("gamma"):
            weights[name] = np.ones(shape, np.float32)
        elif len(shape) == 1:
            weights[name] = np.zeros(shape, np.float32)
        else:
            limit = np.sqrt(6 / sum(shape))
            weights[name] = rng.uniform(-limit, limit, shape).astype(np.float32)
    return config, weights


def small_config(**overrides) -> TransformerConfig:
    values = dict(src_vocab_size=23, tgt_vocab_size=29, d_model=16, num_heads=2, dff=32,
                  num_encoder_layers=2, num_decoder_layers=2, max_len=24, dropout_rate=0.0)
    values.update(overrides)
    return TransformerConfig(**values)


def random_weights(config, seed=0, scale=0.4) -> dict:
    rng = np.random.default_rng(seed)
    return {name: rng.normal(0.0, scale, shape).astype(np.float32)
            for name, shape in weight_shapes(config).items()}


def model_of(config, weights) -> Transformer:
    model = Transformer(config).build_weights()
    assign_weights(model, weights)
    return model


def refused(config, weights) -> str:
    with pytest.raises(WeightError) as info:
        check_weight_bounds(config, weights)
    message = str(info.value)
    assert message[:1].isupper() and message.endswith(".") and "\n" not in message
    return message


# ------------------------------------------------------------------ real models pass
def _real_models():
    from transformer.importers.tf_tutorial import convert_tf_tutorial

    tutorial = FIXTURES / "tutorial_dates"
    yield "dates.ckpt", load_checkpoint(DEFAULT_CHECKPOINT)
    yield "golden epoch 2", load_checkpoint(FIXTURES / "golden" / "dates.epoch02.ckpt")
    yield "Marian fixture", load_checkpoint(FIXTURES / "marian")
    yield "TF tutorial", convert_tf_tutorial(tutorial / "model.weights.h5",
                                             tutorial / "source_vocab.txt",
                                             tutorial / "target_vocab.txt")


def test_every_real_model_is_proven_safe_with_room_to_spare():
    for name, ckpt in _real_models():
        bounds = check_weight_bounds(ckpt.config, weight_arrays(ckpt.model))
        # loaded through build_model, so the check passed there too; its bounds are far from
        # the limit (a trained model's logits stay in the hundreds)
        assert 0 < bounds["logits"] < 1e4, (name, bounds)
        assert 0 < bounds["encoder"] < 1e4 and 0 < bounds["decoder"] < 1e4, (name, bounds)


def test_a_freshly_initialised_opus_mt_shaped_model_passes():
    config, weights = opus_weights(vocab=8_000)  # opus-mt's layers; a smaller vocabulary
    bounds = check_weight_bounds(config, weights)
    assert bounds["logits"] < 1e4


# ------------------------------------------------------------------ the bound is sound
@pytest.mark.parametrize("overrides", [
    {},
    {"norm_first": True, "activation": "gelu", "positional": "learned"},
    {"share_embeddings": True, "tgt_vocab_size": 23, "tie_output": True, "output_bias": True,
     "activation": "swish", "positional": "sinusoidal_concat", "scale_embeddings": False},
    {"head_dim": 5, "num_heads": 3, "norm_first": True, "layer_norm_epsilon": 1e-3},
    {"embedding_norm": True, "positional": "learned", "activation": "gelu"},  # BART
    {"norm_first": True, "positional": "sinusoidal_fairseq", "position_offset": 2},  # M2M100
    {"norm": "rms", "use_bias": False, "attention_scale": False, "positional": "none",
     "relative_attention": True, "relative_buckets": 8, "relative_max_distance": 10,
     "norm_first": True, "feedforward": "gated", "activation": "gelu_tanh",
     "output_bias": False},  # T5 v1.1
    {"norm": "rms", "use_bias": False, "attention_scale": False, "positional": "none",
     "relative_attention": True, "norm_first": True, "share_embeddings": True,
     "tgt_vocab_size": 23, "tie_output": True, "output_bias": False, "output_scale": 0.25,
     "scale_embeddings": False},  # T5 v1.0
], ids=["post_ln_relu", "pre_ln_gelu_learned", "tied_shared_swish", "head_dim_5", "bart",
        "m2m100", "t5_v1_1", "t5_v1_0"])
def test_no_input_exceeds_the_bound(overrides):
    """The encoder's output, the decoder's and the logits never exceed their bounds, over
    random ids of every length, the largest ids and padding included."""
    config = small_config(**overrides)
    weights = random_weights(config, seed=3, scale=0.8)
    bounds = check_weight_bounds(config, weights)
    model = model_of(config, weights)
    rng = np.random.default_rng(0)
    worst = {"encoder": 0.0, "decoder": 0.0, "logits": 0.0}
    for length in (3, 11, config.max_len):
        src = rng.integers(0, config.src_vocab_size, (8, length)).astype(np.int32)
        tgt = rng.integers(0, config.tgt_vocab_size, (8, length)).astype(np.int32)
        src[0], tgt[0] = config.src_vocab_size - 1, config.tgt_vocab_size - 1
        out = model((src, tgt), return_hidden_states=True)
        worst["encoder"] = max(worst["encoder"], np.abs(out["encoder_hidden_states"][-1]).max())
        worst["decoder"] = max(worst["decoder"], np.abs(out["decoder_hidden_states"][-1]).max())
        worst["logits"] = max(worst["logits"], np.abs(out["logits"]).max())
    for name, value in worst.items():
        assert 0 < value <= bounds[name], (name, value, bounds[name])


def test_every_embedding_scale_the_check_accepts_computes_finite_numbers():
    """One token's row grown from 1e2 to 1e34: whenever the check passes, a sentence holding
    that token computes finite numbers; at 1e30 (the hostile file's) the model gives NaN, and
    the check refuses it."""
    config = small_config()
    base = random_weights(config, seed=1)
    token = 17
    src = np.array([[1, token, 5, token, 2]], np.int32)
    tgt = np.array([[1, 4, 6]], np.int32)
    accepted = []
    for exponent in range(2, 35, 4):
        weights = {k: v.copy() for k, v in base.items()}
        weights[SOURCE_TABLE][token] = 10.0 ** exponent
        try:
            check_weight_bounds(config, weights)
        except WeightError:
            finite_expected = False
        else:
            finite_expected = True
            accepted.append(exponent)
        out = model_of(config, weights)((src, tgt), return_attention=True)
        finite = all(np.isfinite(np.asarray(v)).all() for v in out.values())
        if finite_expected:
            assert finite, f"the check accepted 1e{exponent}, which computes NaN"
        if exponent == 30:
            assert not finite and not finite_expected
    assert accepted and accepted[0] == 2  # ordinary rows pass


# ------------------------------------------------------------------ refusals name the weight
def test_a_huge_embedding_row_is_refused_by_build_model_naming_the_layer_and_weight():
    """The hostile file of issue 25: finite (1e30) in one row the probe never reads. Every
    format ends in build_model, which now refuses it before building anything."""
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    weights = weight_arrays(ckpt.model)
    weights[SOURCE_TABLE][ckpt.config.src_vocab_size - 3] = 1e30
    with pytest.raises(CheckpointError) as info:
        build_model(ckpt.config, weights)
    message = str(info.value)
    assert "overflow float32" in message
    assert "encoder layer 0's self-attention" in message
    assert repr(SOURCE_TABLE) in message and "1.0e+30" in message


def test_a_non_finite_weight_is_named():
    config = small_config()
    weights = random_weights(config)
    weights["decoder_layer_1/cross_attention/value/bias"][3] = np.nan
    message = refused(config, weights)
    assert "'decoder_layer_1/cross_attention/value/bias'" in message and "NaN" in message
    weights = random_weights(config)
    weights["output_projection/kernel"][0, 0] = np.inf
    assert "'output_projection/kernel'" in refused(config, weights)


def test_a_huge_projection_is_named_by_its_largest_column_sum():
    config = small_config()
    weights = random_weights(config)
    weights["encoder_layer_1/self_attention/query/kernel"][:, 4] = 1e36
    message = refused(config, weights)
    assert "encoder layer 1's self-attention" in message
    assert "largest column sum" in message
    assert "'encoder_layer_1/self_attention/query/kernel'" in message


def test_a_layer_norm_whose_variance_overflows_is_refused():
    """A post-LN residual of 1e20 is finite, but its square (1e40) overflows in the LayerNorm's
    variance: the variance is infinite, the normalised values 0, and the layer's output its beta
    alone whatever the sentence. The check names the LayerNorm and the bias that feeds it."""
    config = small_config()
    weights = random_weights(config)
    weights["encoder_layer_0/feedforward/output/bias"][2] = 1e20
    message = refused(config, weights)
    assert "encoder layer 0's feed-forward network's LayerNorm" in message
    assert "variance" in message
    assert "'encoder_layer_0/feedforward/output/bias'" in message
    out = model_of(config, weights)((np.array([[1, 5, 2]]), np.array([[1, 4]])),
                                    return_hidden_states=True)
    beta = weights["encoder_layer_0/feedforward_layer_norm/beta"]
    np.testing.assert_array_equal(np.asarray(out["encoder_hidden_states"][1])[0],
                                  np.broadcast_to(beta, (3, 16)))


def test_pre_ln_bounds_grow_with_depth_and_stay_finite():
    """Pre-LN: nothing normalises the residual stream between layers, so its bound adds up
    layer by layer; the stack's final LayerNorm bounds the output again."""
    shallow = small_config(norm_first=True, num_encoder_layers=1)
    deep = small_config(norm_first=True, num_encoder_layers=6)
    w_shallow, w_deep = random_weights(shallow, seed=2), random_weights(deep, seed=2)
    b_shallow = check_weight_bounds(shallow, w_shallow)
    b_deep = check_weight_bounds(deep, w_deep)
    assert b_shallow["encoder"] < SAFE_LIMIT and b_deep["encoder"] < SAFE_LIMIT
    # a final-norm gain of 1e34 scales the encoder output bound by 1e34
    w_deep["encoder_norm/gamma"][:] = 1e34
    message = refused(deep, w_deep)
    assert "the encoder's final LayerNorm" in message and "'encoder_norm/gamma'" in message


def test_a_deep_pre_ln_model_keeps_each_weight_once_in_a_bounds_sources(monkeypatch):
    """24 + 24 pre-LN layers (mBART's, NLLB's arrangement): each sublayer joins the stream's
    sources with its own output's, which share everything since the last cut; kept as a plain
    tuple they doubled at every sublayer (2**120 names by the last one). Each bound names every
    weight at most once, so the walk's bookkeeping is bounded by the model's weight count."""
    from transformer.model import bounds

    config = small_config(norm_first=True, num_encoder_layers=24, num_decoder_layers=24,
                          d_model=8, num_heads=2, dff=8)
    weights = random_weights(config, seed=3, scale=0.2)
    longest = []
    checked = bounds._Walk._checked

    def spy(self, bound, what, quantity):
        longest.append(len(bound.sources))
        assert len(bound.sources) == len(set(bound.sources))
        return checked(self, bound, what, quantity)

    monkeypatch.setattr(bounds._Walk, "_checked", spy)
    found = check_weight_bounds(config, weights)
    assert found["logits"] < SAFE_LIMIT
    assert max(longest) <= len(weights)


def test_weights_of_the_wrong_shape_are_named_before_any_bound():
    config = small_config()
    weights = random_weights(config)
    del weights["decoder_layer_0/feedforward/intermediate/bias"]
    message = refused(config, weights)
    assert "has no value for the weight 'decoder_layer_0/feedforward/intermediate/bias'" in message
