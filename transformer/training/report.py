"""The held-out report's per-format rows (written by train.held_out_report) as the Model page
shows them, read defensively: a checkpoint's metadata is anyone's data, and the metadata schema
keeps "held_out"'s extra keys as plain data, unchecked. No TensorFlow."""

from __future__ import annotations

import math
from typing import Any

MAX_ROWS = 200  # more is not a table anyone reads
MAX_CHARS = 200  # a format name or example longer than this is cut


def per_format_rows(metadata: Any) -> list[dict]:
    """[{"format", "example", "exact match", "examples"}] from metadata["held_out"]["per_format"],
    keeping only rows with a text format name, an exact match in [0, 1] and a whole number of
    examples; [] when there are none (a corpus model, an upload, an older checkpoint)."""
    held_out = metadata.get("held_out") if isinstance(metadata, dict) else None
    rows = held_out.get("per_format") if isinstance(held_out, dict) else None
    if not isinstance(rows, list):
        return []
    table = []
    for row in rows[:MAX_ROWS]:
        if not isinstance(row, dict) or not isinstance(row.get("format"), str):
            continue
        exact, count = row.get("exact_match"), row.get("num_examples")
        if not (_number(exact) and 0 <= exact <= 1 and _number(count) and count >= 0
                and float(count).is_integer()):
            continue
        example = row.get("example") if isinstance(row.get("example"), str) else ""
        table.append({"format": row["format"][:MAX_CHARS], "example": example[:MAX_CHARS],
                      "exact match": float(exact), "examples": int(count)})
    return table


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)
