"""The recipe ``tf-tutorial``: the TensorFlow tutorial "Neural machine translation with a Transformer
and Keras":
    embeddings times sqrt(d_model) plus [sin | cos] positions, keras MultiHeadAttention (heads
    from the kernels), LayerNormalization epsilon 1e-3, a logits Dense, WordPiece vocabularies
    framed with [START] ... [END].
"""

from __future__ import annotations

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.core.text import quoted
from transformer.importers.keras_common import (
    KERAS_LAYER_NORM_EPSILON,
    LAYER_NORM_GROUP,
    Architecture,
    check_dff,
    convert,
    dense,
    feedforward,
    final_dense,
    is_keras_mha,
    keras_mha,
    layer_norm,
    model_width,
    ordered,
    split_embeddings,
    tree,
)
from transformer.importers.keras_seq2seq import FORM_LABELS, keras_form, layers_found
from transformer.importers.recipe import Recipe
from transformer.inference.session import OpenedModel
from transformer.model import weights as names

RECIPE = Recipe(
    "tf-tutorial", "TF tutorial", "the TF tutorial",
    "the TensorFlow tutorial \"Neural machine translation with a Transformer and Keras\"",
    ("Portuguese", "English"))
TUTORIAL_POSITIONS = 2048  # the tutorial's positional_encoding(length=2048, ...)


def infer_tf_tutorial(arrays: dict[str, np.ndarray], file_label: str,
                      num_heads: int | None = None) -> Architecture:
    root = tree(arrays, file_label)
    nodes = list(root.walk())
    encoders = ordered([n for n in nodes if n.child("self_attention") and n.child("ffn")])
    decoders = ordered([n for n in nodes if n.child("causal_self_attention")
                         and n.child("cross_attention") and n.child("ffn")])
    if not encoders or not decoders or not is_keras_mha(
            encoders[0].child("self_attention").child("mha")):
        form = keras_form(nodes)[0]
        raise CheckpointError(
            f"{file_label} does not hold the TensorFlow tutorial's EncoderLayer and DecoderLayer "
            "(self_attention, causal_self_attention, cross_attention, each around a keras "
            f"MultiHeadAttention named mha, and ffn). Its layers are: {layers_found(root)}"
            + (f"; it looks like a Keras seq2seq model ({FORM_LABELS[form]}): use the "
               "keras-seq2seq recipe." if form else "."))
    embeddings = [n.child("pos_embedding").child("embedding") for n in nodes
                  if n.child("pos_embedding") and n.child("pos_embedding").child("embedding")]
    first = encoders[0].child("self_attention").child("mha")
    d_model = model_width(first.child("query_dense"), 3, file_label)
    final = final_dense(root, [n.path for n in encoders + decoders + embeddings], d_model, file_label)
    out_kernel, out_bias = dense(final, file_label, d_model, None, "final Dense")
    source_emb, target_emb = split_embeddings(embeddings, encoders, decoders, out_kernel.shape[1],
                                               file_label, "PositionalEmbedding layers")
    weights, shape, dff = {}, None, None

    def attention(node, what, side, index):
        nonlocal shape
        owner = f"{side} layer {index + 1} ({quoted(node.in_file)})"
        wrapper = node.need(what, f"{what.replace('_', ' ')} layer", file_label, owner=owner)
        mha = wrapper.child("mha")
        if mha is None:
            raise CheckpointError(f"{file_label}: {node.label + '/' + what!r} has no keras "
                                  "MultiHeadAttention (mha).")
        parts, h, k = keras_mha(mha, d_model, file_label)
        if shape is not None and (h, k) != shape:
            raise CheckpointError(f"{file_label}: the attention {mha.label!r} has {h} heads of {k}, "
                                  f"another has {shape[0]} of {shape[1]}.")
        if num_heads is not None and num_heads != h:
            raise CheckpointError(f"{file_label}: --num-heads is {num_heads} but the attention "
                                  f"kernels hold {h} heads (query kernel {(d_model, h, k)}).")
        shape = (h, k)
        norm = wrapper.need("layernorm", f"LayerNormalization weights for its "
                            f"{what.replace('_', ' ')}", file_label, LAYER_NORM_GROUP, owner=owner)
        return parts, layer_norm(norm, d_model, file_label)

    def block_feedforward(node, side, index):
        owner = f"{side} layer {index + 1} ({quoted(node.in_file)})"
        ffn = node.child("ffn")
        if not ffn.child("seq"):
            raise CheckpointError(f"{file_label}: {ffn.label!r} is not the tutorial's FeedForward "
                                  "(seq, layer_norm).")
        norm = ffn.need("layer_norm", "LayerNormalization weights for its feed-forward",
                        file_label, LAYER_NORM_GROUP, owner=owner)
        return feedforward(ffn.child("seq"), d_model, file_label), \
            layer_norm(norm, d_model, file_label)

    for i, node in enumerate(encoders):
        prefix = names.layer("encoder", i)
        parts, norm = attention(node, "self_attention", "encoder", i)
        weights.update(names.attention(f"{prefix}/self_attention", parts))
        ffn, ffn_norm = block_feedforward(node, "encoder", i)
        dff = ffn[0][0].shape[1] if dff is None else dff
        check_dff(ffn, dff, node, file_label)
        weights.update(names.block_rest(prefix, ffn, {"self_attention_layer_norm": norm,
                                               "feedforward_layer_norm": ffn_norm}))
    for i, node in enumerate(decoders):
        prefix = names.layer("decoder", i)
        parts, self_norm = attention(node, "causal_self_attention", "decoder", i)
        weights.update(names.attention(f"{prefix}/self_attention", parts))
        parts, cross_norm = attention(node, "cross_attention", "decoder", i)
        weights.update(names.attention(f"{prefix}/cross_attention", parts))
        ffn, ffn_norm = block_feedforward(node, "decoder", i)
        check_dff(ffn, dff, node, file_label)
        weights.update(names.block_rest(prefix, ffn, {"self_attention_layer_norm": self_norm,
                                               "cross_attention_layer_norm": cross_norm,
                                               "feedforward_layer_norm": ffn_norm}))
    for side, node in (("source", source_emb), ("target", target_emb)):
        table = node.array(0, "embeddings", file_label)
        if table.ndim != 2 or table.shape[1] != d_model:
            raise CheckpointError(f"{file_label}: the weight {node.label!r} has shape {table.shape}; "
                                  f"expected (vocabulary, {d_model}).")
        weights[names.token_embedding(side)] = table
    tgt_vocab = weights[names.token_embedding("target")].shape[0]
    if out_kernel.shape[1] != tgt_vocab:
        raise CheckpointError(
            f"{file_label}: the final Dense {final.label!r} has {out_kernel.shape[1]} outputs but "
            f"the target embedding has {tgt_vocab} rows; they are one vocabulary.")
    weights[f"{names.OUTPUT_PROJECTION}/kernel"] = out_kernel
    weights[f"{names.OUTPUT_PROJECTION}/bias"] = out_bias
    root.weights.check_all_used(f"the TensorFlow tutorial's Transformer ({len(encoders)} "
                                f"encoder and {len(decoders)} decoder layers)")
    config = dict(
        src_vocab_size=weights[names.token_embedding("source")].shape[0],
        tgt_vocab_size=tgt_vocab, d_model=d_model, num_heads=shape[0], head_dim=shape[1], dff=dff,
        num_encoder_layers=len(encoders), num_decoder_layers=len(decoders),
        max_len=TUTORIAL_POSITIONS, positional="sinusoidal_concat", scale_embeddings=True,
        activation="relu", layer_norm_epsilon=KERAS_LAYER_NORM_EPSILON, tie_output=False,
        output_bias=True, norm_first=False, share_embeddings=False, mask_padding=True,
        pad_source_to=0, source_start=True, source_end=True)
    return Architecture(config, weights, "keras-mha")



def tf_tutorial_tokenizers(source_vocab: bytes, target_vocab: bytes, source_name: str,
                           target_name: str, architecture: Architecture):
    """The tutorial's tf_text.BertTokenizer(vocab, lower_case=True) on each side."""
    from transformer.tokenizers.wordpiece import WordPieceTokenizer

    return (WordPieceTokenizer.from_vocabulary(source_vocab, lower_case=True, name=source_name),
            WordPieceTokenizer.from_vocabulary(target_vocab, lower_case=True, name=target_name))



def convert_tf_tutorial(weights, source_vocab, target_vocab, num_heads: int | None = None, *,
                        max_len: int | None = None, mask_padding: bool | None = None,
                        command: str | None = None, metadata: dict | None = None) -> OpenedModel:
    """The TF tutorial's Transformer -> OpenedModel. Vocabularies: WordPiece files with [PAD] [UNK]
    [START] [END]. max_len: positions covered (the tutorial's table has 2048). mask_padding:
    None = True, padded keys masked as the embedding's mask_zero intends (under Keras 2 every
    layer does so; under Keras 3.15 only the first encoder and decoder self-attention receive the
    mask, which matters only for padded batches, never for one sentence)."""
    return convert("tf-tutorial", weights, source_vocab, target_vocab, num_heads,
                    tf_tutorial_tokenizers, infer_tf_tutorial,
                    {"max_len": max_len, "mask_padding": mask_padding}, command, metadata)


