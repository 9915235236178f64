"""What transformers' fairseq-born encoder-decoders share (BART, mBART, Marian, M2M100, NLLB,
Pegasus all keep modeling_bart's layout and config fields): the config.json fields their configs
have in common (FIELDS, ACTIVATIONS, LAYER_NORM_EPSILON), and the weight names and ours: one
layer's table, the shared token embedding, the embedding and final norms, and the logits (tied
embedding, final_logits_bias).

PyTorch's Linear stores (out, in); a Keras Dense kernel is (in, out): every projection is
transposed (a view; copied once, into the model)."""

from __future__ import annotations

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.core import limits
from transformer.importers.hf.config_reader import ConfigReader
from transformer.importers.mapping import WeightMap
from transformer.model import weights as names

__all__ = ["ACTIVATIONS", "FIELDS", "FIELD_MEANINGS", "LAYER_NORM_EPSILON", "fairseq_config",
           "older_fields",
           "layer_names",
           "mapped_layers", "take_final_norms", "take_layers", "take_norm",
           "take_output", "take_shared_embedding"]

LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default; their configs have no field for it
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "swish",
               "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}  # theirs -> ours
FIELDS = {  # config.json fields every one of them reads (config_reader.ConfigReader's allowed)
    "vocab_size": None, "d_model": None, "hidden_size": None, "encoder_layers": None,
    "decoder_layers": None, "num_hidden_layers": None, "encoder_attention_heads": None,
    "decoder_attention_heads": None, "num_attention_heads": None, "encoder_ffn_dim": None,
    "decoder_ffn_dim": None, "activation_function": None, "max_position_embeddings": None,
    "scale_embedding": None, "pad_token_id": None, "eos_token_id": None,
    "decoder_start_token_id": None, "tie_word_embeddings": None,
    "is_encoder_decoder": (True,), "is_decoder": (False,),
}
FIELD_MEANINGS = {
    "is_encoder_decoder": "a model that is not an encoder-decoder",
    "is_decoder": "a decoder-only model",
}
def older_fields(family: str, *, norm_first: bool, embedding_norm: bool, final_norm: bool,
                 static_positions: bool) -> tuple[dict, dict]:
    """(allowed fields, what a refused value would mean) of a family: FIELDS, and the fields of
    the older configs (facebook/bart-large's, mbart-large-cc25's, pegasus-xsum's have them),
    each allowed only the family's value."""
    allowed = {**FIELDS, "normalize_before": (norm_first,),
               "normalize_embedding": (embedding_norm,), "add_final_layer_norm": (final_norm,),
               "add_bias_logits": (False,), "static_position_embeddings": (static_positions,)}
    meanings = {
        **FIELD_MEANINGS,
        "normalize_before": (f"post-LayerNorm blocks; {family} normalizes before each block"
                             if norm_first else
                             f"pre-LayerNorm blocks; {family} normalizes after each block"),
        "normalize_embedding": (f"no LayerNorm on the embeddings, which {family} has"
                                if embedding_norm else
                                f"a LayerNorm on the embeddings, which {family} does not have"),
        "add_final_layer_norm": (f"no LayerNorm after the last layer, which {family} has"
                                 if final_norm else
                                 f"a LayerNorm after the last layer, which {family} does not have"),
        "add_bias_logits": "a bias inside the output projection",
        "static_position_embeddings": (f"learned positions; {family}'s are sinusoids"
                                       if static_positions else
                                       f"sinusoidal positions; {family}'s are learned"),
    }
    return allowed, meanings


def fairseq_config(read: ConfigReader, label: str, *, pad_id: int, end_id: int,
                   start_id: int | None, activation: str, scale_embeddings: bool,
                   activations: dict = ACTIVATIONS, **fields) -> dict:
    """TransformerConfig fields every one of them maps alike: the vocabulary, the sizes, the
    positions read, the special ids (the defaults given: their configs' defaults; start_id None:
    eos_token_id when decoder_start_token_id is not given, mBART's), the activation, embedding
    scale and tie; `fields` are the family's own (positions, norms, the ids around a text)."""
    vocab = read.integer("vocab_size", high=limits.MAX_VOCAB)
    max_len = read.integer("max_position_embeddings", 1024, high=limits.MAX_POSITIONS)
    pad = read.token_id("pad_token_id", pad_id, vocab)
    end = read.token_id("eos_token_id", end_id, vocab)
    start = (end if start_id is None and read.config.get("decoder_start_token_id") is None
             else read.token_id("decoder_start_token_id", start_id, vocab))
    if end == pad:
        raise CheckpointError(f"config.json in {label} gives the same id {end} for "
                              "eos_token_id and pad_token_id; the end of an output could not be "
                              "told apart.")
    return dict(
        src_vocab_size=vocab, tgt_vocab_size=vocab, **read.sizes(), dropout_rate=0.1,
        max_len=max_len, scale_embeddings=read.boolean("scale_embedding", scale_embeddings),
        share_embeddings=True, tie_output=read.boolean("tie_word_embeddings", True),
        pad_id=pad, start_id=start, end_id=end,
        activation=read.choice("activation_function", activation, activations),
        layer_norm_epsilon=LAYER_NORM_EPSILON, mask_padding=True, **fields)


_LINEAR = {"q_proj": "query", "k_proj": "key", "v_proj": "value", "out_proj": "output"}
_LAYER_NORM = {"weight": "gamma", "bias": "beta"}
EMBEDDING_NAMES = ("model.shared.weight", "model.encoder.embed_tokens.weight",
                   "model.decoder.embed_tokens.weight")


def layer_names(side: str, i: int, d_model: int, dff: int) -> dict[str, tuple[str, tuple, bool]]:
    """{Hugging Face name: (our name, Hugging Face shape, transpose)} for one layer."""
    ours_side = "encoder" if side == "encoder" else "decoder"
    hf, ours = f"model.{side}.layers.{i}.", names.layer(ours_side, i) + "/"
    table = {}
    attentions = [("self_attn", "self_attention")]
    norms = [("self_attn_layer_norm", "self_attention_layer_norm"),
             ("final_layer_norm", "feedforward_layer_norm")]
    if side == "decoder":
        attentions.append(("encoder_attn", "cross_attention"))
        norms.append(("encoder_attn_layer_norm", "cross_attention_layer_norm"))
    for hf_attention, our_attention in attentions:
        for proj, dense in _LINEAR.items():
            base = f"{hf}{hf_attention}.{proj}"
            table[f"{base}.weight"] = (f"{ours}{our_attention}/{dense}/kernel", (d_model, d_model),
                                       True)
            table[f"{base}.bias"] = (f"{ours}{our_attention}/{dense}/bias", (d_model,), False)
    for hf_norm, our_norm in norms:
        for part, ours_part in _LAYER_NORM.items():
            table[f"{hf}{hf_norm}.{part}"] = (f"{ours}{our_norm}/{ours_part}", (d_model,), False)
    for fc, dense, shape in (("fc1", "intermediate", (dff, d_model)),
                             ("fc2", "output", (d_model, dff))):
        table[f"{hf}{fc}.weight"] = (f"{ours}feedforward/{dense}/kernel", shape, True)
        table[f"{hf}{fc}.bias"] = (f"{ours}feedforward/{dense}/bias", (shape[0],), False)
    return table


def take_layers(weights: WeightMap, config: dict) -> dict[str, np.ndarray]:
    """Every encoder and decoder layer's weights, by our names."""
    d, dff = config["d_model"], config["dff"]
    table = {}
    for i in range(config["num_encoder_layers"]):
        table.update(layer_names("encoder", i, d, dff))
    for i in range(config["num_decoder_layers"]):
        table.update(layer_names("decoder", i, d, dff))
    ours = {}
    for hf_name, (our_name, shape, transpose) in table.items():
        value = weights.take(hf_name, shape)
        ours[our_name] = value.T if transpose else value
    return ours


def take_norm(weights: WeightMap, hf_prefix: str, our_prefix: str, d_model: int,
              what: str) -> dict[str, np.ndarray]:
    """A torch LayerNorm (weight, bias) as ours (gamma, beta)."""
    return {f"{our_prefix}/{ours}": weights.take(f"{hf_prefix}.{part}", (d_model,), what)
            for part, ours in _LAYER_NORM.items()}


def take_shared_embedding(weights: WeightMap, vocab: int, d_model: int) -> np.ndarray:
    """The one token embedding of source, target and (tied) output, saved under any of its
    names: every copy must be equal."""
    present = [n for n in EMBEDDING_NAMES if n in weights]
    if not present:
        raise CheckpointError(f"{weights.where} has no weight 'model.shared.weight' (the token "
                              "embedding that source and target share).")
    embedding = weights.take(present[0], (vocab, d_model), "the shared token embedding")
    for other in present[1:]:
        if not np.array_equal(weights.take(other, (vocab, d_model)), embedding):
            raise CheckpointError(
                f"The weight {other!r} in {weights.where} differs from {present[0]!r}; "
                "config.json says source and target share one embedding.")
    return embedding


def take_output(weights: WeightMap, tie_output: bool, embedding: np.ndarray,
                final_logits_bias: bool = True) -> dict[str, np.ndarray]:
    """The logits: the tied embedding or lm_head.weight, plus final_logits_bias (zero when a
    family that has one does not save it, as transformers starts it; final_logits_bias=False:
    the family has none, M2M100's)."""
    vocab, d = embedding.shape
    ours = {}
    bias = None
    if final_logits_bias:
        bias = (weights.take("final_logits_bias", (1, vocab), "the logits' bias").reshape(vocab)
                if "final_logits_bias" in weights else np.zeros(vocab, np.float32))
    if tie_output:
        if "lm_head.weight" in weights and \
                not np.array_equal(weights.take("lm_head.weight", (vocab, d)), embedding):
            raise CheckpointError(
                f"The weight 'lm_head.weight' in {weights.where} differs from the token "
                "embedding, but config.json ties them (tie_word_embeddings).")
        if bias is not None:
            ours["output_bias"] = bias
    else:
        ours[f"{names.OUTPUT_PROJECTION}/kernel"] = weights.take(
            "lm_head.weight", (vocab, d), "the output projection").T
        if bias is not None:
            ours[f"{names.OUTPUT_PROJECTION}/bias"] = bias
    return ours


def take_final_norms(weights: WeightMap, d_model: int) -> dict[str, np.ndarray]:
    """The LayerNorm after each stack's last layer (model.{encoder,decoder}.layer_norm: mBART's,
    Pegasus's, M2M100's)."""
    ours = {}
    for stack in ("encoder", "decoder"):
        ours.update(take_norm(weights, f"model.{stack}.layer_norm", f"{stack}_norm", d_model,
                              f"the {stack}'s final LayerNorm"))
    return ours


def mapped_layers(weights: WeightMap, c: dict) -> tuple[dict, np.ndarray]:
    """Every layer, the shared embedding (as the source's) and the final norms of a pre-LN
    model (mBART, Pegasus, M2M100); (our weights, the embedding)."""
    ours = take_layers(weights, c)
    embedding = take_shared_embedding(weights, c["src_vocab_size"], c["d_model"])
    ours[names.token_embedding("source")] = embedding
    ours.update(take_final_norms(weights, c["d_model"]))
    return ours, embedding
