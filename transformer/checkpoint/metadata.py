"""The schema of a checkpoint's metadata.json: what the app reads from it, type-checked.

Metadata is description, never needed to run the model, so nothing in it refuses a checkpoint
(except not being a JSON object at all): a known field of the wrong type or range is dropped,
text that cannot be encoded is repaired, and each change is one sentence in the warnings list
that the Model page shows. Unknown fields are kept as plain data (strings, numbers, lists and
objects; they are shown, never resolved or run).

Known fields (written by transformer.training.fit, the converters, or both):
    name, task, corpus, corpus_report, command, strategy     text
    seed, epochs, epoch, steps, train_examples,               whole numbers >= 0
        held_out_examples, warmup_steps, batch_size
    label_smoothing, lr_scale, train_seconds                  finite numbers >= 0
    examples                                                  list of short texts (the sidebar's)
    held_out                                                  {"exact_match", "token_accuracy":
                                                               fractions in [0, 1]; "num_examples"}
    history                                                   {metric: list of numbers} (curves)
    epoch_metrics                                             {metric: number}
    source, recipe                                            provenance of a converted model:
                                                               text or an object
"""

from __future__ import annotations

import math
from typing import Any

from transformer.core import limits

TEXT_FIELDS = ("name", "task", "corpus", "corpus_report", "command", "strategy")
COUNT_FIELDS = ("seed", "epochs", "epoch", "steps", "train_examples", "held_out_examples",
                "warmup_steps", "batch_size")
NUMBER_FIELDS = ("label_smoothing", "lr_scale", "train_seconds")
FRACTIONS = ("exact_match", "token_accuracy")
PROVENANCE_FIELDS = ("source", "recipe")
MAX_SEED = 2**63 - 1  # NumPy's generators take any int >= 0; the pages pass the seed to them
MAX_WARNINGS = 20


class _Drop(Exception):
    """A field's value is unusable: the message says why (after "it ...")."""


def clean_text(text: str) -> tuple[str, bool]:
    """(text with every lone surrogate replaced by U+FFFD, whether any was)."""
    try:
        text.encode("utf-8")
        return text, False
    except UnicodeEncodeError:
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed.encode("utf-8", "replace").decode("utf-8"), True


def clean_value(value: Any, notes: set) -> Any:
    """A JSON value with its text repaired and non-finite numbers made null; notes collects what
    was done ("text", "number", "long"). Depth is bounded by the JSON reader (MAX_JSON_DEPTH)."""
    if isinstance(value, str):
        fixed, changed = clean_text(value)
        if changed:
            notes.add("text")
        if len(fixed) > limits.MAX_METADATA_STRING:
            notes.add("long")
            fixed = fixed[:limits.MAX_METADATA_STRING]
        return fixed
    if isinstance(value, float) and not math.isfinite(value):
        notes.add("number")
        return None
    if isinstance(value, list):
        if len(value) > limits.MAX_METADATA_LIST:
            notes.add("long")
            value = value[:limits.MAX_METADATA_LIST]
        return [clean_value(v, notes) for v in value]
    if isinstance(value, dict):
        return {clean_value(k, notes): clean_value(v, notes) for k, v in value.items()}
    return value  # int, bool, None, finite float


def clean_metadata(metadata: dict) -> tuple[dict, list[str]]:
    """(the metadata with every known field checked, warnings: one sentence per change)."""
    cleaned: dict = {}
    warnings: list[str] = []
    for raw_key, raw_value in metadata.items():
        notes: set = set()
        key = clean_value(raw_key, notes)
        value = clean_value(raw_value, notes)
        shown = _short(key)
        try:
            value = _check_field(key, value)
        except _Drop as why:
            warnings.append(f"Metadata field {shown} was dropped: it {why}.")
            continue
        if "text" in notes:
            warnings.append(f"Metadata field {shown} held text that cannot be encoded (lone "
                            "surrogates); those characters were replaced by \ufffd.")
        if "number" in notes:
            warnings.append(f"Metadata field {shown} held NaN or infinite numbers; they are shown "
                            "as empty (null).")
        if "long" in notes:
            warnings.append(f"Metadata field {shown} was cut to {limits.MAX_METADATA_LIST:,} "
                            f"entries or {limits.MAX_METADATA_STRING:,} characters.")
        cleaned[key] = value
    if len(warnings) > MAX_WARNINGS:
        warnings = warnings[:MAX_WARNINGS] + [
            f"... and {len(warnings) - MAX_WARNINGS} more metadata warnings."]
    return cleaned, warnings


def _short(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:57] + "...")


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _check_field(key: str, value: Any) -> Any:
    """The value to keep for a top-level field, or _Drop."""
    if key in TEXT_FIELDS:
        if not isinstance(value, str):
            raise _Drop(f"must be text, not {_describe(value)}")
    elif key in COUNT_FIELDS:
        if not _is_count(value) or (key == "batch_size" and value == 0):
            raise _Drop(f"must be a whole number >= {1 if key == 'batch_size' else 0}, not "
                        f"{_describe(value)}")
    elif key in NUMBER_FIELDS:
        if not _is_number(value) or value < 0:
            raise _Drop(f"must be a number >= 0, not {_describe(value)}")
    elif key == "examples":
        return _examples(value)
    elif key == "held_out":
        return _held_out(value)
    elif key == "history":
        return _history(value)
    elif key == "epoch_metrics":
        if not isinstance(value, dict) or not all(_is_number(v) for v in value.values()):
            raise _Drop(f"must map metric names to numbers, not {_describe(value)}")
    elif key in PROVENANCE_FIELDS and not isinstance(value, (str, dict)):
        raise _Drop(f"must be text or an object, not {_describe(value)}")
    return value


def _examples(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise _Drop(f"must be a list of texts, not {_describe(value)}")
    if len(value) > limits.MAX_EXAMPLES or any(len(x) > limits.MAX_EXAMPLE_CHARS for x in value):
        raise _Drop(f"must hold at most {limits.MAX_EXAMPLES} texts of at most "
                    f"{limits.MAX_EXAMPLE_CHARS:,} characters each")
    return value


def _held_out(value: Any) -> dict:
    if not isinstance(value, dict):
        raise _Drop(f"must be an object of held-out scores, not {_describe(value)}")
    for key in FRACTIONS:
        if key in value and not (_is_number(value[key]) and 0 <= value[key] <= 1):
            raise _Drop(f"must give {key} as a fraction in [0, 1], not {_describe(value[key])}")
    if "num_examples" in value and not _is_count(value["num_examples"]):
        raise _Drop(f"must give num_examples as a whole number >= 0, not "
                    f"{_describe(value['num_examples'])}")
    return value


def _history(value: Any) -> dict:
    """Curves: {metric: list of numbers}; a NaN loss (diverged training) is a null (a gap)."""
    if not isinstance(value, dict):
        raise _Drop(f"must map metric names to lists of numbers, not {_describe(value)}")
    for name, curve in value.items():
        if not isinstance(curve, list) or not all(
                v is None or _is_number(v) for v in curve):
            raise _Drop(f"must map metric names to lists of numbers ({_short(name)} is "
                        f"{_describe(curve)})")
    return value
