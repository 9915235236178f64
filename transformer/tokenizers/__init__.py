"""Tokenizers: one interface (base.Tokenizer), one module per kind, and the registry that
rebuilds any kind from what a checkpoint stores (its spec and model bytes)."""

from __future__ import annotations

import importlib

from transformer.tokenizers.base import Tokenizer, TokenizerError, check_spec_fields

# kind -> (module in this package, class): imported only when a tokenizer of that kind is built.
KIND_CLASSES = {
    "bpemb": ("bpemb", "BPEmbTokenizer"),
    "trained": ("bpemb", "BPEmbTokenizer"),
    "word": ("word", "WordTokenizer"),
    "wordpiece": ("wordpiece", "WordPieceTokenizer"),
    "marian": ("marian_pieces", "MarianTokenizer"),
    "huggingface": ("huggingface", "HFTokenizer"),
    "m2m100": ("m2m100_pieces", "M2M100Tokenizer"),
}


def tokenizer_class(kind: str) -> type[Tokenizer]:
    """The class of a tokenizer kind (KIND_CLASSES), imported now."""
    module, name = KIND_CLASSES[kind]
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def tokenizer_from_spec(spec: dict, model_bytes: bytes) -> Tokenizer:
    """Rebuild a tokenizer of any kind from ``spec()`` and ``model_bytes``.

    Dispatches on ``spec["kind"]``; every kind validates its spec strictly (unknown or missing
    fields, wrong types, ids out of range are TokenizerErrors) and checks it against the model.
    """
    if not isinstance(spec, dict):
        raise TokenizerError(f"spec: expected dict, got {type(spec).__name__}")
    kind = spec.get("kind")
    if not isinstance(kind, str) or kind not in KIND_CLASSES:
        raise TokenizerError(f"kind: must be one of {tuple(KIND_CLASSES)}, got {kind!r}")
    klass = tokenizer_class(kind)
    name = klass.__name__
    if not issubclass(klass, Tokenizer):
        raise TokenizerError(f"kind: {kind!r} is a {name}, not a Tokenizer")
    if not isinstance(model_bytes, (bytes, bytearray, memoryview)):
        raise TokenizerError(f"model_bytes: expected bytes, got {type(model_bytes).__name__}")
    check_spec_fields(spec, klass.SPEC_FIELDS, klass.OPTIONAL_SPEC_FIELDS)
    return klass._from_valid_spec(spec, bytes(model_bytes))
