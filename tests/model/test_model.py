"""The Transformer against an independent NumPy forward pass (Oracle 2), and its properties.

The NumPy pass below implements the paper from scratch; it reads only the model's weights, by path.
"""

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from transformer import Transformer, TransformerConfig, positional_encoding
from transformer.core.kinds import KIND_NAMES
from transformer.model.weights import weight_arrays, weight_shapes

ATOL = 1e-5
ROOT = str(Path(__file__).resolve().parents[2])


# ============================================================================= NumPy reference
def np_positional_encoding(length, d_model, base=10000.0):
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)), one by one."""
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for j in range(d_model):
            two_i = j - (j % 2)
            angle = pos / base ** (two_i / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def np_positional_encoding_concat(length, d_model, base=10000.0):
    """The [sin | cos] layout (TF tutorial, Marian), one by one: column i < ceil(d/2) is
    sin(pos / base^(2i/d)); column ceil(d/2) + i is cos(pos / base^(2i/d))."""
    half = (d_model + 1) // 2
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for j in range(d_model):
            i = j if j < half else j - half
            angle = pos / base ** (2 * i / d_model)
            pe[pos, j] = math.sin(angle) if j < half else math.cos(angle)
    return pe


def np_positional_encoding_fairseq(length, d_model, offset, base=10000.0):
    """M2M100's layout (fairseq's), one by one: half = d // 2 frequencies base^(-i / (half - 1));
    column i < half is sin((pos + offset) * freq_i), column half + i its cos."""
    half = d_model // 2
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for j in range(2 * half):
            i = j % half
            angle = (pos + offset) * math.exp(-i * math.log(base) / (half - 1))
            pe[pos, j] = math.sin(angle) if j < half else math.cos(angle)
    return pe


def np_t5_bucket(distance, bidirectional, num_buckets, max_distance):
    """T5's relative position bucket of key - query (Raffel et al.; transformers'
    T5Attention._relative_position_bucket), for one distance."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if distance > 0 else 0
        distance = abs(distance)
    else:
        distance = -min(distance, 0)
    exact = num_buckets // 2
    if distance < exact:
        return bucket + distance
    large = exact + int(math.log(distance / exact) / math.log(max_distance / exact)
                        * (num_buckets - exact))
    return bucket + min(large, num_buckets - 1)


ACTIVATIONS = {
    "relu": lambda x: np.maximum(0.0, x),
    "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                    * (x + 0.044715 * x ** 3))),
    "swish": lambda x: x / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


def np_layer_norm(x, gamma, beta, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_masked_softmax(scores, mask):
    """mask==False keys get exactly 0; a row with no allowed key is all 0."""
    mask = np.broadcast_to(mask, scores.shape)
    masked = np.where(mask, scores, -np.inf)
    row_max = masked.max(-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(mask, np.exp(masked - row_max), 0.0)
    total = e.sum(-1, keepdims=True)
    return e / np.where(total == 0.0, 1.0, total)


class NumpyTransformer:
    """Inference-time forward pass of the paper's Transformer, written with NumPy only."""

    def __init__(self, config, model):
        self.c = config
        self.W = {w.path: np.asarray(w.numpy(), np.float64) for w in model.weights}
        assert len(self.W) == len(model.weights), "two weights share a path"

    def w(self, name):
        return self.W[f"transformer/{name}"]

    # ------------------------------------------------------------------ pieces
    def dense(self, x, prefix):
        y = x @ self.w(f"{prefix}/kernel")
        return y + self.w(f"{prefix}/bias") if self.c.use_bias else y

    def ln(self, x, prefix):
        if self.c.norm == "rms":  # T5's: no mean, no bias
            rms = np.sqrt((x ** 2).mean(-1, keepdims=True) + self.c.layer_norm_epsilon)
            return x / rms * self.w(f"{prefix}/scale")
        return np_layer_norm(x, self.w(f"{prefix}/gamma"), self.w(f"{prefix}/beta"),
                             self.c.layer_norm_epsilon)

    def position_bias(self, stack, q_len, k_len):
        """(1, H, q, k): T5's bias of each key - query distance, from its bucket's table row."""
        table = self.w(f"{stack}_position_bias/relative_bias/embeddings")  # (buckets, H)
        buckets = np.array([[np_t5_bucket(k - q, stack == "encoder", self.c.relative_buckets,
                                          self.c.relative_max_distance)
                             for k in range(k_len)] for q in range(q_len)])
        return table[buckets].transpose(2, 0, 1)[None]

    def token_table(self, side):
        if side == "target" and not self.c.share_embeddings:
            return self.w("target_embedding/target_token_embedding/embeddings")
        return self.w("source_embedding/source_token_embedding/embeddings")

    def embed(self, side, ids):
        d = self.c.d_model
        x = self.token_table(side)[ids]
        if self.c.scale_embeddings:
            x = x * math.sqrt(d)
        t = ids.shape[1]
        if self.c.positional == "sinusoidal":
            pos = np_positional_encoding(t, d)
        elif self.c.positional == "sinusoidal_concat":
            pos = np_positional_encoding_concat(t, d)
        elif self.c.positional == "sinusoidal_fairseq":
            pos = np_positional_encoding_fairseq(t, d, self.c.position_offset)
        elif self.c.positional == "none":
            pos = np.zeros((t, d))
        else:
            pos = self.w(f"{side}_embedding/position_embedding/embeddings")[:t]
        x = x + pos[None]
        return self.ln(x, f"{side}_embedding/embedding_norm") if self.c.embedding_norm else x

    def attention(self, prefix, xq, xkv, mask, head_mask=None, bias=None):
        h = self.c.num_heads
        d_k = self.c.head_dim  # d_model // h unless the config says otherwise

        def split(x):
            b, t, _ = x.shape
            return x.reshape(b, t, h, d_k).transpose(0, 2, 1, 3)

        q = split(self.dense(xq, f"{prefix}/query"))
        k = split(self.dense(xkv, f"{prefix}/key"))
        v = split(self.dense(xkv, f"{prefix}/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / (math.sqrt(d_k) if self.c.attention_scale else 1)
        if bias is not None:
            scores = scores + bias
        weights = np_masked_softmax(scores, mask)
        context = weights @ v
        if head_mask is not None:
            context = context * np.asarray(head_mask, np.float64)[None, :, None, None]
        b, _, t, _ = context.shape
        merged = context.transpose(0, 2, 1, 3).reshape(b, t, h * d_k)
        out = self.dense(merged, f"{prefix}/output")
        return out, {"weights": weights, "q": q, "k": k, "v": v, "scores": scores}

    def ffn(self, x, prefix):
        act = ACTIVATIONS[self.c.activation]
        if self.c.feedforward == "gated":  # T5 v1.1: act(x W_gate) * (x W_1)
            hidden = act(self.dense(x, f"{prefix}/gate")) * self.dense(x, f"{prefix}/intermediate")
        else:
            hidden = act(self.dense(x, f"{prefix}/intermediate"))
        return self.dense(hidden, f"{prefix}/output")

    def sublayer(self, x, norm, fn):
        """post-LN: LN(x + f(x)); pre-LN: x + f(LN(x))."""
        if self.c.norm_first:
            out, extra = fn(self.ln(x, norm))
            return x + out, extra
        out, extra = fn(x)
        return self.ln(x + out, norm), extra

    # ------------------------------------------------------------------ stacks
    def __call__(self, src, tgt, head_mask=None):
        c = self.c
        head_mask = head_mask or {}
        src = np.asarray(src)
        tgt = np.asarray(tgt)
        src_keep = (src != c.pad_id)[:, None, None, :]  # (B, 1, 1, N)
        t = tgt.shape[1]
        causal = np.tril(np.ones((t, t), bool))
        tgt_real = tgt != c.pad_id
        if c.start_id == c.pad_id:  # position 0 is the start token, never padding
            tgt_real[:, 0] = True
        if not c.mask_padding:  # only the look-ahead mask
            src_keep, tgt_real = np.ones_like(src_keep), np.ones_like(tgt_real)
        tgt_keep = tgt_real[:, None, None, :] & causal[None, None]  # (B, 1, T, T)

        def row(kind, i):
            return None if kind not in head_mask else np.asarray(head_mask[kind])[i]

        relative = c.relative_attention
        enc_bias = self.position_bias("encoder", *src.shape[1:] * 2) if relative else None
        dec_bias = self.position_bias("decoder", t, t) if relative else None
        x = self.embed("source", src)
        enc_hidden, enc = [x], []
        for i in range(c.num_encoder_layers):
            p = f"encoder_layer_{i}"
            x, att = self.sublayer(x, f"{p}/self_attention_layer_norm",
                                   lambda h: self.attention(f"{p}/self_attention", h, h, src_keep,
                                                            row("encoder", i), enc_bias))
            x, _ = self.sublayer(x, f"{p}/feedforward_layer_norm",
                                 lambda h: (self.ffn(h, f"{p}/feedforward"), None))
            enc.append(att)
            enc_hidden.append(x)
        if c.norm_first:
            x = self.ln(x, "encoder_norm")
            enc_hidden[-1] = x  # the stack's output: after its final LayerNorm
        memory = x

        y = self.embed("target", tgt)
        dec_hidden, dec, cross = [y], [], []
        for i in range(c.num_decoder_layers):
            p = f"decoder_layer_{i}"
            y, s_att = self.sublayer(y, f"{p}/self_attention_layer_norm",
                                     lambda h: self.attention(f"{p}/self_attention", h, h, tgt_keep,
                                                              row("decoder", i), dec_bias))
            y, c_att = self.sublayer(y, f"{p}/cross_attention_layer_norm",
                                     lambda h: self.attention(f"{p}/cross_attention", h, memory,
                                                              src_keep, row("cross", i)))
            y, _ = self.sublayer(y, f"{p}/feedforward_layer_norm",
                                 lambda h: (self.ffn(h, f"{p}/feedforward"), None))
            dec.append(s_att)
            cross.append(c_att)
            dec_hidden.append(y)
        if c.norm_first:
            y = self.ln(y, "decoder_norm")
            dec_hidden[-1] = y

        y_out = y * c.output_scale  # T5 v1.0: d_model ** -0.5 before the tied output
        if c.tie_output:
            logits = y_out @ self.token_table("target").T
            if c.output_bias:
                logits = logits + self.w("output_bias")
        elif c.output_bias:
            logits = y_out @ self.w("output_projection/kernel") + self.w("output_projection/bias")
        else:
            logits = y_out @ self.w("output_projection/kernel")

        out = {"logits": logits,
               "encoder_hidden_states": np.stack(enc_hidden),
               "decoder_hidden_states": np.stack(dec_hidden)}
        for kind, results in (("encoder", enc), ("decoder", dec), ("cross", cross)):
            out[f"{kind}_attention"] = np.stack([r["weights"] for r in results])
            for name in ("q", "k", "v", "scores"):
                out[f"{kind}_{name}"] = np.stack([r[name] for r in results])
        out["masks"] = {"encoder": src_keep, "decoder": tgt_keep, "cross": src_keep}
        return out


# ============================================================================= helpers
def tiny_config(**overrides):
    share = overrides.get("share_embeddings", False)
    base = dict(src_vocab_size=11, tgt_vocab_size=11 if share else 13, d_model=8, num_heads=2,
                dff=16, num_encoder_layers=2, num_decoder_layers=2, max_len=16, dropout_rate=0.1)
    base.update(overrides)
    return TransformerConfig(**base)


def build(config, seed=0, randomize=True):
    """A built model; with randomize, every weight (biases, LayerNorm gains too) is random."""
    keras.utils.set_random_seed(seed)
    model = Transformer(config).build_weights()
    if randomize:
        rng = np.random.default_rng(seed)
        for w in model.weights:
            name = w.path.rsplit("/", 1)[-1]
            if name in ("gamma", "scale"):
                value = 1.0 + rng.normal(0, 0.2, w.shape)
            elif name in ("beta", "bias"):
                value = rng.normal(0, 0.2, w.shape)
            elif name == "embeddings":
                value = rng.normal(0, 0.5, w.shape)
            else:
                value = rng.normal(0, 0.4, w.shape)
            w.assign(value.astype(np.float32))
    return model


_MODELS = {}


def cached_model(seed=0, **case):
    """(config, randomized model), built once per module: tests using it must not change it."""
    key = (seed, tuple(sorted(case.items())))
    if key not in _MODELS:
        config = tiny_config(**case)
        _MODELS[key] = (config, build(config, seed))
    return _MODELS[key]


def make_batch(config, src_lengths, tgt_lengths, n, t, seed=0):
    """Padded (src (B, n), tgt (B, t)) int32; targets begin with start_id; no pad inside tokens."""
    rng = np.random.default_rng(seed)

    def fill(lengths, width, vocab):
        ids = np.full((len(lengths), width), config.pad_id, np.int32)
        choices = np.array([i for i in range(vocab) if i != config.pad_id])
        for b, length in enumerate(lengths):
            ids[b, :length] = rng.choice(choices, length)
        return ids

    src = fill(src_lengths, n, config.src_vocab_size)
    tgt = fill(tgt_lengths, t, config.tgt_vocab_size)
    tgt[np.asarray(tgt_lengths) > 0, 0] = config.start_id
    return src, tgt


# A padded batch: different lengths, one source entirely padding, one target only <start>.
SRC_LENGTHS, TGT_LENGTHS, N, T = [5, 3, 0, 2], [4, 2, 1, 3], 5, 4

FLAGS = ("norm_first", "positional", "tie_output", "share_embeddings")
# A strength-2 covering array of the four options: every option is flipped, and every pair of
# options meets in all four of its value combinations (5 models instead of the full 16).
COVERING = [
    (False, "sinusoidal", False, False),
    (False, "learned", True, True),
    (True, "sinusoidal", True, True),
    (True, "learned", False, True),
    (True, "learned", True, False),
]
PAIRWISE = [dict(zip(FLAGS, values)) for values in COVERING]
EXTRA = [
    dict(scale_embeddings=False, pad_id=3, start_id=0, end_id=4),
    dict(norm_first=True, scale_embeddings=False, num_heads=4, num_encoder_layers=1,
         num_decoder_layers=3),
    # Options of imported models (issue 13): another per-head size, [sin | cos] positions,
    # activations, LayerNorm epsilons, biases on tied and untied logits, no padding mask, and
    # Marian's start id = pad id.
    dict(head_dim=6, positional="sinusoidal_concat", activation="gelu", layer_norm_epsilon=1e-3,
         tie_output=True, share_embeddings=True, output_bias=True),
    dict(head_dim=8, activation="swish", layer_norm_epsilon=1e-5, mask_padding=False,
         output_bias=False, positional="learned"),
    dict(pad_id=5, start_id=5, end_id=0, activation="silu", positional="sinusoidal_concat",
         d_model=7, num_heads=1, norm_first=True),
    # The Hugging Face families' options (issue 26): BART (post-LN, learned positions, the
    # embeddings normalised, gelu), M2M100/NLLB (pre-LN, fairseq's sinusoids from pad + 1),
    # T5 v1.1 (RMSNorm, no biases, no score scaling, relative position bias, gated gelu_tanh)
    # and T5 v1.0 (relu, tied output scaled by d_model ** -0.5).
    dict(embedding_norm=True, positional="learned", activation="gelu", tie_output=True,
         share_embeddings=True, output_bias=True, scale_embeddings=False),
    dict(norm_first=True, positional="sinusoidal_fairseq", position_offset=2, pad_id=1,
         start_id=2, end_id=2 + 1, d_model=9, num_heads=3),
    dict(norm="rms", use_bias=False, attention_scale=False, positional="none",
         relative_attention=True, relative_buckets=8, relative_max_distance=6, norm_first=True,
         feedforward="gated", activation="gelu_tanh", output_bias=False, share_embeddings=True,
         scale_embeddings=False),
    dict(norm="rms", use_bias=False, attention_scale=False, positional="none",
         relative_attention=True, relative_buckets=6, relative_max_distance=5, norm_first=True,
         tie_output=True, share_embeddings=True, output_bias=False, output_scale=8 ** -0.5,
         scale_embeddings=False, embedding_norm=True),
]
CASES = PAIRWISE + EXTRA


def test_cases_cover_every_pair_of_options():
    values = {"norm_first": (False, True), "positional": ("sinusoidal", "learned"),
              "tie_output": (False, True), "share_embeddings": (False, True)}
    for a, b in itertools.combinations(FLAGS, 2):
        seen = {(case[a], case[b]) for case in PAIRWISE}
        assert seen == set(itertools.product(values[a], values[b])), (a, b)


def _case_id(case):
    return "-".join(f"{k}={v}" for k, v in case.items())


def check_against_reference(model, ref, got, keys):
    for key in keys:
        assert key in got, key
        actual = np.asarray(got[key])
        assert actual.shape == ref[key].shape, (key, actual.shape, ref[key].shape)
        # raw scores and q, k, v reach several units: float32's relative rounding (here up to
        # 3e-6, machine-dependent) matters there, so 1e-5 relative besides ATOL absolute
        np.testing.assert_allclose(actual, ref[key], rtol=1e-5, atol=ATOL, err_msg=key)


ATTENTION_KEYS = ("encoder_attention", "decoder_attention", "cross_attention")
QKV_KEYS = tuple(f"{kind}_{name}" for kind in KIND_NAMES
                 for name in ("q", "k", "v", "scores"))


# ============================================================================= Oracle 2
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_matches_numpy_reference(case):
    config, model = cached_model(**case)
    src, tgt = make_batch(config, SRC_LENGTHS, TGT_LENGTHS, N, T)
    ref = NumpyTransformer(config, model)(src, tgt)

    logits = model((src, tgt))
    assert logits.shape == (4, T, config.tgt_vocab_size)
    np.testing.assert_allclose(np.asarray(logits), ref["logits"], atol=ATOL)

    got = model((src, tgt), return_attention=True, return_hidden_states=True, return_qkv=True)
    check_against_reference(model, ref, got,
                            ("logits",) + ATTENTION_KEYS + QKV_KEYS
                            + ("encoder_hidden_states", "decoder_hidden_states"))
    # Blocked weights are exactly 0 (not merely small).
    for kind in KIND_NAMES:
        weights = np.asarray(got[f"{kind}_attention"])
        blocked = np.broadcast_to(~ref["masks"][kind][None], weights.shape)
        assert np.all(weights[blocked] == 0.0), kind


def test_numpy_reference_is_sensitive():
    # Guard against a reference that would agree with anything: a perturbed weight or a
    # wrong LayerNorm convention must break the agreement.
    config, model = cached_model(**PAIRWISE[0])
    src, tgt = make_batch(config, SRC_LENGTHS, TGT_LENGTHS, N, T)
    logits = np.asarray(model((src, tgt)))
    ref = NumpyTransformer(config, model)
    np.testing.assert_allclose(logits, ref(src, tgt)["logits"], atol=ATOL)
    ref.W["transformer/decoder_layer_1/cross_attention/value/bias"] += 1e-3
    assert not np.allclose(logits, ref(src, tgt)["logits"], atol=ATOL)
    pre_ln = NumpyTransformer(tiny_config(norm_first=True), model)
    with pytest.raises(KeyError):  # a post-LN model has no final norms
        pre_ln(src, tgt)


@pytest.mark.parametrize("case", [PAIRWISE[0], PAIRWISE[3]], ids=["post-LN", "pre-LN"])
def test_matches_numpy_reference_with_head_mask(case):
    config, model = cached_model(**case)
    src, tgt = make_batch(config, SRC_LENGTHS, TGT_LENGTHS, N, T, seed=1)
    head_mask = {"encoder": np.array([[1, 0], [0, 1]], np.float32),
                 "decoder": np.array([[0, 1], [1, 1]], np.float32),
                 "cross": np.array([[1, 1], [1, 0]], np.float32)}
    ref = NumpyTransformer(config, model)(src, tgt, head_mask=head_mask)
    got = model((src, tgt), head_mask=head_mask, return_attention=True, return_hidden_states=True)
    check_against_reference(model, ref, got, ("logits",) + ATTENTION_KEYS
                            + ("encoder_hidden_states", "decoder_hidden_states"))
    plain = np.asarray(model((src, tgt)))
    assert not np.allclose(plain, ref["logits"], atol=1e-3)


def test_encode_and_decode_match_call_and_reference():
    config, model = cached_model(**PAIRWISE[2])
    src, tgt = make_batch(config, SRC_LENGTHS, TGT_LENGTHS, N, T, seed=2)
    ref = NumpyTransformer(config, model)(src, tgt)
    enc = model.encode(src, return_hidden_states=True, return_qkv=True)
    assert enc["memory"].shape == (4, N, 8)
    np.testing.assert_allclose(enc["memory"], ref["encoder_hidden_states"][-1], atol=ATOL)
    np.testing.assert_array_equal(np.asarray(enc["mask"]), (src != config.pad_id)[:, None, None, :])
    np.testing.assert_allclose(enc["attention"], ref["encoder_attention"], atol=ATOL)
    np.testing.assert_allclose(enc["hidden_states"], ref["encoder_hidden_states"], atol=ATOL)
    for name in ("q", "k", "v", "scores"):
        np.testing.assert_allclose(enc[name], ref[f"encoder_{name}"], atol=ATOL)
    dec = model.decode(tgt, enc["memory"], enc["mask"], return_hidden_states=True, return_qkv=True)
    np.testing.assert_allclose(dec["logits"], ref["logits"], atol=ATOL)
    np.testing.assert_allclose(dec["self_attention"], ref["decoder_attention"], atol=ATOL)
    np.testing.assert_allclose(dec["cross_attention"], ref["cross_attention"], atol=ATOL)
    np.testing.assert_allclose(dec["hidden_states"], ref["decoder_hidden_states"], atol=ATOL)
    for name in ("q", "k", "v", "scores"):
        np.testing.assert_allclose(dec[f"self_{name}"], ref[f"decoder_{name}"], atol=ATOL)
        np.testing.assert_allclose(dec[f"cross_{name}"], ref[f"cross_{name}"], atol=ATOL)


# ============================================================================= shapes and API
@pytest.fixture(scope="module")
def tiny():
    config = tiny_config(num_encoder_layers=2, num_decoder_layers=3)
    model = build(config, seed=3)
    src, tgt = make_batch(config, [5, 3, 0], [4, 2, 1], 5, 4, seed=3)
    return config, model, src, tgt


def test_output_shapes(tiny):
    config, model, src, tgt = tiny
    got = model((src, tgt), return_attention=True, return_hidden_states=True, return_qkv=True)
    b, n, t, h, d = 3, 5, 4, 2, 8
    expected = {
        "logits": (b, t, 13),
        "encoder_attention": (2, b, h, n, n),
        "decoder_attention": (3, b, h, t, t),
        "cross_attention": (3, b, h, t, n),
        "encoder_hidden_states": (3, b, n, d),
        "decoder_hidden_states": (4, b, t, d),
        "encoder_q": (2, b, h, n, d // h), "encoder_k": (2, b, h, n, d // h),
        "encoder_v": (2, b, h, n, d // h), "encoder_scores": (2, b, h, n, n),
        "decoder_q": (3, b, h, t, d // h), "decoder_k": (3, b, h, t, d // h),
        "decoder_v": (3, b, h, t, d // h), "decoder_scores": (3, b, h, t, t),
        "cross_q": (3, b, h, t, d // h), "cross_k": (3, b, h, n, d // h),
        "cross_v": (3, b, h, n, d // h), "cross_scores": (3, b, h, t, n),
        "source_mask": (b, 1, 1, n), "target_mask": (b, 1, t, t),
    }
    assert {k: tuple(v.shape) for k, v in got.items()} == expected
    only_attention = model((src, tgt), return_attention=True)
    assert set(only_attention) == {"logits", "source_mask", "target_mask"} | set(ATTENTION_KEYS)
    assert isinstance(model((src, tgt)), tf.Tensor)


def test_unknown_head_mask_key_raises(tiny):
    _, model, src, tgt = tiny
    with pytest.raises(ValueError, match="head_mask"):
        model((src, tgt), head_mask={"encoder_self": np.ones((2, 2), np.float32)})


# ============================================================================= attention properties
def test_attention_properties_on_the_model(tiny):
    config, model, src, tgt = tiny
    got = model((src, tgt), return_attention=True)
    for key in ATTENTION_KEYS:
        assert np.isfinite(np.asarray(got[key])).all(), key
    assert np.isfinite(np.asarray(got["logits"])).all()
    src_real = src != config.pad_id  # (B, N)
    tgt_real = tgt != config.pad_id  # (B, T)

    enc = np.asarray(got["encoder_attention"])  # (L, B, H, N, N)
    dec = np.asarray(got["decoder_attention"])  # (L, B, H, T, T)
    cross = np.asarray(got["cross_attention"])  # (L, B, H, T, N)

    for b in range(src.shape[0]):
        # Padded keys get exactly 0.
        assert np.all(enc[:, b][..., ~src_real[b]] == 0.0)
        assert np.all(cross[:, b][..., ~src_real[b]] == 0.0)
        assert np.all(dec[:, b][..., ~tgt_real[b]] == 0.0)
        if src_real[b].any():
            # Rows of real query tokens sum to 1.
            np.testing.assert_allclose(enc[:, b][..., src_real[b], :].sum(-1), 1.0, atol=1e-6)
            np.testing.assert_allclose(cross[:, b][..., tgt_real[b], :].sum(-1), 1.0, atol=1e-6)
        else:
            # Entirely padded source: every row fully blocked -> all zero, no NaN.
            assert np.all(enc[:, b] == 0.0)
            assert np.all(cross[:, b] == 0.0)
        np.testing.assert_allclose(dec[:, b][..., tgt_real[b], :].sum(-1), 1.0, atol=1e-6)

    # Decoder self-attention is exactly 0 above the diagonal.
    upper = np.triu(np.ones((4, 4), bool), k=1)
    assert np.all(dec[..., upper] == 0.0)
    assert tgt_real[0].all()
    assert np.all(dec[:, 0][..., ~upper] > 0.0)  # full-length target: all allowed weights positive


def test_fully_padded_target_row_gives_zero_attention_no_nan():
    config, model = cached_model(**PAIRWISE[0])
    src = np.array([[4, 5, 6], [0, 0, 0]], np.int32)
    tgt = np.array([[1, 7, 0], [0, 0, 0]], np.int32)  # second row: every query fully blocked
    got = model((src, tgt), return_attention=True)
    for key in ("logits",) + ATTENTION_KEYS:
        assert np.isfinite(np.asarray(got[key])).all(), key
    assert np.all(np.asarray(got["decoder_attention"])[:, 1] == 0.0)
    assert np.all(np.asarray(got["cross_attention"])[:, 1] == 0.0)
    assert np.all(np.asarray(got["encoder_attention"])[:, 1] == 0.0)


def test_future_target_tokens_do_not_change_earlier_logits(tiny):
    config, model, src, tgt = tiny
    changed = tgt.copy()
    changed[0, 3] = 9 if tgt[0, 3] != 9 else 8
    a = np.asarray(model((src, tgt)))
    b = np.asarray(model((src, changed)))
    np.testing.assert_allclose(a[0, :3], b[0, :3], atol=ATOL)
    assert not np.allclose(a[0, 3], b[0, 3], atol=1e-4)


def test_extra_source_padding_changes_nothing(tiny):
    config, model, src, tgt = tiny
    wider = np.concatenate([src, np.full((src.shape[0], 3), config.pad_id, np.int32)], axis=1)
    a = np.asarray(model((src, tgt)))
    b = np.asarray(model((wider, tgt)))
    np.testing.assert_allclose(a, b, atol=ATOL)


# ============================================================================= head_mask
def test_head_mask_all_ones_changes_nothing(tiny):
    config, model, src, tgt = tiny
    ones = {"encoder": np.ones((2, 2), np.float32), "decoder": np.ones((3, 2), np.float32),
            "cross": np.ones((3, 2), np.float32)}
    plain = model((src, tgt), return_attention=True)
    masked = model((src, tgt), head_mask=ones, return_attention=True)
    for key in ("logits",) + ATTENTION_KEYS:
        np.testing.assert_allclose(np.asarray(masked[key]), np.asarray(plain[key]), atol=1e-6)


@pytest.mark.parametrize("kind, layer, head", [("encoder", 0, 1), ("encoder", 1, 0),
                                               ("decoder", 0, 0), ("decoder", 2, 1),
                                               ("cross", 1, 1), ("cross", 2, 0)])
def test_silencing_one_head_changes_logits(tiny, kind, layer, head):
    config, model, src, tgt = tiny
    layers = config.num_encoder_layers if kind == "encoder" else config.num_decoder_layers
    mask = np.ones((layers, config.num_heads), np.float32)
    mask[layer, head] = 0.0
    plain = np.asarray(model((src, tgt)))
    silenced = np.asarray(model((src, tgt), head_mask={kind: mask}))
    assert np.isfinite(silenced).all()
    assert not np.allclose(plain, silenced, atol=1e-4)


def test_silencing_all_cross_heads_makes_logits_independent_of_source(tiny):
    config, model, _, tgt = tiny
    src_a, _ = make_batch(config, [5, 4, 2], [1, 1, 1], 5, 4, seed=10)
    src_b, _ = make_batch(config, [3, 5, 5], [1, 1, 1], 5, 4, seed=11)
    assert not np.array_equal(src_a, src_b)
    no_cross = {"cross": np.zeros((config.num_decoder_layers, config.num_heads), np.float32)}
    a = np.asarray(model((src_a, tgt), head_mask=no_cross))
    b = np.asarray(model((src_b, tgt), head_mask=no_cross))
    np.testing.assert_allclose(a, b, atol=1e-5)
    # ... whereas with the cross heads on, the source matters.
    assert not np.allclose(np.asarray(model((src_a, tgt))), np.asarray(model((src_b, tgt))), atol=1e-4)


# ============================================================================= block structure
def test_decoder_self_and_cross_attention_are_distinct():
    config = tiny_config()
    model = build(config, seed=5, randomize=False)  # values as initialised by Keras
    for layer in model.decoder_layers:
        assert layer.self_attention is not layer.cross_attention
        self_vars = {id(w): w for w in layer.self_attention.weights}
        cross_vars = {id(w): w for w in layer.cross_attention.weights}
        assert len(self_vars) == len(cross_vars) == 8
        assert not set(self_vars) & set(cross_vars)
        self_paths = {w.path for w in self_vars.values()}
        cross_paths = {w.path for w in cross_vars.values()}
        assert not self_paths & cross_paths
        for name in ("query", "key", "value", "output"):
            a = getattr(layer.self_attention, name if name != "output" else "output_dense").kernel
            b = getattr(layer.cross_attention, name if name != "output" else "output_dense").kernel
            assert not np.allclose(a.numpy(), b.numpy()), name
        norms = [layer.self_attention_layer_norm, layer.cross_attention_layer_norm,
                 layer.feedforward_layer_norm]
        assert len({id(n) for n in norms}) == 3
        norm_vars = [id(w) for n in norms for w in n.weights]
        assert len(norm_vars) == len(set(norm_vars)) == 6
    # Layers of a stack are distinct too.
    kernels = [layer.self_attention.query.kernel for layer in model.decoder_layers + model.encoder_layers]
    assert len({id(k) for k in kernels}) == len(kernels)
    assert not np.allclose(kernels[0].numpy(), kernels[1].numpy())


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_parameter_count_matches_the_paper(case):
    config, model = cached_model(**case)
    d, f, inner = config.d_model, config.dff, config.num_heads * config.head_dim
    b = 1 if config.use_bias else 0  # T5: no biases
    mha = 3 * (d * inner + b * inner) + inner * d + b * d  # q, k, v: d -> inner; output
    ffn = d * f + b * f + f * d + b * d
    if config.feedforward == "gated":  # T5 v1.1: a second d -> dff projection, the gate
        ffn += d * f + b * f
    norm = 2 * d if config.norm == "layer" else d  # gamma, beta; RMSNorm: scale
    expected = config.src_vocab_size * d
    if not config.share_embeddings:
        expected += config.tgt_vocab_size * d
    if config.positional == "learned":
        expected += 2 * config.max_len * d
    if config.embedding_norm:
        expected += 2 * norm
    if config.relative_attention:  # one (buckets, heads) table per stack
        expected += 2 * config.relative_buckets * config.num_heads
    expected += config.num_encoder_layers * (mha + ffn + 2 * norm)
    expected += config.num_decoder_layers * (2 * mha + ffn + 3 * norm)
    if config.norm_first:
        expected += 2 * norm
    if not config.tie_output:
        expected += d * config.tgt_vocab_size
    if config.output_bias:
        expected += config.tgt_vocab_size
    assert model.count_params() == expected == config.parameter_count()
    assert len({id(w) for w in model.weights}) == len(model.weights)
    assert len({w.path for w in model.weights}) == len(model.weights)


# ============================================================================= positional encoding
@pytest.mark.parametrize("length, d_model, base", [(7, 8, 10000.0), (5, 6, 100.0), (4, 7, 10000.0),
                                                   (1, 2, 10.0), (0, 4, 10000.0)])
def test_positional_encoding_matches_hand_formula(length, d_model, base):
    pe = positional_encoding(length, d_model, base)
    assert pe.shape == (length, d_model)
    assert pe.dtype == np.float32
    np.testing.assert_allclose(pe, np_positional_encoding(length, d_model, base), atol=1e-6)


def test_positional_encoding_hand_values():
    pe = positional_encoding(3, 4)
    # pos 0: sin 0 = 0, cos 0 = 1. pos 1, i=0: sin(1), cos(1); i=1: 1/10000^(2/4) = 0.01.
    expected = [
        [0.0, 1.0, 0.0, 1.0],
        [math.sin(1.0), math.cos(1.0), math.sin(0.01), math.cos(0.01)],
        [math.sin(2.0), math.cos(2.0), math.sin(0.02), math.cos(0.02)],
    ]
    np.testing.assert_allclose(pe, expected, atol=1e-6)
    with pytest.raises(ValueError):
        positional_encoding(3, 0)


@pytest.mark.parametrize("case", [PAIRWISE[0], EXTRA[0]], ids=["scaled", "unscaled"])
def test_model_adds_the_sinusoids(case):
    config, model = cached_model(**case)
    scale = config.scale_embeddings
    ids = np.array([[3, 4, 5, 6, 7, 8], [1, 0, 0, 0, 0, 0]], np.int32)
    table = model.source_token_embedding.embeddings.numpy().astype(np.float64)
    factor = math.sqrt(config.d_model) if scale else 1.0
    for side, layer in (("source", model.source_embedding), ("target", model.target_embedding)):
        out = np.asarray(layer(ids))
        if side == "target":
            table = model.target_token_embedding.embeddings.numpy().astype(np.float64)
        np.testing.assert_allclose(out - factor * table[ids], np.broadcast_to(
            np_positional_encoding(6, 8), out.shape), atol=1e-5)
        shifted = np.asarray(layer(ids, offset=3))
        np.testing.assert_allclose(shifted - factor * table[ids], np.broadcast_to(
            np_positional_encoding(9, 8)[3:], out.shape), atol=1e-5)
    # With zero token embeddings the encoder input is the positional encoding itself.
    saved = model.source_token_embedding.embeddings.numpy()
    try:
        model.source_token_embedding.embeddings.assign(np.zeros_like(saved))
        hidden = model.encode(ids, return_hidden_states=True)["hidden_states"]
    finally:
        model.source_token_embedding.embeddings.assign(saved)
    np.testing.assert_allclose(np.asarray(hidden[0]),
                               np.broadcast_to(np_positional_encoding(6, 8), (2, 6, 8)), atol=1e-6)


def test_model_adds_the_learned_positions():
    config, model = cached_model(**PAIRWISE[4])  # learned, separate embeddings
    ids = np.array([[3, 4, 5, 6]], np.int32)
    for side, layer in (("source", model.source_embedding), ("target", model.target_embedding)):
        table = {w.path: w.numpy() for w in model.weights}
        tokens = table[f"transformer/{side}_embedding/{side}_token_embedding/embeddings"]
        positions = table[f"transformer/{side}_embedding/position_embedding/embeddings"]
        out = np.asarray(layer(ids))
        np.testing.assert_allclose(out - math.sqrt(8) * tokens[ids], positions[None, :4], atol=1e-5)
    src_pos = model.source_embedding.position_embedding.embeddings
    tgt_pos = model.target_embedding.position_embedding.embeddings
    assert src_pos is not tgt_pos and not np.allclose(src_pos.numpy(), tgt_pos.numpy())


def test_shared_embeddings_are_one_matrix():
    _, model = cached_model(**PAIRWISE[1])  # shared and tied
    assert model.source_token_embedding.embeddings is model.target_token_embedding.embeddings
    assert not any("output_projection" in w.path for w in model.weights)


# ============================================================================= tf.function and training
def test_tf_function_matches_eager(tiny):
    config, model, src, tgt = tiny
    head_mask = {"cross": np.array([[1, 0], [1, 1], [0, 1]], np.float32)}

    @tf.function
    def run(s, t):
        return model((s, t), return_attention=True, head_mask=head_mask)

    graph = run(tf.constant(src), tf.constant(tgt))
    eager = model((src, tgt), return_attention=True, head_mask=head_mask)
    assert set(graph) == set(eager)
    for key in eager:
        np.testing.assert_allclose(np.asarray(graph[key]), np.asarray(eager[key]), atol=1e-5, err_msg=key)


def test_one_fit_step_trains():
    # One layer each: tracing the train step is what costs time here.
    config = tiny_config(norm_first=True, num_encoder_layers=1, num_decoder_layers=1)
    keras.utils.set_random_seed(9)
    model = Transformer(config).build_weights()
    src, tgt = make_batch(config, [5, 3, 4, 2], [4, 3, 4, 2], 5, 5, seed=9)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    before = {w.path: w.numpy().copy() for w in model.trainable_weights}
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit((src, tgt_in), tgt_out, batch_size=4, epochs=1, verbose=0)
    loss = history.history["loss"][0]
    assert np.isfinite(loss) and loss > 0
    after = {w.path: w.numpy() for w in model.trainable_weights}
    changed = [p for p in before if not np.array_equal(before[p], after[p])]
    assert "transformer/output_projection/kernel" in changed
    assert "transformer/encoder_layer_0/self_attention/query/kernel" in changed
    assert "transformer/decoder_layer_0/cross_attention/key/kernel" in changed
    assert len(changed) > len(before) // 2


# ============================================================================= packaging
def test_import_does_not_pull_in_streamlit_or_plotly():
    code = ("import sys, transformer; "
            "assert 'streamlit' not in sys.modules and 'plotly' not in sys.modules, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly'))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_weight_shapes_from_the_config_equal_the_built_model(case):
    config, model = cached_model(**case)
    built = {w.path.removeprefix("transformer/"): tuple(w.shape) for w in model.weights}
    assert weight_shapes(config) == built


@pytest.mark.parametrize("setting, onednn", [(None, False), ("1", True)])
def test_the_package_and_the_app_run_tensorflow_without_onednn_unless_asked(setting, onednn):
    """transformer (imported first by the app's explorer package) turns oneDNN's kernels off
    before TensorFlow loads; a user's explicit TF_ENABLE_ONEDNN_OPTS=1 still turns them on."""
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if setting is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = setting
    probe = ("import {0}; from tensorflow.python.util import _pywrap_util_port; "
             "print(_pywrap_util_port.IsMklEnabled())")
    for package in ("transformer", "explorer"):
        out = subprocess.run([sys.executable, "-c", probe.format(package)], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300, check=True)
        assert out.stdout.split()[-1] == str(onednn), (package, out.stdout, out.stderr[-2000:])


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
@pytest.mark.parametrize("compiled", [False, True])
def test_a_sequence_longer_than_max_len_gets_the_sentence_that_says_so(positional, compiled):
    model = Transformer(TransformerConfig(
        src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, dff=32,
        num_encoder_layers=1, num_decoder_layers=1, max_len=8, positional=positional,
    )).build_weights()
    encode = model.encode
    if compiled:
        encode = tf.function(model.encode, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"longer than max_len \(8\)"):
        encode(np.full((1, 10), 5, np.int32))


def test_a_model_partly_built_by_a_call_builds_the_rest_and_decodes():
    """model.encode on a fresh model builds the encoder's layers; decoding then builds the rest
    (build_weights keeps what a call built: Keras refuses new state on a built layer)."""
    from transformer import Transformer, TransformerConfig
    from transformer.inference.search_ours import greedy_decode

    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2,
                               dff=32, num_encoder_layers=1, num_decoder_layers=1, max_len=8)
    model = Transformer(config)
    memory = model.encode(np.array([[1, 5, 6, 2]]))["memory"]
    result = greedy_decode(model, [1, 5, 6, 2], max_len=4, stop_at_end=False)
    assert len(result.token_ids) == 4
    np.testing.assert_allclose(model.encode(np.array([[1, 5, 6, 2]]))["memory"], memory, atol=1e-6)


def test_empty_model_has_every_weight_of_a_built_one_and_assign_fills_each():
    """empty_model allocates every variable without writing it (their values are whatever the
    memory held); assign_weights, which needs a value for each, gives every one its own."""
    from transformer.model.weights import assign_weights, empty_model

    config = TransformerConfig(src_vocab_size=50, tgt_vocab_size=40, d_model=16, num_heads=2,
                               dff=32, num_encoder_layers=2, num_decoder_layers=1, max_len=12,
                               positional="learned", norm_first=True)
    empty, built = empty_model(config), Transformer(config).build_weights()
    assert weight_shapes(config) == {k: v.shape for k, v in weight_arrays(empty).items()}
    values = weight_arrays(built)
    assert any(v.any() for v in values.values())  # the usual build draws values
    assign_weights(empty, values)
    for name, value in weight_arrays(empty).items():
        np.testing.assert_array_equal(value, values[name], err_msg=name)


@pytest.mark.parametrize("arena", [False, True], ids=["own-memory", "arena"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_assign_weights_takes_every_layout_and_precision_exactly(monkeypatch, dtype, arena):
    """Transposed views (copied a strip of columns at a time: strips of 5 here, so the last is
    partial) and C-ordered arrays, in every stored precision, give the model the same numbers
    widened to float32, in memory of its own: changing the given arrays afterwards changes
    nothing. With a WeightArena (what a load uses) the float32 weights land in its memory,
    aligned for TensorFlow's kernels."""
    import ml_dtypes

    from transformer.model import weights as names

    config = TransformerConfig(src_vocab_size=53, tgt_vocab_size=47, d_model=16, num_heads=2,
                               dff=36, num_encoder_layers=1, num_decoder_layers=1, max_len=12)
    values = weight_arrays(Transformer(config).build_weights())
    stored = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    given = {k: (np.ascontiguousarray(v.T.astype(stored)).T if v.ndim == 2 else v.astype(stored))
             for k, v in values.items()}
    embedding = names.token_embedding("source")
    given[embedding] = values[embedding].astype(stored)  # C-ordered
    assert not all(v.flags.c_contiguous for v in given.values())
    monkeypatch.setattr(names, "STRIP", 5)  # strips that do not divide the columns
    target = names.empty_model(config)
    pool = names.WeightArena(given) if arena else None
    if pool is not None:
        taken = {name: pool.take(name) for name in given}
        assert all((out is None) == (dtype != "float32") for out in taken.values())
        assert all(out.ctypes.data % names.ALIGN_BYTES == 0 for out in taken.values()
                   if out is not None)
    names.assign_weights(target, given, arena=pool)
    expected = {name: value.astype(np.float32) for name, value in given.items()}
    for value in given.values():
        value[...] = 0
    for name, value in weight_arrays(target).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_the_arena_thread_never_writes_into_a_weight_already_copied(monkeypatch):
    """WeightArena's thread writes a zero into each page it touches: a weight's memory is
    handed out only once the thread is past it. With the thread slowed to a crawl (a step of
    four pages, 20 ms each) the copies wait for it, and every weight is still exact once the
    thread has touched every page (a zero written after a copy changed flan-t5-large's
    log-probabilities by 4e-4, differently at each load)."""
    import time

    from transformer.model import weights as names

    config = TransformerConfig(src_vocab_size=97, tgt_vocab_size=89, d_model=64, num_heads=2,
                               dff=256, num_encoder_layers=1, num_decoder_layers=1, max_len=12)
    values = weight_arrays(Transformer(config).build_weights())
    given = {k: np.ascontiguousarray(v.T).T if v.ndim == 2 else v.copy()
             for k, v in values.items()}
    monkeypatch.setattr(names, "ARENA_TOUCH_BYTES", 4 * 4096)
    steps = []

    def crawl(self):
        page = 4096
        for i in range(0, len(self._buffer), names.ARENA_TOUCH_BYTES):
            time.sleep(0.02)
            self._buffer[i:i + names.ARENA_TOUCH_BYTES:page] = 0
            steps.append(i)
            with self._progress:
                self._touched = min(len(self._buffer), i + names.ARENA_TOUCH_BYTES)
                self._progress.notify_all()

    monkeypatch.setattr(names.WeightArena, "_touch", crawl)
    target = names.empty_model(config)
    arena = names.WeightArena(given)
    names.assign_weights(target, given, arena=arena)
    arena._thread.join()
    assert len(steps) > 4  # the thread really went a few pages at a time
    for name, value in weight_arrays(target).items():
        np.testing.assert_array_equal(value, values[name], err_msg=name)
