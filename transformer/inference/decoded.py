"""What a decode gives: each step's token, its log-probability, the top-k and the attention
that produced it (DecodeStep), one source's decode (Decoding) and a beam search's (BeamDecoding,
with the beam); the step records both searches build (make_step) and the names of the tokens
(Names, text_of). Made by transformer.inference.search_ours and search_transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from transformer.inference.numerics import check_step

TOP_K = 5


@dataclass
class DecodeStep:
    """One generated token and what produced it."""

    token: str
    token_id: int
    log_prob: float  # log-probability of the chosen token
    top_k: list[tuple[str, int, float]]  # (token, id, probability), most probable first
    cross: np.ndarray  # (L_dec, H, N): the new token's cross-attention over the source
    self: np.ndarray  # (L_dec, H, t + 1): its decoder self-attention over the prefix


@dataclass
class Decoding:
    """The result of decoding one source."""

    token_ids: list[int]  # generated ids, the end id included when produced
    tokens: list[str]
    text: str
    steps: list[DecodeStep] = field(default_factory=list)
    # "end" (the end token), "length" (max_len), "time" (seconds), "stopped" (a Watch's stop) or
    # "banned" (transformers' search: a step whose processors banned every id)
    stopped_by: str = "end"

    @property
    def log_prob(self) -> float:
        return float(sum(step.log_prob for step in self.steps))

    def cross_attention(self) -> np.ndarray:
        """(L_dec, H, T, N): every step's cross-attention stacked (the alignment matrix)."""
        return np.stack([step.cross for step in self.steps], axis=2)


@dataclass
class BeamDecoding(Decoding):
    """The best hypothesis of a beam search (its steps hold its own attention), plus the beam."""

    score: float = 0.0  # length-normalised log-probability
    beam_width: int = 1  # the hypotheses kept at each step
    hypotheses: list[Decoding] = field(default_factory=list)  # finished, best first
    beam_steps: list[list[tuple[list[str], float]]] = field(default_factory=list)


def make_step(names, token_id, log_prob, top_ids, top_log_probs, self_row, cross_row, *,
               step, finite=None):
    """Step `step`'s DecodeStep; NumericalError (transformer.inference.numerics) when it
    computed NaN or infinity: its attention rows, or without them their finiteness per layer
    (finite: (self (L,), cross (L,)) bool), and its log-probabilities."""
    check_step(step, log_prob, top_log_probs, self_row, cross_row,
               *(finite if finite is not None else (None, None)))
    return DecodeStep(
        token=names([token_id])[0],
        token_id=int(token_id),
        log_prob=float(log_prob),
        top_k=[(name, int(i), float(np.exp(lp)))
               for name, i, lp in zip(names(top_ids), top_ids, top_log_probs)],
        cross=None if cross_row is None else np.array(cross_row, np.float32),
        self=None if self_row is None else np.array(self_row, np.float32),
    )


class Names:
    """Token names by id: the tokenizer's pieces (looked up once per id), or the ids as text."""

    def __init__(self, tokenizer, *id_arrays):
        self.tokenizer = tokenizer
        self.pieces = {}
        if tokenizer is not None and id_arrays:
            ids = np.unique(np.concatenate([np.asarray(a).reshape(-1) for a in id_arrays]))
            self.pieces = dict(zip(ids.tolist(), tokenizer.ids_to_pieces(ids.tolist())))

    def __call__(self, ids):
        ids = [int(i) for i in ids]
        if self.tokenizer is None:
            return [str(i) for i in ids]
        missing = [i for i in ids if i not in self.pieces]
        if missing:
            self.pieces.update(zip(missing, self.tokenizer.ids_to_pieces(missing)))
        return [self.pieces[i] for i in ids]


def text_of(ids, tokenizer):
    return tokenizer.decode(ids) if tokenizer is not None else " ".join(str(i) for i in ids)


__all__ = [
    "BeamDecoding",
    "DecodeStep",
    "Decoding",
    "make_step",
    "Names",
    "text_of",
    "TOP_K",
]
