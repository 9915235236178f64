"""mBART (Hugging Face's MBartForConditionalGeneration: facebook/mbart-large-cc25, the
mbart-large-en-ro style fine-tunes of it, and mBART-50: facebook/mbart-large-50-*) read as data
and mapped onto our Transformer.

An mBART model is a folder (or a .zip of one, or its files uploaded together) holding

    config.json              MBartConfig, read against an allow-list (ALLOWED_FIELDS)
    model.safetensors        the weights (no torch, no pickle)
    tokenizer.json, or       the SentencePiece vocabulary with fairseq's ids and the language
      sentencepiece.bpe.model  codes (transformer.tokenizers.huggingface, family "mbart" for
                             cc25's MBartTokenizer, "mbart50" for MBart50Tokenizer)
    tokenizer_config.json    which tokenizer (tokenizer_class) and the languages (src_lang,
                             tgt_lang); optional: without it the tokenizer is cc25's, as
                             transformers' AutoTokenizer picks for model_type "mbart"
    generation_config.json   how transformers decodes it (optional; its forced_bos_token_id is
                             the target language code of a many-to-many mBART-50)

What makes mBART differ from the paper's model, and the config field that carries it:

    learned positions, row = position + 2          positional="learned" (rows 2.. taken)
    a LayerNorm on the embedded input of each stack embedding_norm=True (layernorm_embedding)
    pre-LayerNorm, a final LayerNorm on each stack  norm_first=True (encoder_norm, decoder_norm)
    embeddings times sqrt(d_model)                  scale_embeddings (scale_embedding)
    gelu (exact), LayerNorm epsilon 1e-5           activation="gelu", layer_norm_epsilon=1e-5
    one embedding for source, target and output    share_embeddings, tie_output
    final_logits_bias added to the logits          output_bias
    cc25: X </s> lang on both sides                source_end (the tokenizer's suffix)
    mBART-50: lang X </s> on both sides            source_start, target_start (its prefix)
    the decoder starts with the last token of the  start_id: cc25 the target language code,
      target (transformers' mBART shift_tokens_right mBART-50 </s>
      wraps it to the front)

The steps every Hugging Face family shares (reading the folder, the tokenizers, the provenance)
are transformer.importers.hf_common's.
"""

from __future__ import annotations

import numpy as np

from transformer.checkpoint.format import CheckpointData, CheckpointError
from transformer.core import limits
from transformer.importers.bart_layout import mapped_layers, take_norm, take_output
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
from transformer.model import weights as names

__all__ = ["RECIPE", "REQUIRED_FILES", "convert_mbart", "mbart_config", "mbart_data",
           "mbart_weights", "read_mbart"]

MODEL_TYPES = ("mbart",)  # config.json's model_type
RECIPE = Recipe("mbart", "mBART", "mBART", "Hugging Face's MBartForConditionalGeneration (a "
                "facebook/mbart-large-cc25 or mbart-large-50 model)", asks=False)
TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model", "tokenizer_config.json")
FOLDER = FolderSpec({
    "config.json": limits.MAX_JSON_BYTES,
    "generation_config.json": limits.MAX_JSON_BYTES,
    **WEIGHT_FILE_BYTES,
    "tokenizer.json": limits.MAX_TOKENIZER_BYTES,
    "sentencepiece.bpe.model": limits.MAX_TOKENIZER_BYTES,
    "tokenizer_config.json": limits.MAX_JSON_BYTES,
}, PICKLE_FILES, "the mBART model")
FOLDER_FILES = tuple(FOLDER.file_bytes)  # the names read of a folder
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; MBartConfig has no field for it
POSITION_OFFSET = 2  # MBartLearnedPositionalEmbedding: row = position + 2
TOKENIZER_FAMILIES = ("mbart", "mbart50")  # MBartTokenizer (cc25), MBart50Tokenizer
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
    # Fields of the older configs (facebook/mbart-large-cc25's has them): only mBART's values.
    "normalize_before": (True,), "normalize_embedding": (True,),
    "add_final_layer_norm": (True,), "add_bias_logits": (False,),
    "static_position_embeddings": (False,),
}
_FIELD_MEANINGS = {
    "normalize_before": "post-LayerNorm blocks (BART's); mBART normalizes before each block",
    "normalize_embedding": "no LayerNorm on the embeddings, which mBART has",
    "add_final_layer_norm": "no LayerNorm after the last layer, which mBART has",
    "add_bias_logits": "a bias inside the output projection",
    "static_position_embeddings": "sinusoidal positions; mBART's are learned",
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}


def mbart_config(hf_config: dict, label: str = "the mBART model") -> dict:
    """TransformerConfig fields for an MBartConfig (config.json as parsed). start_id is the
    decoder_start_token_id it gives (</s> by default); mbart_data sets it from the tokenizer."""
    read = ConfigReader(hf_config, f"config.json in {label}", "mBART", MODEL_TYPES,
                        ("MBartForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
    vocab = read.integer("vocab_size", high=limits.MAX_VOCAB)
    max_len = read.integer("max_position_embeddings", 1024, high=limits.MAX_POSITIONS)
    pad_id = read.token_id("pad_token_id", 1, vocab)
    end_id = read.token_id("eos_token_id", 2, vocab)
    start = hf_config.get("decoder_start_token_id")
    start_id = end_id if start is None else read.token_id("decoder_start_token_id", 2, vocab)
    if end_id == pad_id:
        raise CheckpointError(f"config.json in {label} gives the same id {end_id} for "
                              "eos_token_id and pad_token_id; the end of an output could not be "
                              "told apart.")
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, **read.sizes(), dropout_rate=0.1,
        max_len=max_len, positional="learned", embedding_norm=True,
        scale_embeddings=read.boolean("scale_embedding", False), share_embeddings=True,
        tie_output=read.boolean("tie_word_embeddings", True), output_bias=True, norm_first=True,
        pad_id=pad_id, start_id=start_id, end_id=end_id,
        activation=read.choice("activation_function", "gelu", ACTIVATIONS),
        layer_norm_epsilon=LAYER_NORM_EPSILON, mask_padding=True, source_start=True,
        source_end=True, target_start=True)


def mbart_weights(hf_weights: dict[str, np.ndarray], config: dict,
                  label: str = "the mBART model") -> dict[str, np.ndarray]:
    """Our weights from MBartForConditionalGeneration's: every weight there with its shape, and
    none left over."""
    weights = WeightMap(hf_weights, f"model.safetensors in {label}", "config.json describes")
    d, max_len = config["d_model"], config["max_len"]
    ours, embedding = mapped_layers(weights, config)
    for side, stack in (("source", "encoder"), ("target", "decoder")):
        table = weights.take(f"model.{stack}.embed_positions.weight",
                             (max_len + POSITION_OFFSET, d), f"the {stack}'s learned positions")
        ours[names.position_embedding(side)] = table[POSITION_OFFSET:]  # rows 0, 1 never used
        ours.update(take_norm(weights, f"model.{stack}.layernorm_embedding",
                              names.embedding_norm(side), d, f"the {stack}'s embedding norm"))
    ours.update(take_output(weights, config["tie_output"], embedding))
    weights.check_all_used(f"an MBartForConditionalGeneration with this config.json "
                           f"({config['num_encoder_layers']} + {config['num_decoder_layers']} "
                           "layers)")
    return ours


def read_mbart(source, budgets: limits.Budgets = limits.UPLOAD
               ) -> tuple[ModelFiles, dict]:
    """An mBART model's files, read and checked, and its config mapped (mbart_config)."""
    files = read_folder(
        source, FOLDER, TOKENIZER_FILES, (("tokenizer.json",), ("sentencepiece.bpe.model",)),
        "mBART", budgets=budgets)
    config = mbart_config(files.hf_config, files.label)
    files.read_weights(config)
    return files, config


def mbart_data(source, *, name: str | None = None, command: str | None = None,
               budgets: limits.Budgets = limits.UPLOAD) -> CheckpointData:
    """An mBART model's files mapped onto our config, weights and tokenizers (nothing built)."""
    files, c = read_mbart(source, budgets)
    family = tokenizer_family(files.tokenizer_files, TOKENIZER_FAMILIES, "mbart", files.label,
                              "mBART")
    source_tok, target_tok = tokenizers(files.tokenizer_files, family, files.label)
    check_tokenizers(source_tok, target_tok, c, files.label)
    # transformers' mBART shift_tokens_right starts the decoder with the target's last token:
    # cc25's target ends with its language code, mBART-50's with </s>.
    c["start_id"] = target_tok.suffix_ids[-1]
    config = build_config(c, files.label)
    weights = mbart_weights(files.weights, c, files.label)
    files.weights = {}
    return checkpoint_data(files, config, weights, source_tok, target_tok, recipe="mbart",
                           architecture="MBartForConditionalGeneration",
                           default_name="mBART model", name=name, command=command)


def convert_mbart(source, *, name: str | None = None, command: str | None = None,
                  budgets: limits.Budgets = limits.UPLOAD) -> Checkpoint:
    """An mBART model (folder path, .zip path or bytes, or {file name: bytes}) -> an opened
    Checkpoint, checked as any checkpoint is."""
    data = mbart_data(source, name=name, command=command,
                      budgets=budgets)
    return Checkpoint.open(data, f"the weights mapped from {data.metadata['source']['from']}")


convert = convert_mbart  # the registry's names for them (transformer.importers.HF_FAMILIES)
data = mbart_data
