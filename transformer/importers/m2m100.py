"""M2M100 and NLLB-200 dense (Hugging Face's M2M100ForConditionalGeneration: facebook/m2m100_418M,
m2m100_1.2B, nllb-200-distilled-600M, nllb-200-1.3B, nllb-200-3.3B) read as data and mapped onto
our Transformer. NLLB-MoE (model_type "nllb-moe", mixture-of-experts layers) is refused.

A model is a folder (or a .zip of one, or its files uploaded together) holding

    config.json              M2M100Config (model_type "m2m_100"), read against an allow-list
    model.safetensors        the weights (no torch, no pickle)
    tokenizer.json           NLLB-200's tokenizer (transformer.tokenizers.huggingface, "nllb"), or
    vocab.json +             M2M100's: the SentencePiece model with vocab.json's ids and the
      sentencepiece.bpe.model  language tokens after them (transformer.tokenizers.m2m100_pieces)
    tokenizer_config.json    which tokenizer (tokenizer_class NllbTokenizer or M2M100Tokenizer),
                             the languages (src_lang, tgt_lang) and NLLB's legacy_behaviour;
                             optional: without it tokenizer.json is NLLB's, the pair M2M100's
    generation_config.json   how transformers decodes it (optional; its forced_bos_token_id is
                             the target language token)

What makes M2M100 differ from the paper's model, and the config field that carries it:

    fairseq's sinusoids ([sin | cos], frequencies    positional="sinusoidal_fairseq",
      10000^(-i / (d/2 - 1))), computed, not saved;    position_offset = pad_token_id + 1
      a token's position counts from pad_id + 1
    pre-LayerNorm, a final LayerNorm on each stack  norm_first=True (encoder_norm, decoder_norm)
    embeddings times sqrt(d_model)                  scale_embeddings (scale_embedding)
    relu, LayerNorm epsilon 1e-5                    activation, layer_norm_epsilon=1e-5
    one embedding for source, target and output,    share_embeddings, tie_output,
      no final_logits_bias                            output_bias=False
    source: src_lang pieces </s>; target: tgt_lang  source_start, source_end, target_start
      pieces </s> (NLLB legacy: pieces </s> lang)
    the decoder starts with </s> (id 2); the target start_id = end_id = 2 (decoder_start_token_id)
      language token is forced first by the
      generation config

transformers' positions skip padding tokens (a pad takes the zeroed row pad_id); the ids fed
here never hold padding, so a token's position is pad_id + 1 + its index.
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

__all__ = ["RECIPE", "REQUIRED_FILES", "convert_m2m100", "m2m100_config", "m2m100_data",
           "m2m100_weights", "read_m2m100"]

MODEL_TYPES = ("m2m_100", "nllb-moe")  # config.json's model_type; nllb-moe only to refuse it
REFUSED_MODEL_TYPES = ("nllb-moe",)  # routed here to be refused by name, never read
RECIPE = Recipe("m2m100", "M2M100 / NLLB-200", "M2M100 or NLLB-200", "Hugging Face's "
                "M2M100ForConditionalGeneration (a facebook/m2m100 or dense nllb-200 model)",
                asks=False)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "sentencepiece.bpe.model",
                   "tokenizer_config.json")
FOLDER = FolderSpec({
    "config.json": limits.MAX_JSON_BYTES,
    "generation_config.json": limits.MAX_JSON_BYTES,
    **WEIGHT_FILE_BYTES,
    "tokenizer.json": limits.MAX_TOKENIZER_BYTES,
    "vocab.json": limits.MAX_TOKENIZER_BYTES,
    "sentencepiece.bpe.model": limits.MAX_TOKENIZER_BYTES,
    "tokenizer_config.json": limits.MAX_JSON_BYTES,
}, PICKLE_FILES, "the M2M100 or NLLB model")
FOLDER_FILES = tuple(FOLDER.file_bytes)  # the names read of a folder
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; M2M100Config has no field for it
TOKENIZER_FAMILIES = ("nllb", "m2m100")  # NllbTokenizer (tokenizer.json), M2M100Tokenizer
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
}
_FIELD_MEANINGS = {
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}


def m2m100_config(hf_config: dict, label: str = "the M2M100 model") -> dict:
    """TransformerConfig fields for an M2M100Config (config.json as parsed); NLLB-MoE's
    NllbMoeConfig is refused in a sentence naming it."""
    if hf_config.get("model_type") == "nllb-moe":
        raise CheckpointError(
            f"config.json in {label} describes an NLLB-MoE model (model_type 'nllb-moe'): its "
            "mixture-of-experts layers (a router choosing experts per token) are not "
            "implemented here; the dense NLLB-200 models (facebook/nllb-200-distilled-600M, "
            "-1.3B, -3.3B) open.")
    read = ConfigReader(hf_config, f"config.json in {label}", "M2M100", ("m2m_100",),
                        ("M2M100ForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
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
        max_len=max_len, positional="sinusoidal_fairseq", position_offset=pad_id + 1,
        embedding_norm=False, scale_embeddings=read.boolean("scale_embedding", True),
        share_embeddings=True, tie_output=read.boolean("tie_word_embeddings", True),
        output_bias=False, norm_first=True, pad_id=pad_id, start_id=start_id, end_id=end_id,
        activation=read.choice("activation_function", "relu", ACTIVATIONS),
        layer_norm_epsilon=LAYER_NORM_EPSILON, mask_padding=True, source_start=True,
        source_end=True, target_start=True)


def m2m100_weights(hf_weights: dict[str, np.ndarray], config: dict,
                   label: str = "the M2M100 model") -> dict[str, np.ndarray]:
    """Our weights from M2M100ForConditionalGeneration's: every weight there with its shape,
    and none left over (its sinusoids are computed, never saved; it has no final_logits_bias)."""
    weights = WeightMap(hf_weights, f"model.safetensors in {label}", "config.json describes")
    ours, embedding = mapped_layers(weights, config)
    ours.update(take_output(weights, config["tie_output"], embedding, final_logits_bias=False))
    weights.check_all_used(f"an M2M100ForConditionalGeneration with this config.json "
                           f"({config['num_encoder_layers']} + {config['num_decoder_layers']} "
                           "layers)")
    return ours


def read_m2m100(source, budgets: limits.Budgets = limits.UPLOAD
                ) -> tuple[ModelFiles, dict]:
    """An M2M100 or NLLB model's files, read and checked, and its config mapped."""
    files = read_folder(
        source, FOLDER, TOKENIZER_FILES,
        (("tokenizer.json",), ("vocab.json", "sentencepiece.bpe.model")), "M2M100 or NLLB", budgets=budgets)
    config = m2m100_config(files.hf_config, files.label)
    files.read_weights(config)
    return files, config


def m2m100_data(source, *, name: str | None = None,
                command: str | None = None, budgets: limits.Budgets = limits.UPLOAD) -> CheckpointData:
    """An M2M100 or NLLB model's files mapped onto our config, weights and tokenizers (nothing
    built)."""
    files, c = read_m2m100(source, budgets)
    default = "nllb" if "tokenizer.json" in files.tokenizer_files else "m2m100"
    family = tokenizer_family(files.tokenizer_files, TOKENIZER_FAMILIES, default, files.label,
                              "M2M100 / NLLB")
    if family == "m2m100" and not {"vocab.json", "sentencepiece.bpe.model"} <= set(
            files.tokenizer_files):
        raise CheckpointError(f"The M2M100 model in {files.label} is missing vocab.json and "
                              "sentencepiece.bpe.model (its tokenizer's files); download them "
                              "from the model's page.")
    if family == "nllb" and "tokenizer.json" not in files.tokenizer_files:
        raise CheckpointError(f"The NLLB model in {files.label} is missing tokenizer.json (its "
                              "tokenizer); download it from the model's page.")
    source_tok, target_tok = tokenizers(files.tokenizer_files, family, files.label)
    check_tokenizers(source_tok, target_tok, c, files.label)
    config = build_config(c, files.label)
    weights = m2m100_weights(files.weights, c, files.label)
    files.weights = {}
    return checkpoint_data(files, config, weights, source_tok, target_tok, recipe="m2m100",
                           architecture="M2M100ForConditionalGeneration",
                           default_name="NLLB model" if family == "nllb" else "M2M100 model",
                           name=name, command=command)


def convert_m2m100(source, *, name: str | None = None, command: str | None = None,
                   budgets: limits.Budgets = limits.UPLOAD) -> Checkpoint:
    """An M2M100 or dense NLLB-200 model (folder path, .zip path or bytes, or {file name:
    bytes}) -> an opened Checkpoint, checked as any checkpoint is."""
    data = m2m100_data(source, name=name, command=command,
                       budgets=budgets)
    return Checkpoint.open(data, f"the weights mapped from {data.metadata['source']['from']}")


convert = convert_m2m100  # the registry's names for them (transformer.importers.HF_FAMILIES)
data = m2m100_data
