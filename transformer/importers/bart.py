"""BART (Hugging Face's BartForConditionalGeneration: facebook/bart-base, bart-large, the
summarisers fine-tuned from them) read as data and mapped onto our Transformer.

A BART model is a folder (or a .zip of one, or its files uploaded together) holding

    config.json              BartConfig, read against an allow-list (ALLOWED_FIELDS)
    model.safetensors        the weights (no torch, no pickle)
    tokenizer.json, or       the byte-level BPE (transformer.tokenizers.huggingface, family
      vocab.json + merges.txt  "bart")
    generation_config.json   how transformers decodes it (optional; read by the generation
                             settings, transformer.inference.search_transformers)

What makes BART differ from the paper's model, and the config field that carries it:

    learned positions, row = position + 2          positional="learned" (rows 2.. taken)
    a LayerNorm on the embedded input of each stack embedding_norm=True (layernorm_embedding)
    post-LayerNorm, no final LayerNorm             norm_first=False
    gelu (exact), LayerNorm epsilon 1e-5           activation="gelu", layer_norm_epsilon=1e-5
    one embedding for source, target and output    share_embeddings, tie_output
    final_logits_bias added to the logits          output_bias
    sources and targets are <s> pieces </s>        source_start, source_end, target_start
    the decoder starts with </s> (id 2)            start_id = end_id = 2, pad_id = 1
"""

from __future__ import annotations

import numpy as np

from transformer.checkpoint.format import CheckpointData, CheckpointError
from transformer.core import limits
from transformer.importers.bart_layout import (
    take_layers,
    take_norm,
    take_output,
    take_shared_embedding,
)
from transformer.importers.hf_common import (
    REQUIRED_FILES,
    WEIGHT_FILE_BYTES,
    ModelFiles,
    build_config,
    check_tokenizers,
    checkpoint_data,
    read_folder,
    tokenizers,
)
from transformer.importers.hf_config import ConfigReader
from transformer.importers.hf_folder import FolderSpec
from transformer.importers.hf_weights import PICKLE_FILES
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.inference.session import Checkpoint
from transformer.model import weights as names

__all__ = ["RECIPE", "REQUIRED_FILES", "bart_config", "bart_data", "bart_weights", "convert_bart",
           "read_bart"]

MODEL_TYPES = ("bart",)  # config.json's model_type
RECIPE = Recipe("bart", "BART", "BART", "Hugging Face's BartForConditionalGeneration (a "
                "facebook/bart-* model)", asks=False)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt")  # tokenizer.json, or the pair
FOLDER = FolderSpec({
    "config.json": limits.MAX_JSON_BYTES,
    "generation_config.json": limits.MAX_JSON_BYTES,
    **WEIGHT_FILE_BYTES,
    "tokenizer.json": limits.MAX_TOKENIZER_BYTES,
    "vocab.json": limits.MAX_TOKENIZER_BYTES,
    "merges.txt": limits.MAX_TOKENIZER_BYTES,
}, PICKLE_FILES, "the BART model")
FOLDER_FILES = tuple(FOLDER.file_bytes)  # the names read of a folder
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; BartConfig has no field for it
POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: row = position + 2
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "swish",
               "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
ALLOWED_FIELDS = {
    "vocab_size": None, "d_model": None, "hidden_size": None, "encoder_layers": None,
    "decoder_layers": None, "num_hidden_layers": None, "encoder_attention_heads": None,
    "decoder_attention_heads": None, "num_attention_heads": None, "encoder_ffn_dim": None,
    "decoder_ffn_dim": None, "activation_function": None, "max_position_embeddings": None,
    "scale_embedding": None, "pad_token_id": None, "eos_token_id": None,
    "decoder_start_token_id": None, "tie_word_embeddings": None,
    "is_encoder_decoder": (True,), "is_decoder": (False,),
    # Fields of the older configs (facebook/bart-large's has them): only BART's values.
    "normalize_before": (False,), "normalize_embedding": (True,),
    "add_final_layer_norm": (False,), "add_bias_logits": (False,),
    "static_position_embeddings": (False,),
}
_FIELD_MEANINGS = {
    "normalize_before": "pre-LayerNorm blocks (mBART's); BART normalizes after each block",
    "normalize_embedding": "no LayerNorm on the embeddings, which BART has",
    "add_final_layer_norm": "a LayerNorm after the last layer (mBART's), which BART does not have",
    "add_bias_logits": "a bias inside the output projection",
    "static_position_embeddings": "sinusoidal positions; BART's are learned",
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}


def read_bart(source, budgets: limits.Budgets = limits.UPLOAD
              ) -> tuple[ModelFiles, dict]:
    """A BART model's files, read and checked, and its config mapped (bart_config); sentences
    name every missing or malformed file."""
    files = read_folder(
        source, FOLDER, TOKENIZER_FILES, (("tokenizer.json",), ("vocab.json", "merges.txt")),
        "BART", budgets=budgets)
    config = bart_config(files.hf_config, files.label)
    files.read_weights(config)
    return files, config


def bart_config(hf_config: dict, label: str = "the BART model") -> dict:
    """TransformerConfig fields for a BartConfig (config.json as parsed)."""
    read = ConfigReader(hf_config, f"config.json in {label}", "BART", ("bart",),
                        # facebook/bart-large's config names BartModel: its file holds the
                        # same weights, the output tied to the embedding (transformers' Auto
                        # class reads it so)
                        ("BartForConditionalGeneration", "BartModel"), ALLOWED_FIELDS,
                        _FIELD_MEANINGS)
    vocab = read.integer("vocab_size", high=limits.MAX_VOCAB)
    max_len = read.integer("max_position_embeddings", 1024, high=limits.MAX_POSITIONS)
    pad_id = read.token_id("pad_token_id", 1, vocab)
    end_id = read.token_id("eos_token_id", 2, vocab)
    start_id = read.token_id("decoder_start_token_id", 2, vocab)
    if end_id == pad_id:
        raise CheckpointError(f"config.json in {label} gives the same id {end_id} for "
                              "eos_token_id and pad_token_id; the end of an output could not be "
                              "told apart.")
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, **read.sizes(), dropout_rate=0.1,
        max_len=max_len, positional="learned", embedding_norm=True,
        scale_embeddings=read.boolean("scale_embedding", False), share_embeddings=True,
        tie_output=read.boolean("tie_word_embeddings", True), output_bias=True, norm_first=False,
        pad_id=pad_id, start_id=start_id, end_id=end_id,
        activation=read.choice("activation_function", "gelu", ACTIVATIONS),
        layer_norm_epsilon=LAYER_NORM_EPSILON, mask_padding=True, source_start=True,
        source_end=True, target_start=True)


def bart_weights(hf_weights: dict[str, np.ndarray], config: dict,
                 label: str = "the BART model") -> dict[str, np.ndarray]:
    """Our weights from BartForConditionalGeneration's: every weight there with its shape, and
    none left over."""
    weights = WeightMap(hf_weights, f"model.safetensors in {label}", "config.json describes")
    d, vocab, max_len = config["d_model"], config["src_vocab_size"], config["max_len"]
    ours = take_layers(weights, config)
    embedding = take_shared_embedding(weights, vocab, d)
    ours[names.token_embedding("source")] = embedding
    for side, stack in (("source", "encoder"), ("target", "decoder")):
        table = weights.take(f"model.{stack}.embed_positions.weight",
                             (max_len + POSITION_OFFSET, d), f"the {stack}'s learned positions")
        ours[names.position_embedding(side)] = table[POSITION_OFFSET:]  # rows 0, 1 never used
        ours.update(take_norm(weights, f"model.{stack}.layernorm_embedding",
                              names.embedding_norm(side), d, f"the {stack}'s embedding norm"))
    ours.update(take_output(weights, config["tie_output"], embedding))
    weights.check_all_used(f"a BartForConditionalGeneration with this config.json "
                           f"({config['num_encoder_layers']} + {config['num_decoder_layers']} "
                           "layers)")
    return ours


def bart_data(source, *, name: str | None = None, command: str | None = None,
              budgets: limits.Budgets = limits.UPLOAD) -> CheckpointData:
    """A BART model's files mapped onto our config, weights and tokenizers (nothing built): the
    byte-level BPE of tokenizer.json, or of vocab.json + merges.txt."""
    files, c = read_bart(source, budgets)
    source_tok, target_tok = tokenizers(files.tokenizer_files, "bart", files.label)
    check_tokenizers(source_tok, target_tok, c, files.label)
    config = build_config(c, files.label)
    weights = bart_weights(files.weights, c, files.label)
    files.weights = {}
    return checkpoint_data(files, config, weights, source_tok, target_tok, recipe="bart",
                           architecture="BartForConditionalGeneration", default_name="BART model",
                           name=name, command=command)


def convert_bart(source, *, name: str | None = None, command: str | None = None,
                 budgets: limits.Budgets = limits.UPLOAD) -> Checkpoint:
    """A BART model (folder path, .zip path or bytes, or {file name: bytes}) -> an opened
    Checkpoint, checked as any checkpoint is."""
    data = bart_data(source, name=name, command=command,
                     budgets=budgets)
    return Checkpoint.open(data, f"the weights mapped from {data.metadata['source']['from']}")


convert = convert_bart  # the registry's names for them (transformer.importers.HF_FAMILIES)
data = bart_data
