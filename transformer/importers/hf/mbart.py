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
are transformer.importers.hf.family's (Family).
"""

from __future__ import annotations

import numpy as np

from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.fairseq import (
    fairseq_config,
    mapped_layers,
    older_fields,
    take_norm,
    take_output,
)
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model import weights as names

__all__ = ["FAMILY", "mbart_config", "mbart_weights"]

MODEL_TYPES = ("mbart",)  # config.json's model_type
POSITION_OFFSET = 2  # MBartLearnedPositionalEmbedding: row = position + 2
# config.json fields read; those of the older configs only with mBART's values
ALLOWED_FIELDS, _FIELD_MEANINGS = older_fields(
    "mBART", norm_first=True, embedding_norm=True, final_norm=True,
    static_positions=False)


def mbart_config(hf_config: dict, label: str = "the mBART model") -> dict:
    """TransformerConfig fields for an MBartConfig (config.json as parsed). start_id is the
    decoder_start_token_id it gives (</s> by default); start_id sets it from the tokenizer."""
    read = ConfigReader(hf_config, f"config.json in {label}", "mBART", MODEL_TYPES,
                        ("MBartForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
    return fairseq_config(
        read, label, pad_id=1, end_id=2, start_id=None, activation="gelu", scale_embeddings=False,
        positional="learned", embedding_norm=True, output_bias=True, norm_first=True,
        source_start=True, source_end=True, target_start=True)


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


def start_id(c: dict, files, target_tok) -> None:
    """transformers' mBART shift_tokens_right starts the decoder with the target's last token:
    cc25's target ends with its language code, mBART-50's with </s>."""
    c["start_id"] = target_tok.suffix_ids[-1]


FAMILY = Family(
    Recipe("mbart", "mBART", "mBART", "Hugging Face's MBartForConditionalGeneration (a "
           "facebook/mbart-large-cc25 or mbart-large-50 model)", asks=False),
    model_types=MODEL_TYPES, architecture="MBartForConditionalGeneration",
    tokenizer_files=("tokenizer.json", "sentencepiece.bpe.model", "tokenizer_config.json"),
    tokenizer_sets=(("tokenizer.json",), ("sentencepiece.bpe.model",)),
    tokenizer_families=("mbart", "mbart50"),  # MBartTokenizer (cc25), MBart50Tokenizer
    config=mbart_config, weights=mbart_weights, settle=start_id,
    position_offset=POSITION_OFFSET)
