"""The second line behind the load-time bound (transformer.model.bounds): any NaN or infinity
met while computing for a user becomes a NumericalError, an error naming what computed it
(the kind and layer, or the log-probabilities) and where (the decoding step, or the source
position), raised instead of returning arrays that a page would draw as a map of NaN.

The checks read only what the runtime returns anyway (attention maps per layer, the
log-probabilities per step; Q, K, V, scores and hidden states when they were asked for), in the
order the model computes them, so the first one named is where the trouble started, as far as
the captured arrays show it. NumPy's isfinite over arrays already on the host: cheap.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NumericalError", "check_encoder_flags", "check_forward", "check_step"]

_KINDS = {"encoder": ("encoder", "self-attention", "source", "source"),
          "decoder": ("decoder", "self-attention", "target", "target"),
          "cross": ("decoder", "cross-attention", "target", "source")}


class NumericalError(ValueError):
    """NaN or infinity computed for a user, in an error message: "The model computed NaN in decoder
    layer 3's cross-attention at step 7; nothing is drawn from it." A ValueError, as the other
    errors a page shows as an error message."""

    def __init__(self, what: str, where: str, when: str = ""):
        self.what, self.where, self.when = what, where, when
        at = f" at {when}" if when else ""
        super().__init__(f"The model computed {what} in {where}{at}; nothing is drawn from it.")


def _position(side: str, index: int) -> str:
    """"step 7" on the target side (row t of a teacher-forced pass is decoding step t),
    "source position 3" on the source side."""
    return f"step {index}" if side == "target" else f"source position {index}"


def _what(values: np.ndarray) -> str:
    return "NaN" if np.isnan(values).any() else "an infinity"


def _first_bad_row(values: np.ndarray, axis: int) -> int | None:
    """The first index along `axis` whose slice holds a non-finite value, or None."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    other = tuple(a for a in range(values.ndim) if a != axis)
    return int(np.flatnonzero(bad.any(axis=other))[0])


def check_forward(out: dict, b: int = 0, n: int | None = None, t: int | None = None,
                  detail_of: tuple[str, int] | None = None) -> None:
    """Raise NumericalError at the first non-finite value of row `b` of a teacher-forced pass
    (transformer.inference.forward's dict, or Transformer.call's with return_attention), over
    the n source and t target positions that are drawn (None: all), in the order the model
    computes: the embeddings, then each encoder layer (its attention, Q, K, V, scores, its
    output), then each decoder layer's self- and cross-attention and output, then the
    log-probabilities (or the logits). detail_of=(kind, layer): the pass handed out the details
    (Q, K, V, scores) of that layer alone, each (1, B, ...)."""
    sizes = {"source": n, "target": t}

    def cut(array, sides):
        """array (..., len_1[, len_2], ...) of row b, cut to the drawn positions."""
        index = [slice(None)] * array.ndim
        for axis, side in sides:
            index[axis] = slice(0, sizes[side])
        return array[tuple(index)]

    for side, stack in (("source", "encoder"), ("target", "decoder")):
        hidden = out.get(f"{stack}_hidden_states")
        if hidden is not None:
            _check(cut(np.asarray(hidden)[0, b], [(0, side)]), 0, side, f"the {side} embedding")
    layers = {name: np.asarray(out[f"{name}_attention"]).shape[0] for name in _KINDS
              if out.get(f"{name}_attention") is not None}
    order = [("encoder", layer) for layer in range(layers.get("encoder", 0))] + [
        (name, layer) for layer in range(max(layers.get("decoder", 0), layers.get("cross", 0)))
        for name in ("decoder", "cross") if name in layers]
    for name, layer in order:
        stack, label, query_side, key_side = _KINDS[name]
        where = f"{stack} layer {layer}'s {label}"
        arrays = [(f"{name}_attention", [(1, query_side), (2, key_side)], 1, query_side),
                  (f"{name}_scores", [(1, query_side), (2, key_side)], 1, query_side),
                  (f"{name}_q", [(1, query_side)], 1, query_side),
                  (f"{name}_k", [(1, key_side)], 1, key_side),
                  (f"{name}_v", [(1, key_side)], 1, key_side)]
        for key, sides, axis, side in arrays:
            if key not in out:
                continue
            at = layer  # (L, B, H, q_len, k_len) or (L, B, H, len, head_dim)
            if detail_of is not None and not key.endswith("_attention"):  # (1, B, ...)
                if (name, layer) != (detail_of[0], int(detail_of[1])):
                    continue
                at = 0
            _check(cut(np.asarray(out[key])[at, b], sides), axis, side, where)
        hidden = out.get(f"{stack}_hidden_states")
        if hidden is not None and name != "decoder":  # the layer's output, after its FFN
            side = "source" if stack == "encoder" else "target"
            _check(cut(np.asarray(hidden)[layer + 1, b], [(0, side)]), 0, side,
                   f"{stack} layer {layer}'s output")
    for key in ("log_probs", "top_log_probs", "logits"):
        if key in out:  # (B, T[, k or V])
            _check(cut(np.asarray(out[key])[b], [(0, "target")]), 0, "target",
                   "the log-probabilities" if key != "logits" else "the logits")


def _check(values: np.ndarray, axis: int, side: str, where: str) -> None:
    row = _first_bad_row(values, axis)
    if row is not None:
        raise NumericalError(_what(values), where, _position(side, row))


def check_encoder_flags(finite: np.ndarray, positions: np.ndarray) -> None:
    """finite (L_enc, N) bool: whether encoder layer l's attention row of position i held only
    finite numbers (computed on the device by the decode loops); positions (N,) bool: the
    positions that count (the source's real tokens). Raises NumericalError at the first layer
    and position that did not."""
    finite = np.asarray(finite, bool)[:, :positions.size]
    bad = ~finite & np.asarray(positions, bool)[np.newaxis]  # (L, N)
    if bad.any():
        layer = int(np.flatnonzero(bad.any(axis=1))[0])
        raise NumericalError("NaN or an infinity", f"encoder layer {layer}'s self-attention",
                             _position("source", int(np.flatnonzero(bad[layer])[0])))


def check_step(step: int, log_prob, top_log_probs, self_row=None, cross_row=None,
               self_finite=None, cross_finite=None) -> None:
    """Raise NumericalError when decoding step `step` computed NaN or infinity: its captured
    attention rows (self_row (L, H, step + 1), cross_row (L, H, N)) or, when the rows were not
    kept, their finiteness per layer (self_finite, cross_finite (L,) bool), layer by layer,
    then its log-probabilities (the chosen token's and the top k's)."""
    layers = next((len(a) for a in (self_row, cross_row, self_finite, cross_finite)
                   if a is not None), 0)
    for layer in range(layers):
        for label, row, finite in (("self-attention", self_row, self_finite),
                                   ("cross-attention", cross_row, cross_finite)):
            where = f"decoder layer {layer}'s {label}"
            if row is not None and not np.isfinite(row[layer]).all():
                raise NumericalError(_what(row[layer]), where, _position("target", step))
            if finite is not None and not bool(finite[layer]):
                raise NumericalError("NaN or an infinity", where, _position("target", step))
    values = np.append(np.asarray(top_log_probs, np.float64).ravel(), float(log_prob))
    if not np.isfinite(values).all():
        raise NumericalError(_what(values), "the log-probabilities", _position("target", step))


def log_softmax(logits) -> np.ndarray:
    """Log-probabilities over the last axis, in float64."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
