"""Pegasus (Hugging Face's PegasusForConditionalGeneration: google/pegasus-xsum, pegasus-large,
pegasus-cnn_dailymail and the other summarisers) read as data and mapped onto our Transformer.

A Pegasus model is a folder (or a .zip of one, or its files uploaded together) holding

    config.json              PegasusConfig, read against an allow-list (ALLOWED_FIELDS)
    model.safetensors        the weights (no torch, no pickle)
    tokenizer.json, or       the SentencePiece vocabulary after Pegasus's 103 reserved ids
      spiece.model             (transformer.tokenizers.huggingface, family "pegasus")
    tokenizer_config.json    the tokenizer's options (optional)
    generation_config.json   how transformers decodes it (optional)

What makes Pegasus differ from the paper's model, and the config field that carries it:

    Marian's sinusoids: [sin | cos] of the paper's   positional="sinusoidal_concat"; the table
      frequencies, position p at row p (saved in the   transformers saves is checked against ours
      weights by transformers 5, computed by us)
    pre-LayerNorm, a final LayerNorm on each stack  norm_first=True (encoder_norm, decoder_norm)
    embeddings times sqrt(d_model)                  scale_embeddings (scale_embedding)
    relu (pegasus-*'s), LayerNorm epsilon 1e-5     activation, layer_norm_epsilon=1e-5
    one embedding for source, target and output    share_embeddings, tie_output
    final_logits_bias added to the logits          output_bias
    sources and targets are pieces then </s>       source_start=False, source_end=True
    the decoder starts with <pad> (id 0)            start_id = pad_id = 0, end_id = 1
"""

from __future__ import annotations

import numpy as np

from transformer.checkpoint.format import CheckpointData, CheckpointError
from transformer.core import limits
from transformer.importers.bart_layout import mapped_layers, take_output
from transformer.importers.hf_common import (
    REQUIRED_FILES,
    WEIGHT_FILE_BYTES,
    ModelFiles,
    build_config,
    check_tokenizers,
    checkpoint_data,
    read_folder,
    tokenizer_family,
    tokenizers,
)
from transformer.importers.hf_config import ConfigReader
from transformer.importers.hf_folder import FolderSpec
from transformer.importers.hf_weights import PICKLE_FILES
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.inference.session import Checkpoint
from transformer.model.layers import positional_encoding

__all__ = ["RECIPE", "REQUIRED_FILES", "convert_pegasus", "pegasus_config", "pegasus_data",
           "pegasus_weights", "read_pegasus"]

MODEL_TYPES = ("pegasus",)  # config.json's model_type
RECIPE = Recipe("pegasus", "Pegasus", "Pegasus", "Hugging Face's "
                "PegasusForConditionalGeneration (a google/pegasus-* model)", asks=False)
TOKENIZER_FILES = ("tokenizer.json", "spiece.model", "tokenizer_config.json")
FOLDER = FolderSpec({
    "config.json": limits.MAX_JSON_BYTES,
    "generation_config.json": limits.MAX_JSON_BYTES,
    **WEIGHT_FILE_BYTES,
    "tokenizer.json": limits.MAX_TOKENIZER_BYTES,
    "spiece.model": limits.MAX_TOKENIZER_BYTES,
    "tokenizer_config.json": limits.MAX_JSON_BYTES,
}, PICKLE_FILES, "the Pegasus model")
FOLDER_FILES = tuple(FOLDER.file_bytes)  # the names read of a folder
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; PegasusConfig has no field for it
SINUSOID_TOLERANCE = 1e-5  # a saved position table further from ours is not Pegasus's sinusoids
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "silu", "swish": "swish",
               "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
ALLOWED_FIELDS = {
    "vocab_size": None, "d_model": None, "hidden_size": None, "encoder_layers": None,
    "decoder_layers": None, "num_hidden_layers": None, "encoder_attention_heads": None,
    "decoder_attention_heads": None, "num_attention_heads": None, "encoder_ffn_dim": None,
    "decoder_ffn_dim": None, "activation_function": None, "max_position_embeddings": None,
    "scale_embedding": None, "pad_token_id": None, "eos_token_id": None,
    "decoder_start_token_id": None, "tie_word_embeddings": None,
    "is_encoder_decoder": (True,), "is_decoder": (False,),
    # Fields of the older configs (google/pegasus-xsum's has them): only Pegasus's values.
    "normalize_before": (True,), "normalize_embedding": (False,),
    "add_final_layer_norm": (True,), "add_bias_logits": (False,),
    "static_position_embeddings": (True,),
}
_FIELD_MEANINGS = {
    "normalize_before": "post-LayerNorm blocks (BART's); Pegasus normalizes before each block",
    "normalize_embedding": "a LayerNorm on the embeddings, which Pegasus does not have",
    "add_final_layer_norm": "no LayerNorm after the last layer, which Pegasus has",
    "add_bias_logits": "a bias inside the output projection",
    "static_position_embeddings": "learned positions; Pegasus's are sinusoids",
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}


def pegasus_config(hf_config: dict, label: str = "the Pegasus model") -> dict:
    """TransformerConfig fields for a PegasusConfig (config.json as parsed)."""
    read = ConfigReader(hf_config, f"config.json in {label}", "Pegasus", MODEL_TYPES,
                        ("PegasusForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
    vocab = read.integer("vocab_size", high=limits.MAX_VOCAB)
    max_len = read.integer("max_position_embeddings", 1024, high=limits.MAX_POSITIONS)
    pad_id = read.token_id("pad_token_id", 0, vocab)
    end_id = read.token_id("eos_token_id", 1, vocab)
    start_id = read.token_id("decoder_start_token_id", 0, vocab)
    if end_id == pad_id:
        raise CheckpointError(f"config.json in {label} gives the same id {end_id} for "
                              "eos_token_id and pad_token_id; the end of an output could not be "
                              "told apart.")
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, **read.sizes(), dropout_rate=0.1,
        max_len=max_len, positional="sinusoidal_concat", embedding_norm=False,
        scale_embeddings=read.boolean("scale_embedding", False), share_embeddings=True,
        tie_output=read.boolean("tie_word_embeddings", True), output_bias=True, norm_first=True,
        pad_id=pad_id, start_id=start_id, end_id=end_id,
        activation=read.choice("activation_function", "gelu", ACTIVATIONS),
        layer_norm_epsilon=LAYER_NORM_EPSILON, mask_padding=True, source_start=False,
        source_end=True, target_start=False)


def pegasus_weights(hf_weights: dict[str, np.ndarray], config: dict,
                    label: str = "the Pegasus model") -> dict[str, np.ndarray]:
    """Our weights from PegasusForConditionalGeneration's: every weight there with its shape,
    and none left over. The sinusoid tables transformers saves (embed_positions.weight, at least
    max_position_embeddings rows) are checked to be Pegasus's sinusoids, which the model
    computes."""
    weights = WeightMap(hf_weights, f"model.safetensors in {label}", "config.json describes")
    d, max_len = config["d_model"], config["max_len"]
    ours, embedding = mapped_layers(weights, config)
    expected = None
    for stack in ("encoder", "decoder"):
        name = f"model.{stack}.embed_positions.weight"
        if name not in weights:
            continue  # computed by transformers too; older saves leave it out
        table = weights.take(name, (None, d), f"the {stack}'s sinusoids")
        if len(table) < max_len:
            raise CheckpointError(
                f"The weight {name!r} in {weights.where} holds {len(table)} positions, but "
                f"config.json gives max_position_embeddings {max_len}.")
        if expected is None or len(expected) != len(table):
            expected = positional_encoding(len(table), d, layout="concat")
        worst = float(np.max(np.abs(table - expected))) if table.size else 0.0
        if not worst <= SINUSOID_TOLERANCE:
            raise CheckpointError(
                f"The weight {name!r} in {weights.where} is not Pegasus's sinusoids (it differs "
                f"from them by up to {worst:.3g}); positions that were trained are not read "
                "here.")
    ours.update(take_output(weights, config["tie_output"], embedding))
    weights.check_all_used(f"a PegasusForConditionalGeneration with this config.json "
                           f"({config['num_encoder_layers']} + {config['num_decoder_layers']} "
                           "layers)")
    return ours


def read_pegasus(source, budgets: limits.Budgets = limits.UPLOAD
                 ) -> tuple[ModelFiles, dict]:
    """A Pegasus model's files, read and checked, and its config mapped (pegasus_config)."""
    files = read_folder(
        source, FOLDER, TOKENIZER_FILES, (("tokenizer.json",), ("spiece.model",)), "Pegasus", budgets=budgets)
    config = pegasus_config(files.hf_config, files.label)
    files.read_weights(config)
    return files, config


def pegasus_data(source, *, name: str | None = None,
                 command: str | None = None, budgets: limits.Budgets = limits.UPLOAD) -> CheckpointData:
    """A Pegasus model's files mapped onto our config, weights and tokenizers (nothing built)."""
    files, c = read_pegasus(source, budgets)
    family = tokenizer_family(files.tokenizer_files, ("pegasus",), "pegasus", files.label,
                              "Pegasus")
    source_tok, target_tok = tokenizers(files.tokenizer_files, family, files.label)
    check_tokenizers(source_tok, target_tok, c, files.label)
    config = build_config(c, files.label)
    weights = pegasus_weights(files.weights, c, files.label)
    files.weights = {}
    return checkpoint_data(files, config, weights, source_tok, target_tok, recipe="pegasus",
                           architecture="PegasusForConditionalGeneration",
                           default_name="Pegasus model", name=name, command=command)


def convert_pegasus(source, *, name: str | None = None, command: str | None = None,
                    budgets: limits.Budgets = limits.UPLOAD) -> Checkpoint:
    """A Pegasus model (folder path, .zip path or bytes, or {file name: bytes}) -> an opened
    Checkpoint, checked as any checkpoint is."""
    data = pegasus_data(source, name=name, command=command,
                        budgets=budgets)
    return Checkpoint.open(data, f"the weights mapped from {data.metadata['source']['from']}")


convert = convert_pegasus  # the registry's names for them (transformer.importers.HF_FAMILIES)
data = pegasus_data
