"""JSON from untrusted bytes, bounded: UTF-8, at most MAX_JSON_DEPTH deep, integers of at
most 20 digits, optionally no duplicate keys; every failure a CheckpointError."""

from __future__ import annotations

import json

from transformer.checkpoint.errors import CheckpointError
from transformer.core import limits
from transformer.core.text import quoted


class _LongNumber(Exception):
    pass


def _json_int(text: str) -> int:
    """JSON integers are read only up to 20 digits: no setting needs more, and Python refuses
    to convert over 4,300 (with a ValueError) only after the work."""
    if len(text.lstrip("-")) > 20:
        raise _LongNumber
    return int(text)


class _Duplicate(Exception):
    pass


def _unique_pairs(pairs):
    value = {}
    for key, item in pairs:
        if key in value:
            raise _Duplicate(key)
        value[key] = item
    return value


def bounded_json(raw, label: str, duplicates: bool = False):
    """UTF-8 JSON, at most MAX_JSON_DEPTH deep, integers of at most 20 digits; label names it in
    the sentences ("'config.json'"). duplicates: a key twice in one object is refused (the
    safetensors header: a weight twice)."""
    hook = {"object_pairs_hook": _unique_pairs} if duplicates else {}
    try:
        value = json.loads(bytes(raw).decode("utf-8"), parse_int=_json_int, **hook)
    except _LongNumber:
        raise CheckpointError(f"{label} in the checkpoint holds a number of more than 20 "
                              "digits, which no setting needs.") from None
    except _Duplicate as err:
        raise CheckpointError(f"{label} in the checkpoint holds the key "
                              f"{quoted(str(err.args[0]))} twice.") from None
    except (UnicodeDecodeError, ValueError, RecursionError):  # ValueError: JSONDecodeError
        raise CheckpointError(f"{label} in the checkpoint is not valid JSON.") from None
    if json_depth(value) > limits.MAX_JSON_DEPTH:
        raise CheckpointError(f"{label} in the checkpoint is nested more than "
                              f"{limits.MAX_JSON_DEPTH} levels deep; checkpoints never are.")
    return value


def json_depth(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if depth > limits.MAX_JSON_DEPTH:
                return depth
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
