"""Marian translation models (Hugging Face's opus-mt, MarianMTModel) read as data and mapped onto
our Transformer.

A Marian model is a folder (or a .zip of one, or the same files uploaded together) holding

    config.json         MarianConfig: parsed against an allow-list (ALLOWED_FIELDS)
    model.safetensors   the weights, read with safetensors' NumPy API (no torch, no pickle)
    source.spm          SentencePiece model that splits the source text
    target.spm          SentencePiece model that splits the target text
    vocab.json          piece -> id for both sides ("</s>" 0, "<unk>" 1, ..., "<pad>" last)

plus, when given, generation_config.json (how transformers decodes it: OpenedModel.generation)
and tokenizer_config.json (its language names, for the metadata). Everything else in the folder
(README.md, pytorch_model.bin, tf_model.h5, ...) is never read.

What makes Marian differ from the paper's model, and the config field that carries it:

    feed-forward activation swish (SiLU)             activation="swish"
    LayerNorm epsilon 1e-5 (PyTorch's default)       layer_norm_epsilon=1e-5
    token embeddings times sqrt(d_model)             scale_embeddings (from scale_embedding)
    one embedding for source, target and output      share_embeddings, tie_output
    final_logits_bias added to the logits            output_bias (the weight "output_bias")
    static sinusoids, [sin | cos] (not interleaved)  positional="sinusoidal_concat"
    post-LayerNorm, no final LayerNorm               norm_first=False
    pad id = vocab_size - 1; the decoder starts      pad_id = start_id = pad_token_id,
      with the pad id; </s> is id 0                    end_id = eos_token_id
    the source is pieces then </s> (no start)        source_start=False, source_end=True
    positions up to max_position_embeddings          max_len

PyTorch's Linear stores (out, in); a Keras Dense kernel is (in, out): every projection is
transposed. Reading the folder, the checks and the provenance are the steps every family shares
(transformer.importers.hf.family); FAMILY.convert opens the mapped model with OpenedModel.open, so
a converted model is validated exactly as an upload is.
"""

from __future__ import annotations

import math

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.fairseq import (
    fairseq_config,
    older_fields,
    take_layers,
    take_output,
    take_shared_embedding,
)
from transformer.importers.hf.family import REQUIRED_FILES as WEIGHTS_AND_CONFIG
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model import weights as names

__all__ = ["FAMILY", "marian_config", "marian_weights", "marian_tokenizers", "REQUIRED_FILES",
           "ALLOWED_FIELDS"]

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
REQUIRED_FILES = WEIGHTS_AND_CONFIG + TOKENIZER_FILES
POSITION_TOLERANCE = 1e-4  # saved embed_positions must be Marian's sinusoids to this

ACTIVATIONS = {"swish": "swish", "silu": "silu", "gelu": "gelu", "relu": "relu"}
# MarianConfig fields (and the generic PretrainedConfig ones a saved config.json holds) that the
# converter reads, or that must have one value for the math to be Marian's: what every
# fairseq-born family reads, the BART-era fields every opus-mt config.json has (only Marian's
# values), and Marian's own.
ALLOWED_FIELDS, _FIELD_MEANINGS = older_fields(
    "Marian", norm_first=False, embedding_norm=False, final_norm=False, static_positions=True)
ALLOWED_FIELDS.update({"decoder_vocab_size": None, "dropout": None,
                       "share_encoder_decoder_embeddings": (True,)})
_FIELD_MEANINGS["share_encoder_decoder_embeddings"] = (
    "separate source and target embeddings (two vocabularies), which this converter does not "
    "read")


# ============================================================================ config.json
def marian_config(hf_config: dict, label: str = "the Marian model") -> dict:
    """TransformerConfig fields for a MarianConfig (config.json as parsed). Refuses every other
    architecture and every field value that would change the math and that we do not implement,
    naming it."""
    where = f"config.json in {label}"
    read = ConfigReader(hf_config, where, "Marian", ("marian",), ("MarianMTModel",),
                        ALLOWED_FIELDS, _FIELD_MEANINGS)
    config = fairseq_config(  # the defaults: MarianConfig's
        read, label, pad_id=58100, end_id=0, start_id=58100, activation="gelu",
        scale_embeddings=False, activations=ACTIVATIONS, positional="sinusoidal_concat",
        output_bias=True, norm_first=False, pad_source_to=0, source_start=False,
        source_end=True)
    vocab_size = config["src_vocab_size"]
    if hf_config.get("decoder_vocab_size") is not None and \
            read.integer("decoder_vocab_size") != vocab_size:
        raise CheckpointError(
            f"{where} gives decoder_vocab_size {hf_config['decoder_vocab_size']} but vocab_size "
            f"{vocab_size}: separate source and target vocabularies are not read here.")
    if config["start_id"] != config["pad_id"]:
        raise CheckpointError(
            f"{where} gives decoder_start_token_id {config['start_id']} but pad_token_id "
            f"{config['pad_id']}; Marian models start decoding with the pad id, and this "
            "converter reads only those.")
    dropout = hf_config.get("dropout", 0.1)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
            not 0 <= dropout < 1:
        dropout = 0.1  # training only: off at inference, so any valid value does
    return {**config, "dropout_rate": float(dropout)}


# ============================================================================ model.safetensors
# ============================================================================ weight mapping
def marian_weights(hf_weights: dict[str, np.ndarray], config: dict,
                   label: str = "the Marian model") -> dict[str, np.ndarray]:
    """Our weights (names as in a checkpoint's weights.npz) from MarianMTModel's safetensors
    weights. config: marian_config's fields. Every weight must be there with its shape; a weight
    we would not use is refused by name (it would mean the model is not what config.json says)."""
    where = f"model.safetensors in {label}"
    d, vocab = config["d_model"], config["src_vocab_size"]
    position_names = ("model.encoder.embed_positions.weight",
                      "model.decoder.embed_positions.weight")
    weights = WeightMap(hf_weights, where, "config.json describes")
    ours = take_layers(weights, config)
    embedding = take_shared_embedding(weights, vocab, d)
    ours[names.token_embedding("source")] = embedding
    ours.update(take_output(weights, config["tie_output"], embedding))
    _check_positions(weights, position_names, config, where)
    weights.check_all_used(
        f"a MarianMTModel with this config.json ({config['num_encoder_layers']} + "
        f"{config['num_decoder_layers']} layers)")
    return ours


def _check_positions(weights: WeightMap, names, config, where) -> None:
    """transformers does not save Marian's sinusoids, but older files hold them: if they are
    there, they must be the table our model computes (the [sin | cos] layout)."""
    from transformer.model.layers import positional_encoding

    expected = None
    for name in names:
        if name not in weights:
            continue
        value = weights.take(name)
        if value.ndim != 2 or value.shape[1] != config["d_model"] or \
                value.shape[0] < config["max_len"]:
            raise CheckpointError(
                f"The weight {name!r} in {where} has shape {tuple(value.shape)}; Marian's "
                f"positions are ({config['max_len']}, {config['d_model']}).")
        if expected is None:
            expected = positional_encoding(config["max_len"], config["d_model"], layout="concat")
        difference = float(np.max(np.abs(value[:config["max_len"]] - expected)))
        if not math.isfinite(difference) or difference > POSITION_TOLERANCE:
            raise CheckpointError(
                f"The weight {name!r} in {where} is not Marian's static sinusoidal positions "
                f"(it differs from them by up to {difference:.3g}); learned positions are not "
                "read here.")


# ============================================================================ tokenizers
def marian_tokenizers(source_spm: bytes, target_spm: bytes, vocab_json: bytes,
                      label: str = "the Marian model"):
    """(source, target) tokenizers: each side's SentencePiece model with vocab.json's ids."""
    from transformer.tokenizers.base import TokenizerError
    from transformer.tokenizers.marian_pieces import MarianTokenizer

    try:
        return (MarianTokenizer.from_files(source_spm, vocab_json, "source"),
                MarianTokenizer.from_files(target_spm, vocab_json, "target"))
    except TokenizerError as err:
        raise CheckpointError(f"A tokenizer file in {label} is invalid: {err}.") from None


def _join(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def tokenizers(files: dict[str, bytes], family: str, label: str):
    """(source, target): each side's SentencePiece model with vocab.json's ids."""
    return marian_tokenizers(files["source.spm"], files["target.spm"], files["vocab.json"], label)


FAMILY = Family(
    Recipe("marian", "Marian (opus-mt)", "Marian (opus-mt)",
           "Hugging Face's MarianMT (an opus-mt model)", asks=False),
    model_types=("marian",), architecture="MarianMTModel",
    # tokenizer_config.json: read for the language names only
    tokenizer_files=TOKENIZER_FILES + ("tokenizer_config.json",),
    tokenizer_sets=(TOKENIZER_FILES,), tokenizer_families=("marian",),
    config=marian_config, weights=marian_weights, what="Marian", required_files=REQUIRED_FILES,
    model_names={"marian": "Marian model"},
    make_tokenizers=tokenizers, refused_files={
        "target_vocab.json": "it has separate source and target vocabularies, which this "
                             "converter does not read (opus-mt models share one vocab.json)"})
