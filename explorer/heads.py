"""Heads by label ("cross L1 H2", transformer.core.kinds' one format): the labels a model or a set
of maps offers, and one head's map with its token axes."""

from __future__ import annotations

from transformer.core.kinds import KIND_NAMES, KINDS, head_labels, layer_counts, parse_head_label


def labels_of_maps(maps: dict) -> list[str]:
    """Every head the maps hold, kind by kind, layer by layer."""
    return head_labels({name: maps[name].shape[:2] for name in KIND_NAMES})


def labels_of_model(config) -> list[str]:
    """Every head of a model of `config`, kind by kind, layer by layer."""
    return head_labels({name: (n, config.num_heads) for name, n in layer_counts(config).items()})


def head_map(maps: dict, label: str) -> tuple:
    """(weights (q, k), query tokens, key tokens) of the head `label` names."""
    name, layer, head = parse_head_label(label)
    kind = KINDS[name]
    return maps[name][layer, head], list(maps[kind.query_tokens]), list(maps[kind.key_tokens])
