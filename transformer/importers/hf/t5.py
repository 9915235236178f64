"""T5 (Hugging Face's T5ForConditionalGeneration: t5-small/base/large, T5 v1.1, flan-T5, mT5)
read as data and mapped onto our Transformer.

A T5 model is a folder (or a .zip of one, or its files uploaded together) holding config.json
(T5Config, read against an allow-list), model.safetensors, its tokenizer (tokenizer.json, or
spiece.model: transformer.tokenizers.huggingface, family "t5") and optionally
generation_config.json and tokenizer_config.json (read for its tokenizer_class only: a folder
whose tokenizer is another family's, PegasusTokenizer's spiece.model say, is refused).

What makes T5 differ from the paper's model, and the config field that carries it:

    no absolute positions; a learned bias per head on   positional="none",
      the self-attention scores for each bucket of the    relative_attention, relative_buckets,
      distance key - query, held by each stack's first    relative_max_distance
      layer and shared by all its layers (bidirectional
      in the encoder, causal in the decoder; none in
      cross-attention)
    RMSNorm (scale only), pre-LN with a final norm      norm="rms", norm_first=True
    no biases anywhere, no 1/sqrt(d_kv) on the scores   use_bias=False, attention_scale=False
    per-head size d_kv (d_model need not be heads x it) head_dim
    relu (v1.0) or gated gelu_new (v1.1, flan-T5, mT5)  feedforward="gated", "gelu_tanh"
    one embedding for both sides; v1.0's output is it,  share_embeddings, tie_output,
      the decoder's output scaled by d_model^-0.5 first   output_scale
    sources and targets are pieces then </s>; decoding  source_start=False, source_end=True;
      starts with <pad>                                   start_id = pad_id = 0

Google's checkpoints pad the embedding beyond the tokenizer's entries (t5-small, flan-T5: 32,128
rows for 32,100 pieces and extra ids): the tokenizers are padded to config.json's vocab_size
(hf.family.check_tokenizers), the rows between being ids no text gives.
"""

from __future__ import annotations

import json

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.core import limits
from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.hf.family import Family
from transformer.importers.mapping import WeightMap
from transformer.importers.recipe import Recipe
from transformer.model import weights as names

__all__ = ["FAMILY", "t5_config", "t5_weights"]

MODEL_TYPES = ("t5", "mt5")  # config.json's model_type
DEFAULT_MAX_LEN = 512  # T5 has no absolute positions: the longest sequence read (its n_positions)
FEED_FORWARD = {"relu": ("dense", "relu"), "gated-gelu": ("gated", "gelu_tanh"),
                "gated-relu": ("gated", "relu"), "gelu": ("dense", "gelu"),
                "gated-silu": ("gated", "silu")}
_DENSE_ACT = {"dense": {"relu": "relu", "gelu": "gelu"},
              "gated": {"gelu_new": "gelu_tanh", "relu": "relu", "silu": "silu"}}
ALLOWED_FIELDS = {
    "vocab_size": None, "d_model": None, "d_kv": None, "d_ff": None, "num_layers": None,
    "num_decoder_layers": None, "num_heads": None, "relative_attention_num_buckets": None,
    "relative_attention_max_distance": None, "layer_norm_epsilon": None,
    "feed_forward_proj": None, "dense_act_fn": None, "is_gated_act": None,
    "tie_word_embeddings": None, "pad_token_id": None, "eos_token_id": None,
    "decoder_start_token_id": None, "n_positions": None, "initializer_factor": None,
    "scale_decoder_outputs": None,
    "is_encoder_decoder": (True,), "is_decoder": (False,),
}


def t5_config(hf_config: dict, label: str = "the T5 model") -> dict:
    """TransformerConfig fields for a T5Config (config.json as parsed)."""
    where = f"config.json in {label}"
    read = ConfigReader(hf_config, where, "T5", MODEL_TYPES,
                        # T5WithLMHeadModel: the old name t5-small's and t5-base's configs give
                        ("T5ForConditionalGeneration", "MT5ForConditionalGeneration",
                         "T5WithLMHeadModel"),
                        ALLOWED_FIELDS)
    vocab = read.integer("vocab_size", high=limits.MAX_VOCAB)
    heads = read.integer("num_heads", 8, high=limits.MAX_HEADS)
    encoder_layers = read.integer("num_layers", 6, high=limits.NAMED_MAX_LAYERS)
    proj = hf_config.get("feed_forward_proj", "relu")
    if not isinstance(proj, str) or proj not in FEED_FORWARD:
        raise CheckpointError(f"{where} gives feed_forward_proj {json.dumps(proj)[:80]}; only "
                              f"{', '.join(FEED_FORWARD)} are implemented here.")
    feedforward, activation = FEED_FORWARD[proj]
    if "dense_act_fn" in hf_config:  # saved by newer configs: must agree with feed_forward_proj
        activation = read.choice("dense_act_fn", "relu", _DENSE_ACT[feedforward])
    if read.boolean("is_gated_act", feedforward == "gated") != (feedforward == "gated"):
        raise CheckpointError(f"{where} gives is_gated_act {hf_config['is_gated_act']} but "
                              f"feed_forward_proj {proj!r}.")
    epsilon = hf_config.get("layer_norm_epsilon", 1e-6)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or \
            not 0 < epsilon < 1:
        raise CheckpointError(f"{where} gives layer_norm_epsilon {json.dumps(epsilon)[:80]}; "
                              "it must be a number in (0, 1).")
    pad_id = read.token_id("pad_token_id", 0, vocab)
    end_id = read.token_id("eos_token_id", 1, vocab)
    start_id = read.token_id("decoder_start_token_id", pad_id, vocab)
    if end_id == pad_id:
        raise CheckpointError(f"{where} gives the same id {end_id} for eos_token_id and "
                              "pad_token_id; the end of an output could not be told apart.")
    tied = read.boolean("tie_word_embeddings", True)
    # transformers 5.24 writes scale_decoder_outputs in every T5 config (and forces
    # tie_word_embeddings to true): the decoder's output is scaled by d_model ** -0.5 before the
    # projection when it is true. Configs written before (the hub's) have no such field: there
    # tie_word_embeddings says it (T5 v1.0 true, v1.1 false), as it did in 4.x. MT5Config has no
    # such field and MT5ForConditionalGeneration never scales. Whether the output projection is
    # the shared embedding follows the weights (t5_data: tied_output).
    scaled = False if hf_config.get("model_type") == "mt5" else \
        read.boolean("scale_decoder_outputs", tied)
    d_model = read.integer("d_model", 512)
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, num_heads=heads,
        head_dim=read.integer("d_kv", 64), dff=read.integer("d_ff", 2048),
        num_encoder_layers=encoder_layers,
        num_decoder_layers=read.integer("num_decoder_layers", encoder_layers,
                                        high=limits.NAMED_MAX_LAYERS),
        dropout_rate=0.1,
        max_len=read.integer("n_positions", DEFAULT_MAX_LEN, high=limits.MAX_POSITIONS),
        positional="none", scale_embeddings=False, share_embeddings=True, tie_output=tied,
        output_bias=False, output_scale=d_model ** -0.5 if scaled else 1.0, norm_first=True,
        norm="rms", use_bias=False, attention_scale=False, feedforward=feedforward,
        activation=activation, layer_norm_epsilon=float(epsilon),
        relative_attention=True,
        relative_buckets=read.integer("relative_attention_num_buckets", 32, low=4,
                                      high=1024),
        relative_max_distance=read.integer("relative_attention_max_distance", 128),
        pad_id=pad_id, start_id=start_id, end_id=end_id, mask_padding=True,
        source_start=False, source_end=True, target_start=False)


def _block_names(stack: str, i: int, c: dict) -> dict[str, tuple[str, tuple, bool]]:
    """{T5 name: (our name, T5 shape, transpose)} for one block of a stack."""
    d, inner, dff = c["d_model"], c["num_heads"] * c["head_dim"], c["dff"]
    t5, ours = f"{stack}.block.{i}.layer.", names.layer(stack, i) + "/"
    sublayers = [("0", "SelfAttention", "self_attention")]
    if stack == "decoder":
        sublayers.append(("1", "EncDecAttention", "cross_attention"))
    table = {}
    for index, t5_name, our_name in sublayers:
        for proj, dense in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "output")):
            shape = (d, inner) if proj == "o" else (inner, d)
            table[f"{t5}{index}.{t5_name}.{proj}.weight"] = (
                f"{ours}{our_name}/{dense}/kernel", shape, True)
        table[f"{t5}{index}.layer_norm.weight"] = (f"{ours}{our_name}_layer_norm/scale", (d,),
                                                  False)
    ffn = "2" if stack == "decoder" else "1"
    dense = ({"wi_0": "gate", "wi_1": "intermediate"} if c["feedforward"] == "gated"
             else {"wi": "intermediate"})
    for t5_name, our_name in dense.items():
        table[f"{t5}{ffn}.DenseReluDense.{t5_name}.weight"] = (
            f"{ours}feedforward/{our_name}/kernel", (dff, d), True)
    table[f"{t5}{ffn}.DenseReluDense.wo.weight"] = (f"{ours}feedforward/output/kernel",
                                                    (d, dff), True)
    table[f"{t5}{ffn}.layer_norm.weight"] = (f"{ours}feedforward_layer_norm/scale", (d,), False)
    return table


def t5_weights(hf_weights: dict[str, np.ndarray], config: dict,
               label: str = "the T5 model") -> dict[str, np.ndarray]:
    """Our weights from T5ForConditionalGeneration's: every weight there with its shape, and
    none left over."""
    weights = WeightMap(hf_weights, f"model.safetensors in {label}", "config.json describes")
    c, vocab, d = config, config["src_vocab_size"], config["d_model"]
    table = {}
    for stack, count in (("encoder", c["num_encoder_layers"]),
                         ("decoder", c["num_decoder_layers"])):
        for i in range(count):
            table.update(_block_names(stack, i, c))
        table[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = (
            names.relative_bias(stack), (c["relative_buckets"], c["num_heads"]), False)
        table[f"{stack}.final_layer_norm.weight"] = (f"{stack}_norm/scale", (d,), False)
    ours = {}
    for t5_name, (our_name, shape, transpose) in table.items():
        value = weights.take(t5_name, shape)
        ours[our_name] = value.T if transpose else value
    embedding = weights.take("shared.weight", (vocab, d), "the shared token embedding")
    for copy in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
        if copy in weights and not np.array_equal(weights.take(copy, (vocab, d)), embedding):
            raise CheckpointError(f"The weight {copy!r} in {weights.where} differs from "
                                  "'shared.weight'; T5 shares one embedding.")
    ours[names.token_embedding("source")] = embedding
    if c["tie_output"]:
        if "lm_head.weight" in weights:  # equal to the embedding (tied_output): not a weight
            weights.take("lm_head.weight", (vocab, d))
    else:
        ours[f"{names.OUTPUT_PROJECTION}/kernel"] = weights.take(
            "lm_head.weight", (vocab, d), "the output projection").T
    weights.check_all_used(f"a T5ForConditionalGeneration with this config.json "
                           f"({c['num_encoder_layers']} + {c['num_decoder_layers']} layers)")
    return ours


def tied_output(hf_weights: dict) -> bool:
    """Whether the output projection is the shared embedding, as transformers 5.24 decides it
    for every T5 config (tie_word_embeddings is forced true, and modeling_utils.tie_weights ties
    lm_head.weight to shared.weight unless the file holds an lm_head.weight that differs):
    tied when the file has no lm_head.weight or one equal to shared.weight (v1.0, and v1.1 saved
    by 5.24); flan-t5's own head otherwise, whatever tie_word_embeddings says."""
    head, shared = hf_weights.get("lm_head.weight"), hf_weights.get("shared.weight")
    return head is None or (shared is not None and head.shape == shared.shape
                            and np.array_equal(head, shared))


def tie_output(c: dict, files, target_tok) -> None:
    c["tie_output"] = tied_output(files.weights)


FAMILY = Family(
    Recipe("t5", "T5", "T5", "Hugging Face's T5ForConditionalGeneration (t5, T5 v1.1, flan-T5, "
           "mT5)", asks=False),
    model_types=MODEL_TYPES, architecture="T5ForConditionalGeneration",
    # tokenizer_config.json is read for its tokenizer_class only (another family's tokenizer is
    # refused); the tokenizer itself is made of tokenizer.json or spiece.model alone.
    tokenizer_files=("tokenizer.json", "spiece.model", "tokenizer_config.json"),
    tokenizer_sets=(("tokenizer.json",), ("spiece.model",)), tokenizer_families=("t5",),
    config=t5_config, weights=t5_weights, settle=tie_output, tokenizer_options=False)
