"""Attention Explorer's Transformer: the paper's encoder-decoder model, written to be looked into.

Imports TensorFlow, Keras and NumPy only (never Streamlit or Plotly), so it can be used on its own.
The names below are imported on first use, so that the TensorFlow-free modules
(transformer.core.kinds, transformer.analysis.flow, transformer.analysis.head_stats) can be imported without
TensorFlow.
"""

import os
from importlib import import_module

# TensorFlow's own (Eigen) CPU kernels, not oneDNN's: on a decode step's tiny matrices oneDNN's
# cost 50-70 us per call in setup, and the bundled model's translation took 24 ms instead of 15
# (bench/profile_decode.py prints the kernels and their time). TensorFlow reads this once, when
# it is imported, so it is set here, before any of this package imports it; an explicit
# TF_ENABLE_ONEDNN_OPTS=1 still wins.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

_EXPORTS = {  # name: the module that defines it
    "MultiHeadAttention": "model.attention", "scaled_dot_product_attention": "model.attention",
    "DEFAULT_CHECKPOINT": "inference.session", "OpenedModel": "inference.session",
    "Checkpoint": "inference.session",  # OpenedModel's name before issue 39
    "CheckpointError": "checkpoint.format", "load_checkpoint": "importers",
    "NumericalError": "inference.numerics",
    "save_checkpoint": "checkpoint.format",
    "TransformerConfig": "model.config",
    "BeamDecoding": "inference.decoded", "DecodeStep": "inference.decoded",
    "Decoding": "inference.decoded", "beam_search": "inference.search_ours",
    "AttentionMaps": "inference.outputs", "TokenContributions": "inference.outputs",
    "LayerPredictions": "inference.outputs", "ContextMixing": "inference.outputs",
    "greedy_decode": "inference.search_ours", "greedy_decode_batch": "inference.search_ours",
    "positional_encoding": "model.layers",
    "decoder_mask": "model.masks", "look_ahead_mask": "model.masks", "padding_mask": "model.masks",
    "ATTENTION_KINDS": "model.transformer", "Transformer": "model.transformer",
    "Tokenizer": "tokenizers.base", "TokenizerError": "tokenizers.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'transformer' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
