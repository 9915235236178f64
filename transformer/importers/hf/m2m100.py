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

from transformer.checkpoint.format import CheckpointError
from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.fairseq import (
    ACTIVATIONS,
    FIELD_MEANINGS,
    FIELDS,
    fairseq_config,
    mapped_layers,
    take_output,
)
from transformer.importers.hf.family import Family, tokenizer_family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe

__all__ = ["FAMILY", "m2m100_config", "m2m100_weights"]

MODEL_TYPES = ("m2m_100", "nllb-moe")  # config.json's model_type; nllb-moe only to refuse it
TOKENIZER_FAMILIES = ("nllb", "m2m100")  # NllbTokenizer (tokenizer.json), M2M100Tokenizer
ACTIVATIONS = {"relu": "relu", **ACTIVATIONS}  # relu first: its default, said first
ALLOWED_FIELDS = FIELDS
_FIELD_MEANINGS = FIELD_MEANINGS


def m2m100_config(hf_config: dict, label: str = "the M2M100 model") -> dict:
    """TransformerConfig fields for an M2M100Config (config.json as parsed); NLLB-MoE's
    NllbMoeConfig is refused with an error naming it."""
    if hf_config.get("model_type") == "nllb-moe":
        raise CheckpointError(
            f"config.json in {label} describes an NLLB-MoE model (model_type 'nllb-moe'): its "
            "mixture-of-experts layers (a router choosing experts per token) are not "
            "implemented here; the dense NLLB-200 models (facebook/nllb-200-distilled-600M, "
            "-1.3B, -3.3B) open.")
    read = ConfigReader(hf_config, f"config.json in {label}", "M2M100", ("m2m_100",),
                        ("M2M100ForConditionalGeneration",), ALLOWED_FIELDS, _FIELD_MEANINGS)
    c = fairseq_config(
        read, label, pad_id=1, end_id=2, start_id=2, activation="relu", scale_embeddings=True,
        activations=ACTIVATIONS, positional="sinusoidal_fairseq", embedding_norm=False,
        output_bias=False, norm_first=True, source_start=True, source_end=True,
        target_start=True)
    c["position_offset"] = c["pad_id"] + 1  # fairseq's positions count from pad_id + 1
    return c


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


def pick_tokenizer(files: dict[str, bytes], label: str) -> str:
    """"nllb" or "m2m100": tokenizer_config.json's class, else NLLB's where tokenizer.json is
    given; an error when that tokenizer's files are missing."""
    default = "nllb" if "tokenizer.json" in files else "m2m100"
    family = tokenizer_family(files, TOKENIZER_FAMILIES, default, label, "M2M100 / NLLB")
    if family == "m2m100" and not {"vocab.json", "sentencepiece.bpe.model"} <= set(files):
        raise CheckpointError(f"The M2M100 model in {label} is missing vocab.json and "
                              "sentencepiece.bpe.model (its tokenizer's files); download them "
                              "from the model's page.")
    if family == "nllb" and "tokenizer.json" not in files:
        raise CheckpointError(f"The NLLB model in {label} is missing tokenizer.json (its "
                              "tokenizer); download it from the model's page.")
    return family


FAMILY = Family(
    Recipe("m2m100", "M2M100 / NLLB-200", "M2M100 or NLLB-200", "Hugging Face's "
           "M2M100ForConditionalGeneration (a facebook/m2m100 or dense nllb-200 model)",
           asks=False),
    model_types=MODEL_TYPES, architecture="M2M100ForConditionalGeneration",
    tokenizer_files=("tokenizer.json", "vocab.json", "sentencepiece.bpe.model",
                     "tokenizer_config.json"),
    tokenizer_sets=(("tokenizer.json",), ("vocab.json", "sentencepiece.bpe.model")),
    tokenizer_families=TOKENIZER_FAMILIES, config=m2m100_config, weights=m2m100_weights,
    what="M2M100 or NLLB", refused_model_types=("nllb-moe",), pick_tokenizer=pick_tokenizer,
    model_names={"nllb": "NLLB model", "m2m100": "M2M100 model"})
