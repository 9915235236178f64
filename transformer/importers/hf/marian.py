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

import json
import math

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.core import limits
from transformer.importers.hf.config_reader import IGNORED_FIELDS
from transformer.importers.hf.fairseq import take_layers, take_output, take_shared_embedding
from transformer.importers.hf.family import REQUIRED_FILES as WEIGHTS_AND_CONFIG
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model import weights as names

__all__ = ["FAMILY", "marian_config", "marian_weights", "marian_tokenizers", "REQUIRED_FILES",
           "ALLOWED_FIELDS"]

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
REQUIRED_FILES = WEIGHTS_AND_CONFIG + TOKENIZER_FILES
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; MarianConfig has no field for it
POSITION_TOLERANCE = 1e-4  # saved embed_positions must be Marian's sinusoids to this

ACTIVATIONS = {"swish": "swish", "silu": "silu", "gelu": "gelu", "relu": "relu"}
# MarianConfig fields (and the generic PretrainedConfig ones a saved config.json holds) that the
# converter reads, or that must have one value for the math to be Marian's: field -> the values
# allowed (None: any value of the right type, read below).
ALLOWED_FIELDS = {
    "model_type": ("marian",),
    "architectures": (["MarianMTModel"],),
    "vocab_size": None, "decoder_vocab_size": None, "d_model": None, "hidden_size": None,
    "encoder_layers": None, "decoder_layers": None, "num_hidden_layers": None,
    "encoder_attention_heads": None, "decoder_attention_heads": None, "num_attention_heads": None,
    "encoder_ffn_dim": None, "decoder_ffn_dim": None, "activation_function": None,
    "max_position_embeddings": None, "scale_embedding": None,
    "pad_token_id": None, "eos_token_id": None, "decoder_start_token_id": None, "dropout": None,
    "share_encoder_decoder_embeddings": (True,),
    "tie_word_embeddings": None,
    "is_encoder_decoder": (True,),
    "is_decoder": (False,),
    # Fields of the BART-era configs (every opus-mt config.json has them): only Marian's values.
    "static_position_embeddings": (True,),
    "normalize_before": (False,),
    "normalize_embedding": (False,),
    "add_final_layer_norm": (False,),
    "add_bias_logits": (False,),
}
_FIELD_MEANINGS = {
    "normalize_before": "pre-LayerNorm blocks (mBART style); Marian normalizes after each block",
    "normalize_embedding": "a LayerNorm on the embeddings, which Marian does not have",
    "add_final_layer_norm": "a LayerNorm after the last layer, which Marian does not have",
    "add_bias_logits": "a bias inside the output projection (BART style)",
    "static_position_embeddings": "learned positions; Marian's are fixed sinusoids",
    "share_encoder_decoder_embeddings": "separate source and target embeddings (two "
                                        "vocabularies), which this converter does not read",
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}


# ============================================================================ config.json
def marian_config(hf_config: dict, label: str = "the Marian model") -> dict:
    """TransformerConfig fields for a MarianConfig (config.json as parsed). Refuses every other
    architecture and every field value that would change the math and that we do not implement,
    naming it."""
    where = f"config.json in {label}"
    model_type = hf_config.get("model_type")
    architectures = hf_config.get("architectures")
    if model_type != "marian":
        found = f"model_type {model_type!r}" if model_type is not None else "no model_type"
        if architectures:
            found += f" (architectures {architectures!r})"
        raise CheckpointError(
            f"{where} describes {found}; only Marian translation models (model_type 'marian', "
            "MarianMTModel, the opus-mt models) are read here.")
    if architectures is not None and architectures != ["MarianMTModel"]:
        raise CheckpointError(
            f"{where} describes architectures {architectures!r}; only MarianMTModel (the "
            "translation model with its output layer) is read here.")
    for key, value in hf_config.items():
        if key in IGNORED_FIELDS and key not in ALLOWED_FIELDS:
            continue
        if key not in ALLOWED_FIELDS:
            raise CheckpointError(
                f"{where} has the field {key!r}, which this converter does not know; it cannot "
                "promise to compute what transformers computes for it, so the model is refused.")
        allowed = ALLOWED_FIELDS[key]
        if allowed is not None and value not in allowed:
            meaning = _FIELD_MEANINGS.get(key, "something this converter does not implement")
            raise CheckpointError(f"{where} sets {key} to {json.dumps(value)[:80]}: {meaning}.")

    def integer(key, default=None, low=1):
        value = hf_config.get(key, default)
        if value is None:
            raise CheckpointError(f"{where} does not give {key}.")
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # eos_token_id may be a one-element list
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise CheckpointError(f"{where} gives {key} as {json.dumps(value)[:80]}; it must be "
                                  f"a whole number of at least {low}.")
        return value

    def same(first, second, *aliases):
        value = integer(first)
        for other in (second,) + aliases:
            if other in hf_config and integer(other) != value:
                raise CheckpointError(
                    f"{where} gives {first} {value} but {other} {hf_config[other]}; this model "
                    f"has one value for both ({_MEANING_OF_PAIR.get(first, first)}).")
        return value

    vocab_size = integer("vocab_size")
    if hf_config.get("decoder_vocab_size") is not None and \
            integer("decoder_vocab_size") != vocab_size:
        raise CheckpointError(
            f"{where} gives decoder_vocab_size {hf_config['decoder_vocab_size']} but vocab_size "
            f"{vocab_size}: separate source and target vocabularies are not read here.")
    d_model = same("d_model", "hidden_size")
    heads = same("encoder_attention_heads", "decoder_attention_heads", "num_attention_heads")
    dff = same("encoder_ffn_dim", "decoder_ffn_dim")
    encoder_layers = same("encoder_layers", "num_hidden_layers")
    decoder_layers = integer("decoder_layers")
    if d_model % heads:
        raise CheckpointError(f"{where} gives d_model {d_model} and {heads} heads; Marian's "
                              "heads split d_model evenly.")
    for name, value in (("encoder_layers", encoder_layers), ("decoder_layers", decoder_layers)):
        if value > limits.NAMED_MAX_LAYERS:  # who gave it may allow fewer (check_config)
            raise CheckpointError(f"{where} gives {name} {value}; the limit is "
                                  f"{limits.NAMED_MAX_LAYERS}.")
    if heads > limits.MAX_HEADS:
        raise CheckpointError(f"{where} gives {heads} heads; the limit is {limits.MAX_HEADS}.")
    # Widths and the vocabulary need no limit here: the weights must have exactly these shapes,
    # and model.safetensors is bounded in bytes.
    max_len = integer("max_position_embeddings", 1024)  # MarianConfig's default
    if max_len > limits.MAX_POSITIONS:
        raise CheckpointError(f"{where} gives max_position_embeddings {max_len}; the limit is "
                              f"{limits.MAX_POSITIONS}.")
    activation = hf_config.get("activation_function", "gelu")  # MarianConfig's default
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise CheckpointError(
            f"{where} gives activation_function {json.dumps(activation)[:80]}; only "
            f"{_join(list(ACTIVATIONS))} (gelu: the exact erf form) are implemented here.")
    scale = hf_config.get("scale_embedding", False)  # MarianConfig's default
    tie = hf_config.get("tie_word_embeddings", True)
    for name, value in (("scale_embedding", scale), ("tie_word_embeddings", tie)):
        if not isinstance(value, bool):
            raise CheckpointError(f"{where} gives {name} as {json.dumps(value)[:80]}; it must "
                                  "be true or false.")
    pad_id = integer("pad_token_id", 58100, low=0)  # MarianConfig's defaults
    eos_id = integer("eos_token_id", 0, low=0)
    start_id = integer("decoder_start_token_id", 58100, low=0)
    for name, value in (("pad_token_id", pad_id), ("eos_token_id", eos_id),
                        ("decoder_start_token_id", start_id)):
        if value >= vocab_size:
            raise CheckpointError(f"{where} gives {name} {value}, outside the vocabulary of "
                                  f"{vocab_size}.")
    if start_id != pad_id:
        raise CheckpointError(
            f"{where} gives decoder_start_token_id {start_id} but pad_token_id {pad_id}; Marian "
            "models start decoding with the pad id, and this converter reads only those.")
    if eos_id == pad_id:
        raise CheckpointError(f"{where} gives the same id {eos_id} for eos_token_id and "
                              "pad_token_id; the end of a translation could not be told apart.")
    dropout = hf_config.get("dropout", 0.1)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
            not 0 <= dropout < 1:
        dropout = 0.1  # training only: off at inference, so any valid value does
    return dict(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=d_model, num_heads=heads,
        dff=dff, num_encoder_layers=encoder_layers, num_decoder_layers=decoder_layers,
        dropout_rate=float(dropout), max_len=max_len, positional="sinusoidal_concat",
        scale_embeddings=scale, share_embeddings=True, tie_output=tie, output_bias=True,
        norm_first=False, pad_id=pad_id, start_id=start_id, end_id=eos_id,
        activation=ACTIVATIONS[activation], layer_norm_epsilon=LAYER_NORM_EPSILON,
        mask_padding=True, pad_source_to=0, source_start=False, source_end=True)


_MEANING_OF_PAIR = {
    "d_model": "the width of the model",
    "encoder_attention_heads": "heads in the encoder and the decoder",
    "encoder_ffn_dim": "the feed-forward width of the encoder and the decoder",
    "encoder_layers": "num_hidden_layers is another name for encoder_layers",
}


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
