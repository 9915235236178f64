"""TransformerConfig: every size and option of the model, with a JSON round trip."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

POSITIONAL_KINDS = ("sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq", "learned", "none")
SINUSOIDAL_KINDS = ("sinusoidal", "sinusoidal_concat", "sinusoidal_fairseq")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swish", "silu")  # as transformer.model.layers'
NORMS = ("layer", "rms")
FEEDFORWARDS = ("dense", "gated")
MAX_RELATIVE_BUCKETS = 1024  # T5's relative position buckets (it uses 32)


@dataclass
class TransformerConfig:
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512  # width of every residual stream
    num_heads: int = 8  # heads of head_dim each (by default d_model // num_heads)
    dff: int = 2048  # inner width of the position-wise feed-forward network
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout_rate: float = 0.1  # residual and embedding dropout, as in the paper
    max_len: int = 256  # longest sequence the positional encodings cover
    positional: str = "sinusoidal"  # the paper's; "sinusoidal_concat" ([sin | cos]) or "learned"
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (paper, section 3.4)
    share_embeddings: bool = False  # one embedding matrix for source and target
    tie_output: bool = False  # output projection = target embedding matrix transposed
    norm_first: bool = False  # pre-LayerNorm; False = post-LayerNorm as in the paper
    pad_id: int = 0
    start_id: int = 1
    end_id: int = 2
    # Options that models imported from elsewhere need; the defaults are the paper's choices and
    # every checkpoint written before they existed.
    head_dim: int | None = None  # per-head size of q, k, v; None: d_model // num_heads
    activation: str = "relu"  # of the feed-forward network: relu, gelu (erf), swish = silu
    layer_norm_epsilon: float = 1e-6
    output_bias: bool | None = None  # a bias on the logits; None: yes when untied, no when tied
    mask_padding: bool = True  # False: padding is never masked (only the look-ahead mask)
    pad_source_to: int = 0  # > 0: every source is padded to this many ids before the encoder
    source_start: bool = True  # the source is framed as <s> pieces </s>; each end optional
    source_end: bool = True
    target_start: bool = False  # a typed target starts with its tokenizer's prefix (BART: <s>)
    # The Hugging Face families' options (BART, mBART, T5, M2M100/NLLB, Pegasus); the defaults
    # are the model above, so every older checkpoint means what it meant.
    embedding_norm: bool = False  # a norm on each stack's embedded input (layernorm_embedding)
    norm: str = "layer"  # every norm: "layer" (LayerNorm) or "rms" (T5's: x / rms(x) * scale)
    use_bias: bool = True  # biases on the attention and feed-forward projections (T5: none)
    attention_scale: bool = True  # scores divided by sqrt(head_dim) (T5: not)
    feedforward: str = "dense"  # "dense": f(x W1 + b1) W2 + b2; "gated": (f(x Wg) * x W1) W2
    position_offset: int = 0  # sinusoids start at this position (M2M100, NLLB: pad_id + 1)
    relative_attention: bool = False  # T5's relative position bias on self-attention scores
    relative_buckets: int = 32  # its buckets (half per direction in the encoder)
    relative_max_distance: int = 128  # distances beyond share the last bucket
    output_scale: float = 1.0  # the decoder's output times this before the logits (T5 v1.0)

    def __post_init__(self) -> None:
        if self.head_dim is None and _divides(self.num_heads, self.d_model):
            self.head_dim = self.d_model // self.num_heads
        if self.output_bias is None and isinstance(self.tie_output, bool):
            self.output_bias = not self.tie_output
        self.validate()

    @property
    def d_k(self) -> int:
        """The paper's name for head_dim."""
        return self.head_dim

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = _FIELD_TYPES[f.name]
            if value is None and f.name in _RESOLVED:
                continue  # resolved in __post_init__, or reported below
            ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise ValueError(
                    f"{f.name} must be of type {expected.__name__}, got {type(value).__name__} ({value!r})"
                )
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "dff",
                     "num_encoder_layers", "num_decoder_layers", "max_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.head_dim is None:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads}), "
                "or head_dim must be given"
            )
        if self.head_dim <= 0:
            raise ValueError(f"head_dim must be positive, got {self.head_dim}")
        if self.output_bias is None:
            raise ValueError("output_bias must be of type bool, got NoneType (None)")
        specials = int(self.source_start) + int(self.source_end)
        if self.max_len < specials + 1:
            raise ValueError(f"max_len must be at least {specials + 1} (the source's start/end ids "
                             f"and one token), got {self.max_len}")
        if not 0 <= self.pad_source_to <= self.max_len:
            raise ValueError(f"pad_source_to must be in [0, max_len = {self.max_len}], "
                             f"got {self.pad_source_to}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not (math.isfinite(self.layer_norm_epsilon) and self.layer_norm_epsilon > 0):
            raise ValueError(f"layer_norm_epsilon must be a positive number, "
                             f"got {self.layer_norm_epsilon}")
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {self.positional!r}")
        for name, kinds in (("norm", NORMS), ("feedforward", FEEDFORWARDS)):
            if getattr(self, name) not in kinds:
                raise ValueError(f"{name} must be one of {kinds}, got {getattr(self, name)!r}")
        if self.position_offset < 0 or (self.position_offset and
                                        self.positional not in SINUSOIDAL_KINDS):
            raise ValueError(f"position_offset must be >= 0, and 0 unless the positions are "
                             f"sinusoids, got {self.position_offset} with {self.positional!r}")
        if not 4 <= self.relative_buckets <= MAX_RELATIVE_BUCKETS:
            raise ValueError(f"relative_buckets must be in [4, {MAX_RELATIVE_BUCKETS}], "
                             f"got {self.relative_buckets}")
        if self.relative_max_distance <= self.relative_buckets // 4:
            raise ValueError(f"relative_max_distance must exceed relative_buckets // 4 (the "
                             f"exact distances), got {self.relative_max_distance}")
        if not (math.isfinite(self.output_scale) and self.output_scale > 0):
            raise ValueError(f"output_scale must be a positive number, got {self.output_scale}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings requires src_vocab_size == tgt_vocab_size, "
                f"got {self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        smallest_vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "start_id", "end_id"):
            value = getattr(self, name)
            if not 0 <= value < smallest_vocab:
                raise ValueError(f"{name} must be in [0, {smallest_vocab}), got {value}")
        # start_id may equal pad_id (Marian starts decoding with its pad id): the decoder's first
        # position is never treated as padding. It may equal end_id (BART, mBART-50, M2M100 and
        # NLLB start decoding with </s>): the start token is fed, never generated, so an end is
        # still told apart.
        if self.end_id == self.pad_id:
            raise ValueError(
                f"end_id must differ from pad_id, got {self.pad_id}, {self.start_id}, "
                f"{self.end_id} (pad, start, end)"
            )

    def parameter_count(self) -> int:
        """The number of weights a model of this config has (what a checkpoint must hold)."""
        d, dff, inner = self.d_model, self.dff, self.num_heads * self.head_dim
        bias = int(self.use_bias)
        # q, k, v (d -> inner), output (inner -> d)
        attention = 3 * (d * inner + bias * inner) + inner * d + bias * d
        norm = 2 * d if self.norm == "layer" else d  # gamma, beta; or scale
        ffn = d * dff + bias * dff + dff * d + bias * d
        ffn += (d * dff + bias * dff) if self.feedforward == "gated" else 0
        count = self.src_vocab_size * d
        count += 0 if self.share_embeddings else self.tgt_vocab_size * d
        count += 2 * self.max_len * d if self.positional == "learned" else 0
        count += 2 * norm if self.embedding_norm else 0
        count += 2 * self.relative_buckets * self.num_heads if self.relative_attention else 0
        count += self.num_encoder_layers * (attention + ffn + 2 * norm)
        count += self.num_decoder_layers * (2 * attention + ffn + 3 * norm)
        count += 2 * norm if self.norm_first else 0  # final encoder and decoder norms
        count += 0 if self.tie_output else d * self.tgt_vocab_size
        count += self.tgt_vocab_size if self.output_bias else 0
        return count

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "TransformerConfig":
        """Build from a parsed mapping: unknown fields are refused, missing ones take defaults."""
        if not isinstance(data, dict):
            raise ValueError(f"config must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_FIELD_TYPES))
        if unknown:
            raise ValueError(f"unknown config field {unknown[0]!r}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> "TransformerConfig":
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"config is not valid JSON: {err}") from None
        return cls.from_dict(data)


def _divides(num_heads, d_model) -> bool:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (num_heads, d_model))
    return ints and num_heads > 0 and d_model % num_heads == 0


_FIELD_TYPES: dict[str, type] = {
    f.name: {"int": int, "float": float, "str": str, "bool": bool}[f.type.split(" |")[0]]
    for f in dataclasses.fields(TransformerConfig)
}
_RESOLVED = ("head_dim", "output_bias")  # None in, a value out of __post_init__
