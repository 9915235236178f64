"""BART (Hugging Face's BartForConditionalGeneration: facebook/bart-base, bart-large, the
summarisers fine-tuned from them) read as data and mapped onto our Transformer.

A BART model is a folder (or a .zip of one, or its files uploaded together) holding

    config.json              BartConfig, read against an allow-list (ALLOWED_FIELDS)
    model.safetensors        the weights (no torch, no pickle; shards, tf_model.h5 and every
                             stored precision: transformer.importers.hf.weight_files)
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

from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.fairseq import (
    fairseq_config,
    older_fields,
    take_layers,
    take_norm,
    take_output,
    take_shared_embedding,
)
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model import weights as names

__all__ = ["FAMILY", "bart_config", "bart_weights"]

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: row = position + 2
# config.json fields read; those of the older configs only with BART's values
ALLOWED_FIELDS, _FIELD_MEANINGS = older_fields(
    "BART", norm_first=False, embedding_norm=True, final_norm=False,
    static_positions=False)


def bart_config(hf_config: dict, label: str = "the BART model") -> dict:
    """TransformerConfig fields for a BartConfig (config.json as parsed)."""
    read = ConfigReader(hf_config, f"config.json in {label}", "BART", ("bart",),
                        # facebook/bart-large's config names BartModel: its file holds the
                        # same weights, the output tied to the embedding (transformers' Auto
                        # class reads it so)
                        ("BartForConditionalGeneration", "BartModel"), ALLOWED_FIELDS,
                        _FIELD_MEANINGS)
    return fairseq_config(
        read, label, pad_id=1, end_id=2, start_id=2, activation="gelu", scale_embeddings=False,
        positional="learned", embedding_norm=True, output_bias=True, norm_first=False,
        source_start=True, source_end=True, target_start=True)


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


FAMILY = Family(
    Recipe("bart", "BART", "BART", "Hugging Face's BartForConditionalGeneration (a "
           "facebook/bart-* model)", asks=False),
    model_types=("bart",), architecture="BartForConditionalGeneration",
    tokenizer_files=("tokenizer.json", "vocab.json", "merges.txt"),  # tokenizer.json, or the pair
    tokenizer_sets=(("tokenizer.json",), ("vocab.json", "merges.txt")),
    tokenizer_families=("bart",), config=bart_config, weights=bart_weights,
    position_offset=POSITION_OFFSET)
