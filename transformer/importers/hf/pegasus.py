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

from transformer.checkpoint.format import CheckpointError
from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.fairseq import (
    ACTIVATIONS,
    fairseq_config,
    mapped_layers,
    older_fields,
    take_output,
)
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model.layers import positional_encoding

__all__ = ["FAMILY", "pegasus_config", "pegasus_weights"]

MODEL_TYPES = ("pegasus",)  # config.json's model_type
SINUSOID_TOLERANCE = 1e-5  # a saved position table further from ours is not Pegasus's sinusoids
ACTIVATIONS = {"relu": "relu", **ACTIVATIONS}  # relu first: its default, said first
# config.json fields read; those of the older configs only with Pegasus's values
ALLOWED_FIELDS, _FIELD_MEANINGS = older_fields(
    "Pegasus", norm_first=True, embedding_norm=False, final_norm=True,
    static_positions=True)


def pegasus_config(hf_config: dict, label: str = "the Pegasus model") -> dict:
    """TransformerConfig fields for a PegasusConfig (config.json as parsed)."""
    read = ConfigReader(hf_config, f"config.json in {label}", "Pegasus", MODEL_TYPES,
                        ("PegasusForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
    return fairseq_config(
        read, label, pad_id=0, end_id=1, start_id=0, activation="gelu", scale_embeddings=False,
        activations=ACTIVATIONS, positional="sinusoidal_concat", embedding_norm=False,
        output_bias=True, norm_first=True, source_start=False, source_end=True,
        target_start=False)


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


FAMILY = Family(
    Recipe("pegasus", "Pegasus", "Pegasus", "Hugging Face's PegasusForConditionalGeneration (a "
           "google/pegasus-* model)", asks=False),
    model_types=MODEL_TYPES, architecture="PegasusForConditionalGeneration",
    tokenizer_files=("tokenizer.json", "spiece.model", "tokenizer_config.json"),
    tokenizer_sets=(("tokenizer.json",), ("spiece.model",)),
    tokenizer_families=("pegasus",), config=pegasus_config, weights=pegasus_weights)
