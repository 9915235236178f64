"""A proof, from the weights alone, that the model computes finite float32 numbers for EVERY
input: the load-time probe (transformer.checkpoint.format) only tries the ids it feeds, and a
finite but huge weight in a row it does not visit (one token's embedding at 1e30) would load and
then give NaN on the first sentence that holds that token.

`check_weight_bounds(config, weights)` walks the computation of transformer.model (layers.py,
attention.py, transformer.py) in the order it runs and carries, for every activation, a vector
`u` (d,) with |activation[..., j]| <= u[j] for any ids, any sentence length up to max_len, any
padding and any head mask of zeros and ones (a silenced head only removes a term):

- embedding: max over the table's rows of |E[:, j]| (times sqrt(d_model) when scaled), plus the
  position codes' max |P[:, j]| (1 for sinusoids);
- x W + b: u @ |W| + |b|, which also bounds every partial sum of the matmul;
- LayerNorm (keras: two-pass moments, then x * inv + (beta - mean * inv), inv =
  gamma / sqrt(var + eps)): the normalised entries are at most sqrt(d_model) in magnitude, so
  |gamma| * sqrt(d_model) + |beta|, plus what rounding can leave of the cancellation between
  x * inv and mean * inv (at most ~2^-22 * max(u) * |gamma| / sqrt(eps)); the variance sums
  squares, at most sum_j (u_j + mean(u))^2 (were it infinite, the output would be beta alone,
  whatever the input), and x * inv reaches max(u) * |gamma| / sqrt(eps): both must stay below
  the limit too;
- attention: per head, |q . k| <= sum over the head's dimensions of u_q * u_k (the partial sums
  of QK^T, before the 1/sqrt(head_dim) scale); blocked keys add BLOCKED_SCORE, and the softmax
  subtracts the row's maximum, so 2 * max|score| + |BLOCKED_SCORE| must stay finite; the weights
  are a convex combination, so the context is bounded by the values' u; then the output
  projection as a dense;
- RMSNorm (T5's): |x_j| / rms(x) <= sqrt(d_model), so |scale| * sqrt(d_model); the sum of
  squares and x * rsqrt(mean(x^2) + eps) (at most max(u) / sqrt(eps)) are checked too;
- T5's relative position bias adds at most its table's largest |entry| to every score (and its
  scores are not divided by sqrt(head_dim));
- relu, gelu (exact or tanh), swish: |f(x)| <= |x| (gelu's negative lobe included:
  |x Phi(x)| <= |x|); a gated FFN's product: the product of the two bounds;
- residual adds: the sum of the two bounds (pre-LN: the stream grows layer by layer and the
  stack ends in a LayerNorm; post-LN: every sublayer ends in one);
- logits: the output projection (tied: |E| u) plus |bias|; the log-softmax runs in float64 after
  a shift by the maximum, so finite float32 logits are enough.

Every bound, and every intermediate named above, must stay below SAFE_LIMIT = 1e36, 340 times
below float32's largest number (3.4e38): the margin covers the rounding of float32 arithmetic
(each bound is also multiplied by the relative rounding error of the sums it comes from) and the
few products the bound treats as exact (softmax's sums, x * sqrt(d_model)); gelu's
x * (1 + erf), twice its input at most, is checked against the limit too. Every
weight must be finite. Anything else is a WeightError (a ValueError) naming the
computation, the value it could reach, and the largest weight it depends on.

Pure NumPy: vectorised products of |W| with a vector, one pass over each weight in blocks of
4 MB (float32 where it cannot overflow, float64 where it could), no copy of a table. An
opus-mt-sized model (75M weights, 300 MB) takes 0.14 s on this project's 2-core machine (0.3 s
with a test run beside it); tests/model/test_bounds.py's docstring has the command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from transformer.core.masking import BLOCKED_SCORE
from transformer.core.text import quoted
from transformer.model import weights as names
from transformer.model.config import TransformerConfig
from transformer.model.weights import WeightError, check_weights, weight_shapes

__all__ = ["SAFE_LIMIT", "check_weight_bounds"]

SAFE_LIMIT = 1e36  # below float32's max (3.4e38) by a margin for rounding; see the docstring
_U = 2.0 ** -24  # float32's unit roundoff
_TINY = np.finfo(np.float32).tiny  # the smallest normal float32: scaled entries never flush to 0
_SUBLAYER_NAMES = {"self_attention": "self-attention", "cross_attention": "cross-attention",
                   "feedforward": "feed-forward network"}


@dataclass
class _Bound:
    """|activation[..., j]| <= u[j] for every input; `sources`: the weights it depends on since
    the last LayerNorm that cut the dependence (for the sentence when a bound is too large)."""

    u: np.ndarray  # (d,) float64
    sources: tuple[str, ...]

    def __post_init__(self):
        # Each name once: a pre-LN stream and its sublayer's output share every source since the
        # last cut, so joining them as tuples doubled the list at every sublayer (267 million
        # names, 211 distinct, by NLLB's decoder layer 3).
        self.sources = tuple(dict.fromkeys(self.sources))

    @property
    def max(self) -> float:
        return float(self.u.max()) if self.u.size else 0.0


def check_weight_bounds(config: TransformerConfig, weights: dict,
                        where: str = "the checkpoint") -> dict[str, float]:
    """Prove that `weights` ({our weight path: array}, the shapes of weight_shapes(config),
    checked first: a WeightError names a missing, extra or mis-shaped one and `where` they came
    from) make the model compute finite float32 numbers for every input (see the module
    docstring), else raise WeightError naming the computation that could overflow and the
    largest weight it depends on. Returns the largest bounds found ({"encoder": its output,
    "decoder": its output, "logits": ...}), for reports and tests."""
    check_weights(weight_shapes(config), weights, where)
    return _Walk(config, weights).run()


class _Walk:
    """One walk through the model's computation, in the order transformer.model runs it."""

    def __init__(self, config: TransformerConfig, weights: dict):
        self.c = config
        self.w = weights
        self._output_table = names.token_embedding(
            "source" if config.share_embeddings else "target")

    # ------------------------------------------------------------------ the model
    def run(self) -> dict[str, float]:
        c = self.c
        x = self.embedding("source")
        for i in range(c.num_encoder_layers):
            x = self.block("encoder", i, x, None)
        if c.norm_first:
            x = self.layer_norm(x, "encoder_norm", "the encoder's final LayerNorm")
        memory = x
        y = self.embedding("target")
        for i in range(c.num_decoder_layers):
            y = self.block("decoder", i, y, memory)
        if c.norm_first:
            y = self.layer_norm(y, "decoder_norm", "the decoder's final LayerNorm")
        logits = self.logits(y)
        return {"encoder": memory.max, "decoder": y.max, "logits": logits.max}

    def embedding(self, side: str) -> _Bound:
        """PositionalEmbedding.call: E[ids] (* sqrt(d_model)) + position codes."""
        c = self.c
        table = names.token_embedding("source" if c.share_embeddings else side)
        where = f"the {side} embedding"
        u = self._column_max(table, where)  # (d,): the largest |entry| of each column
        if c.scale_embeddings:
            u = u * math.sqrt(c.d_model) * (1 + 2 * _U)
        sources = (table,)
        if c.positional == "learned":
            positions = names.position_embedding(side)
            u = u + self._column_max(positions, where)
            sources += (positions,)
        elif c.positional != "none":
            u = u + 1.0  # |sin|, |cos| <= 1
        x = self._checked(_Bound(u, sources), where, "its values")
        if c.embedding_norm:
            x = self.layer_norm(x, names.embedding_norm(side), f"{where}'s norm")
        return x

    def block(self, stack: str, i: int, x: _Bound, memory: _Bound | None) -> _Bound:
        """EncoderLayer / DecoderLayer: each sublayer with its residual and LayerNorm."""
        prefix = names.layer(stack, i)
        layer_name = f"{stack} layer {i}"
        for sublayer in names.STACKS[stack] + ("feedforward",):
            norm = f"{prefix}/{sublayer}_layer_norm"
            what = f"{layer_name}'s {_SUBLAYER_NAMES[sublayer]}"
            h = self.layer_norm(x, norm, f"{what}'s LayerNorm") if self.c.norm_first else x
            if sublayer == "feedforward":
                out = self.feedforward(h, f"{prefix}/feedforward", what)
            else:
                kv = memory if sublayer == "cross_attention" else h
                out = self.attention(h, kv, f"{prefix}/{sublayer}", what)
            x = self._checked(_Bound((x.u + out.u) * (1 + _U), x.sources + out.sources),
                              f"{layer_name}'s residual stream after its "
                              f"{_SUBLAYER_NAMES[sublayer]}", "its values")
            if not self.c.norm_first:
                x = self.layer_norm(x, norm, f"{what}'s LayerNorm")
        return x

    def attention(self, h: _Bound, kv: _Bound, prefix: str, what: str) -> _Bound:
        """MultiHeadAttention.call: softmax(Q K^T / sqrt(head_dim) + position bias + mask) V,
        then `output` (T5: no 1/sqrt(head_dim); its relative position bias on self-attention)."""
        c = self.c
        q = self.dense(h, f"{prefix}/query", what)  # (heads * head_dim,)
        k = self.dense(kv, f"{prefix}/key", what)
        v = self.dense(kv, f"{prefix}/value", what)
        # |q . k| per head <= sum over its dimensions of u_q * u_k: every partial sum of QK^T
        products = (q.u * k.u).reshape(c.num_heads, c.head_dim).sum(axis=1)  # (heads,)
        products = products * (1 + (c.head_dim + 1) * _U)
        largest = float(products.max())
        if not largest < SAFE_LIMIT:
            head = int(products.argmax())
            self._fail(what, f"the scores q·k of head {head}", largest, q.sources + k.sources)
        scores = largest / math.sqrt(c.head_dim) if c.attention_scale else largest
        stack = prefix.split("_layer_")[0]  # "encoder" or "decoder"
        if c.relative_attention and prefix.endswith("self_attention"):
            table = names.relative_bias(stack)
            scores = (scores + float(self._entries(table, what).max())) * (1 + _U)
        shifted = 2 * scores + abs(BLOCKED_SCORE)  # the softmax's x - max(x), blocked keys too
        if not shifted < SAFE_LIMIT:
            self._fail(what, "the softmax's shifted scores", shifted, q.sources + k.sources)
        # the weights are a convex combination (a head mask of 0/1 keeps or removes a head)
        context = _Bound(v.u * (1 + (c.max_len + 1) * _U), v.sources)
        return self.dense(context, f"{prefix}/output", what)

    def feedforward(self, h: _Bound, prefix: str, what: str) -> _Bound:
        """FeedForward.call: activation(x W1 + b1) W2 + b2, |activation(x)| <= |x|; gated (T5
        v1.1): (activation(x Wg + bg) * (x W1 + b1)) W2 + b2, bounded by the product."""
        activated = f"{prefix}/gate" if self.c.feedforward == "gated" else f"{prefix}/intermediate"
        inner = self.dense(h, activated, what)
        inner = self._checked(_Bound(2 * inner.u, inner.sources), what,
                              "its activation's intermediate (x (1 + erf) in gelu)")
        inner = _Bound(inner.u / 2, inner.sources)
        if self.c.feedforward == "gated":
            linear = self.dense(h, f"{prefix}/intermediate", what)
            inner = self._checked(_Bound(inner.u * linear.u * (1 + _U),
                                         inner.sources + linear.sources),
                                  what, "the product of its gate and its intermediate")
        return self.dense(inner, f"{prefix}/output", what)

    def layer_norm(self, x: _Bound, prefix: str, what: str) -> _Bound:
        """keras LayerNormalization (see the module docstring for its arithmetic), or the
        model's RMSNormalization."""
        if self.c.norm == "rms":
            return self.rms_norm(x, prefix, what)
        d, eps = self.c.d_model, self.c.layer_norm_epsilon
        gamma, beta = f"{prefix}/gamma", f"{prefix}/beta"
        g = self._entries(gamma, what)  # (d,) |gamma|
        b = self._entries(beta, what)
        largest = x.max
        # the sum of squared deviations: |x_j - mean| <= u_j + mean(u)
        variance = float(((x.u + x.u.mean()) ** 2).sum()) * (1 + (d + 4) * _U)
        if not variance < SAFE_LIMIT:
            self._fail(what, "the variance of its input", variance, x.sources)
        scaled = largest * float(g.max()) / math.sqrt(eps) * (1 + 4 * _U)  # x * inv
        if not scaled < SAFE_LIMIT:
            self._fail(what, "its input times gamma / sqrt(variance + epsilon)", scaled,
                       x.sources + (gamma,))
        normalised = math.sqrt(d) * (1 + (d + 4) * _U)
        cancellation = 2.0 ** -21 * largest / math.sqrt(eps)  # what rounding leaves of x - mean
        sources = (gamma, beta) + (x.sources if cancellation > normalised else ())
        return self._checked(_Bound(g * (normalised + cancellation) + b, sources), what,
                             "its output")

    def rms_norm(self, x: _Bound, prefix: str, what: str) -> _Bound:
        """keras RMSNormalization: x * rsqrt(mean(x^2) + epsilon) * scale. |x_j| <= sqrt(d) *
        rms(x), so the output is at most sqrt(d_model) * |scale|; the mean of squares and
        x * rsqrt (at most max(u) / sqrt(epsilon)) must stay below the limit too."""
        d, eps = self.c.d_model, self.c.layer_norm_epsilon
        scale = f"{prefix}/scale"
        g = self._entries(scale, what)
        squares = float((x.u ** 2).sum()) * (1 + (d + 4) * _U)
        if not squares < SAFE_LIMIT:
            self._fail(what, "the mean of the squares of its input", squares, x.sources)
        scaled = x.max / math.sqrt(eps) * float(max(g.max(), 1.0)) * (1 + 4 * _U)
        if not scaled < SAFE_LIMIT:
            self._fail(what, "its input times rsqrt(mean(x^2) + epsilon)", scaled,
                       x.sources + (scale,))
        return self._checked(_Bound(g * math.sqrt(d) * (1 + (d + 4) * _U), (scale,)), what,
                             "its output")

    def logits(self, y: _Bound) -> _Bound:
        """Transformer.project: y E^T (tied) or the output projection, plus the bias."""
        c = self.c
        what = "the output projection (the logits)"
        if c.output_scale != 1.0:  # T5 v1.0: the decoder's output scaled first
            y = self._checked(_Bound(y.u * c.output_scale * (1 + _U), y.sources), what,
                              "its input times output_scale")
        if not c.tie_output:
            return self.dense(y, names.OUTPUT_PROJECTION, what, bias=c.output_bias)
        table = self._output_table
        u = _product(self._array(table), y.u, rows=True)  # (V,): |E| y
        sources = y.sources + (table,)
        if c.output_bias:
            u = u + self._entries("output_bias", what)
            sources += ("output_bias",)
        return self._checked(_Bound(u, sources), what, "the logits")

    # ------------------------------------------------------------------ the operations
    def dense(self, x: _Bound, prefix: str, what: str, bias: bool | None = None) -> _Bound:
        """x W + b: u @ |W| + |b| (attention.dense's one 2-D matmul and bias_add); bias None:
        the config's use_bias."""
        bias = self.c.use_bias if bias is None else bias
        kernel = f"{prefix}/kernel"
        u = _product(self._array(kernel), x.u)  # (n_out,): u @ |W|
        sources = x.sources + (kernel,)
        if bias:
            u = u + self._entries(f"{prefix}/bias", what)
            sources += (f"{prefix}/bias",)
        part = prefix.rsplit("/", 1)[-1]
        return self._checked(_Bound(u, sources), what, f"the output of its {part} projection")

    def _array(self, name: str) -> np.ndarray:
        """The weight as the model holds it: float32 (a float64 beyond its range becomes
        infinity, as assigning it would)."""
        with np.errstate(over="ignore"):
            return np.asarray(self.w[name], np.float32)

    def _column_max(self, name: str, what: str) -> np.ndarray:
        """max over rows of |table[:, j]|: (d,) float64 (from the columns' max and min: no
        |table| is made); WeightError when not finite."""
        table = self._array(name)
        column = np.maximum(table.max(axis=0), -table.min(axis=0)).astype(np.float64)
        if not np.isfinite(column).all():
            raise _not_finite(name)
        return column

    def _entries(self, name: str, what: str) -> np.ndarray:
        with np.errstate(over="ignore"):
            values = np.abs(np.asarray(self.w[name], np.float32).astype(np.float64))
        if not np.isfinite(values).all():
            raise _not_finite(name)
        return values

    def _checked(self, bound: _Bound, what: str, quantity: str) -> _Bound:
        """The bound, when below SAFE_LIMIT (and finite: a NaN weight makes it NaN)."""
        if not np.isfinite(bound.u).all():
            for name in dict.fromkeys(bound.sources):
                if not np.isfinite(np.asarray(self.w[name])).all():
                    raise _not_finite(name)
        if not bound.max < SAFE_LIMIT:
            self._fail(what, quantity, bound.max, bound.sources)
        return bound

    def _fail(self, what: str, quantity: str, value: float, sources: tuple[str, ...]):
        """WeightError: `quantity` in `what` could reach `value`; the culprit named is the
        weight it depends on with the largest magnitude (a kernel's largest column sum of |W|,
        any other weight's largest |entry|)."""
        for name in dict.fromkeys(sources):
            if not np.isfinite(np.asarray(self.w[name])).all():
                raise _not_finite(name)
        culprit, size, measure = None, -1.0, ""
        for name in dict.fromkeys(sources):  # no float64 copy of a table: blocks, or max/min
            array = self._array(name)
            if name.endswith("/kernel"):
                sums = _product(array, np.ones(array.shape[0]))  # (n_out,) column sums of |W|
                stat, kind = float(sums.max()), "largest column sum"
            else:
                stat, kind = max(float(array.max()), -float(array.min())), "largest entry"
            if stat > size:
                culprit, size, measure = name, stat, kind
        reach = f"{value:.1e}" if math.isfinite(value) else "infinity"
        blame = f" (its largest weight: {measure} {size:.1e} in {quoted(culprit)})" if culprit \
            else ""
        raise WeightError(
            f"The weights can overflow float32: in {what}, {quantity} could reach {reach} for "
            f"some input{blame}; every value the model computes must stay below "
            f"{SAFE_LIMIT:.0e}.")


def _product(array: np.ndarray, u: np.ndarray, rows: bool = False) -> np.ndarray:
    """An upper bound in float64 of u @ |W| (W (n, m) -> (m,)), or with rows=True of |E| u
    (E (V, n) -> (V,), the tied logits): computed in float32 a block of about 4 MB at a time
    (|block| is the only copy made) on u scaled to at most 1 (entries floored at float32's
    smallest normal, so nothing rounds to 0), times the sums' relative rounding error; a block
    whose float32 sums overflow is summed again in float64. np.einsum, not matmul: on small
    matrices it is ~100 times quicker here than BLAS's gemv."""
    n = u.size
    scale = float(u.max()) if n else 0.0
    out = np.zeros(array.shape[0] if rows else array.shape[1])
    if scale == 0.0:
        return out
    v64 = np.maximum(u / scale, _TINY)  # (n,) in (0, 1]
    v = v64.astype(np.float32)
    step = max(1, 2**20 // max(1, array.shape[1]))  # rows of ~4 MB
    for start in range(0, array.shape[0], step):
        block = np.abs(array[start:start + step])  # (rows, n) or (rows, m)
        if rows:
            part = np.einsum("ij,j->i", block, v).astype(np.float64)
            if not np.isfinite(part).all():
                part = np.einsum("ij,j->i", block.astype(np.float64), v64)
            out[start:start + step] = part
        else:
            part = np.einsum("i,ij->j", v[start:start + step], block).astype(np.float64)
            if not np.isfinite(part).all():
                part = np.einsum("i,ij->j", v64[start:start + step], block.astype(np.float64))
            out += part
    return out * scale * (1 + (n + 3) * _U)


def _not_finite(name: str) -> WeightError:
    return WeightError(f"The weight {quoted(name)} holds NaN or infinity; every weight must be a "
                       "finite number.")
