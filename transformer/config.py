"""TransformerConfig: every size and option of the model, with a JSON round trip."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

POSITIONAL_KINDS = ("sinusoidal", "learned")


@dataclass
class TransformerConfig:
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512  # width of every residual stream
    num_heads: int = 8  # d_model must divide evenly into heads of d_k = d_model // num_heads
    dff: int = 2048  # inner width of the position-wise feed-forward network
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    dropout_rate: float = 0.1  # residual and embedding dropout, as in the paper
    max_len: int = 256  # longest sequence the positional encodings cover
    positional: str = "sinusoidal"  # "sinusoidal" (the paper) or "learned"
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (paper, section 3.4)
    share_embeddings: bool = False  # one embedding matrix for source and target
    tie_output: bool = False  # output projection = target embedding matrix transposed
    norm_first: bool = False  # pre-LayerNorm; False = post-LayerNorm as in the paper
    pad_id: int = 0
    start_id: int = 1
    end_id: int = 2

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            expected = _FIELD_TYPES[f.name]
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
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})"
            )
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
        if self.positional not in POSITIONAL_KINDS:
            raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {self.positional!r}")
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
        if len({self.pad_id, self.start_id, self.end_id}) != 3:
            raise ValueError(
                f"pad_id, start_id and end_id must differ, got {self.pad_id}, {self.start_id}, {self.end_id}"
            )

    def parameter_count(self) -> int:
        """The number of weights a model of this config has (what a checkpoint must hold)."""
        d, dff = self.d_model, self.dff
        attention = 4 * (d * d + d)  # query, key, value, output: kernel + bias each
        norm = 2 * d  # gamma, beta
        ffn = d * dff + dff + dff * d + d
        count = self.src_vocab_size * d
        count += 0 if self.share_embeddings else self.tgt_vocab_size * d
        count += 2 * self.max_len * d if self.positional == "learned" else 0
        count += self.num_encoder_layers * (attention + ffn + 2 * norm)
        count += self.num_decoder_layers * (2 * attention + ffn + 3 * norm)
        count += 2 * norm if self.norm_first else 0  # final encoder and decoder norms
        count += 0 if self.tie_output else d * self.tgt_vocab_size + self.tgt_vocab_size
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


_FIELD_TYPES: dict[str, type] = {
    f.name: {"int": int, "float": float, "str": str, "bool": bool}[f.type]
    for f in dataclasses.fields(TransformerConfig)
}
