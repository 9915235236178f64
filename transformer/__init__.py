"""Attention Explorer's Transformer: the paper's encoder-decoder model, written to be looked into.

Imports TensorFlow, Keras and NumPy only (never Streamlit or Plotly), so it can be used on its own.
"""

from .attention import MultiHeadAttention, scaled_dot_product_attention
from .checkpoint import (DEFAULT_CHECKPOINT, Checkpoint, CheckpointError, load_checkpoint,
                         save_checkpoint)
from .config import TransformerConfig
from .decoding import (BeamDecoding, DecodeStep, Decoding, beam_search, greedy_decode,
                       greedy_decode_batch)
from .layers import positional_encoding
from .masks import decoder_mask, look_ahead_mask, padding_mask
from .model import ATTENTION_KINDS, Transformer
from .tokenizer import Tokenizer, TokenizerError

__all__ = [
    "ATTENTION_KINDS",
    "BeamDecoding",
    "Checkpoint",
    "CheckpointError",
    "DEFAULT_CHECKPOINT",
    "DecodeStep",
    "Decoding",
    "Tokenizer",
    "TokenizerError",
    "beam_search",
    "greedy_decode",
    "greedy_decode_batch",
    "load_checkpoint",
    "save_checkpoint",
    "MultiHeadAttention",
    "Transformer",
    "TransformerConfig",
    "decoder_mask",
    "look_ahead_mask",
    "padding_mask",
    "positional_encoding",
    "scaled_dot_product_attention",
]
