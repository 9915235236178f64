"""The three attention kinds of an encoder-decoder Transformer, declared once.

Every page, figure and module that needs to know what "cross-attention" is (what it is called,
which tokens are its queries and keys, how many layers it has) asks here. Head labels have one
format, "cross L1 H2", with its parser; head masks have one builder.

No TensorFlow: NumPy only, so the app's glue and the figures can use it freely.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["KINDS", "KIND_NAMES", "Kind", "head_label", "head_labels", "head_masks",
           "kind", "kind_by_label", "layer_counts", "parse_head_label"]


@dataclass(frozen=True)
class Kind:
    """One attention kind: its name (the key of its maps and head masks), what it is called, the
    token side of its queries and of its keys, and whose layers it lives in."""

    name: str  # "encoder" | "decoder" | "cross"
    label: str  # shown to users: "Cross-attention"
    query_side: str  # "source" | "target"
    key_side: str  # "source" | "target"
    stack: str  # "encoder" | "decoder": whose layer count applies

    @property
    def query_tokens(self) -> str:
        """The maps' key for the query tokens ("source_tokens" or "target_tokens")."""
        return f"{self.query_side}_tokens"

    @property
    def key_tokens(self) -> str:
        return f"{self.key_side}_tokens"

    @property
    def mask(self) -> str:
        """The maps' key for this kind's mask (True = may attend)."""
        return f"{self.name}_mask"

    def num_layers(self, config) -> int:
        """How many layers of this kind a model of `config` has."""
        return config.num_encoder_layers if self.stack == "encoder" else config.num_decoder_layers


KINDS: dict[str, Kind] = {
    "encoder": Kind("encoder", "Encoder self-attention", "source", "source", "encoder"),
    "decoder": Kind("decoder", "Decoder self-attention", "target", "target", "decoder"),
    "cross": Kind("cross", "Cross-attention", "target", "source", "decoder"),
}
KIND_NAMES: tuple[str, ...] = tuple(KINDS)  # ("encoder", "decoder", "cross")


def kind(name: str) -> Kind:
    """The Kind called `name`; ValueError naming the three for anything else."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"attention kind must be one of {KIND_NAMES}, got {name!r}") from None


def kind_by_label(label: str) -> Kind:
    """The Kind whose user-facing label is `label` ("Cross-attention")."""
    for k in KINDS.values():
        if k.label == label:
            return k
    raise ValueError(f"no attention kind is labelled {label!r}")


def layer_counts(config) -> dict[str, int]:
    """{"encoder": L_enc, "decoder": L_dec, "cross": L_dec}."""
    return {name: k.num_layers(config) for name, k in KINDS.items()}


# ------------------------------------------------------------------ head labels
_LABEL = re.compile(r"^\s*(encoder|decoder|cross)\s+L(\d+)\s+H(\d+)\s*$")


def head_label(kind_name: str, layer: int, head: int) -> str:
    """("cross", 1, 2) -> "cross L1 H2": the one way a head is named anywhere in the app."""
    kind(kind_name)
    if int(layer) < 0 or int(head) < 0:
        raise ValueError(f"layer and head must be >= 0, got layer {layer} and head {head}")
    return f"{kind_name} L{int(layer)} H{int(head)}"


def parse_head_label(label: str) -> tuple[str, int, int]:
    """"cross L1 H2" -> ("cross", 1, 2); ValueError for anything else."""
    match = _LABEL.match(str(label))
    if not match:
        raise ValueError(f'a head label looks like "cross L1 H2" (kind among {KIND_NAMES}), '
                         f"got {label!r}")
    return match.group(1), int(match.group(2)), int(match.group(3))


def head_labels(shapes: Mapping[str, tuple[int, int]],
                kinds: Iterable[str] = KIND_NAMES) -> list[str]:
    """Every head's label, kind by kind (in `kinds` order), layer by layer, given
    {kind: (layers, heads)} (e.g. from the maps' shapes, or from a config:
    {k: (n, config.num_heads) for k, n in layer_counts(config).items()})."""
    return [head_label(name, layer, head) for name in kinds if name in shapes
            for layer in range(int(shapes[name][0])) for head in range(int(shapes[name][1]))]


# ------------------------------------------------------------------ head masks
def head_masks(config, silenced: Iterable = (), given: Mapping | None = None
               ) -> dict[str, np.ndarray]:
    """Full float32 (layers, heads) masks for every kind: 1 = the head works, 0 = silenced.

    silenced: heads to turn off, each a (kind, layer, head) tuple or a head label.
    given: {kind: (layers, heads) array}, any subset, used as the starting mask of that kind.
    ValueError names an unknown kind, a wrong shape or a head the model does not have.
    """
    counts = layer_counts(config)
    masks = {name: np.ones((n, config.num_heads), np.float32) for name, n in counts.items()}
    given = dict(given or {})
    unknown = sorted(set(given) - set(KINDS), key=str)
    if unknown:
        raise ValueError(f"head_mask keys must be among {KIND_NAMES}, got {unknown}")
    for name, mask in given.items():
        if mask is None:
            continue
        mask = np.asarray(mask, np.float32)
        if mask.shape != masks[name].shape:
            raise ValueError(f"head_mask[{name!r}] must have shape {masks[name].shape} "
                             f"(layers, heads), got {mask.shape}")
        masks[name] = mask.copy()
    for item in silenced:
        if isinstance(item, str):
            item = parse_head_label(item)
        try:
            name, layer, head = item
        except (TypeError, ValueError):
            raise ValueError(f"a silenced head must be (kind, layer, head) or a label like "
                             f"'cross L0 H1', got {item!r}") from None
        kind(name)
        layers = counts[name]
        if not (isinstance(layer, (int, np.integer)) and 0 <= layer < layers):
            raise ValueError(f"{name} layer {layer!r} is out of range: the model has {layers} "
                             f"{name} layers (0..{layers - 1})")
        if not (isinstance(head, (int, np.integer)) and 0 <= head < config.num_heads):
            raise ValueError(f"head {head!r} is out of range: the model has {config.num_heads} "
                             f"heads per layer (0..{config.num_heads - 1})")
        masks[name][layer, head] = 0.0
    return masks
