"""What a model is made of: parameter counts per component, from its weights."""

from __future__ import annotations

import numpy as np


def parameter_counts(model) -> list[dict]:
    """One row per component: {"component", "part", "parameters"}, in model order.

    A shared embedding matrix is counted once (under the source embedding)."""
    rows: dict[tuple[str, str], int] = {}
    seen = set()
    for weight in model.weights:
        if id(weight) in seen:
            continue
        seen.add(id(weight))
        parts = weight.path.split("/")[1:]  # drop the model's own name
        component, part = _component(parts)
        rows[(component, part)] = rows.get((component, part), 0) + int(np.prod(weight.shape))
    return [{"component": c, "part": p, "parameters": n} for (c, p), n in rows.items()]


def _component(parts: list[str]) -> tuple[str, str]:
    head = parts[0]
    if head.startswith(("encoder_layer_", "decoder_layer_")):
        side, _, index = head.rpartition("_")
        return f"{side.replace('_', ' ')} {index}", parts[1].replace("_", " ")
    if head.endswith("_embedding"):
        return head.replace("_", " "), parts[1].replace("_", " ") if len(parts) > 2 else "embeddings"
    return head.replace("_", " "), "weights"
