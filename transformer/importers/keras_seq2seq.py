"""The Keras recipe ``keras-seq2seq``: the Keras example "English-to-Spanish translation with a
sequence-to-sequence
    Transformer" in its two forms: keras.layers.MultiHeadAttention (key_dim = embed_dim per head:
    the heads are read from the kernels) and the notebook variant with a hand-written attention
    (q_linear, k_linear, v_linear, concat_linear; d_k = embed_dim // heads: --num-heads needed);
    and the "Transformer from scratch" English-to-French notebook this project grew from
    (../shared/seeds/002), whose blocks use the TF tutorial's outer names (global_self_attention,
    causal_self_attention, cross_attention, feed_forward, layer_norm_1..3) around the same
    hand-written attention, and whose target standardization keeps "¿". The forms are told apart
    by what is inside their attention layers (KERAS_FORMS). Learned positions (max_len =
    sequence_length), no embedding scaling, post-LayerNorm with Keras's epsilon 1e-3, a softmax
    Dense (our logits are its pre-softmax values), no padding mask (the example's Keras 3 form
    applies none but the look-ahead mask) and sources padded to sequence_length as
    TextVectorization pads them; the target vocabulary's "[start]"/"[end]" are the start and end
    ids, the source is plain words. Embeddings of max_tokens rows over a vocabulary of fewer words
    are kept whole (ids past the words are "[unused N]").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import (
    natural_key,
)
from transformer.core.text import quoted
from transformer.importers.keras_common import (
    KERAS_LAYER_NORM_EPSILON,
    KERAS_MHA_PARTS,
    LAYER_NORM_GROUP,
    Architecture,
    check_dff,
    convert,
    dense,
    feedforward,
    final_dense,
    handwritten_mha,
    is_handwritten_mha,
    is_keras_mha,
    keras_mha,
    layer_norm,
    model_width,
    ordered,
    split_embeddings,
    tree,
)
from transformer.importers.recipe import Form, Recipe
from transformer.inference.session import OpenedModel
from transformer.model import weights as names


@dataclass(frozen=True)
class KerasLayout:
    """The attribute names a Keras form's TransformerEncoder and TransformerDecoder give their
    layers (the names its weight files keep)."""
    encoder_attention: str
    decoder_self_attention: str
    decoder_cross_attention: str
    feedforward: str
    norms: tuple  # after self-attention, after cross-attention (decoder), after the feed-forward

    def encoders(self, nodes):
        """The encoder blocks: told by their attention and feed-forward (a block that lacks a
        LayerNormalization is still one, and the mapping names what it lacks)."""
        return ordered([n for n in nodes if n.child(self.encoder_attention)
                         and n.child(self.feedforward) and not n.child(self.decoder_cross_attention)])

    def decoders(self, nodes):
        return ordered([n for n in nodes if n.child(self.decoder_self_attention)
                         and n.child(self.decoder_cross_attention) and n.child(self.feedforward)])

    def norms_of(self, node, index, d_model, file_label, side):
        """[(gamma, beta)] of a block's LayerNormalizations, in the order of its sublayers; a
        missing one is an error naming the block and the sublayer it follows."""
        sublayers = (("self-attention", "feed-forward") if side == "encoder"
                     else ("self-attention", "cross-attention", "feed-forward"))
        groups = self.norms[:2] if side == "encoder" else self.norms
        return [layer_norm(node.need(group, f"LayerNormalization weights for its {sublayer}",
                                     file_label, LAYER_NORM_GROUP,
                                     owner=f"{side} layer {index + 1} ({quoted(node.in_file)})"),
                           d_model, file_label)
                for group, sublayer in zip(groups, sublayers)]


# The Keras example's layers (both of its attentions), and the "Transformer from scratch"
# English-to-French notebook's (../shared/seeds/002): the TF tutorial's outer names around a
# hand-written attention.
EXAMPLE_LAYOUT = KerasLayout("attention", "attention_1", "attention_2", "dense_proj",
                             ("layernorm_1", "layernorm_2", "layernorm_3"))
FROM_SCRATCH_LAYOUT = KerasLayout("global_self_attention", "causal_self_attention",
                                  "cross_attention", "feed_forward",
                                  ("layer_norm_1", "layer_norm_2", "layer_norm_3"))
RECIPE = Recipe(
    "keras-seq2seq", "Keras seq2seq example", "the Keras seq2seq example",
    "the Keras example \"English-to-Spanish translation with a sequence-to-sequence "
    "Transformer\"", ("English", "Spanish"),
    forms={
        "keras-mha": Form("the Keras example"),
        "handwritten-mha": Form("the Keras example with a hand-written attention",
                                "the hand-written attention form"),
        "from-scratch-notebook": Form(
            "the \"Transformer from scratch\" English-to-French notebook",
            "the \"Transformer from scratch\" English-to-French notebook",
            "the Keras notebook \"Transformer from scratch\" (English to French, the one this "
            "project grew from)", ("English", "French")),
    })
FORM_LABELS = {name: form.label for name, form in RECIPE.forms.items()}
# form -> (layout, attention): what each form of the keras-seq2seq recipe holds.
KERAS_FORMS = {
    "keras-mha": (EXAMPLE_LAYOUT, "keras"),
    "handwritten-mha": (EXAMPLE_LAYOUT, "handwritten"),
    "from-scratch-notebook": (FROM_SCRATCH_LAYOUT, "handwritten"),
}
_GENERIC = re.compile(r"^(layer(_with_weights)?-\d+|layers|vars)$")


def attention_kind(node) -> str | None:
    """What is inside an attention layer: "keras" (keras.layers.MultiHeadAttention's query_dense,
    key_dense, value_dense, output_dense), "handwritten" (q_linear, k_linear, v_linear,
    concat_linear) or None."""
    if is_keras_mha(node):
        return "keras"
    if is_handwritten_mha(node):
        return "handwritten"
    return None


def layers_found(root) -> str:
    """The names of the layers a file holds, for an error that says what is there when no
    recipe fits."""
    names = sorted({n.path[-1] for n in root.walk() if n.path and (n.children or n.variables)
                    and not _GENERIC.match(n.path[-1])}, key=natural_key)
    if not names:
        return "no named layers"
    shown = ", ".join(names[:24])
    return shown + (f" and {len(names) - 24} more" if len(names) > 24 else "")


def keras_form(nodes) -> tuple[str | None, list, list]:
    """(form, encoder nodes, decoder nodes) of the keras-seq2seq recipe: the layout whose blocks
    the file holds, told apart from the others (and from the TF tutorial, whose blocks wrap a
    keras MultiHeadAttention named "mha") by what is inside the blocks' attention layers."""
    for form, (layout, attention) in KERAS_FORMS.items():
        encoders, decoders = layout.encoders(nodes), layout.decoders(nodes)
        if encoders and decoders and \
                attention_kind(encoders[0].child(layout.encoder_attention)) == attention:
            return form, encoders, decoders
    return None, [], []


def infer_keras_seq2seq(arrays: dict[str, np.ndarray], file_label: str,
                        num_heads: int | None = None) -> Architecture:
    root = tree(arrays, file_label)
    nodes = list(root.walk())
    form, encoders, decoders = keras_form(nodes)
    if form is None:
        tutorial = recipe_of_weights(arrays)[0] == "tf-tutorial"
        raise CheckpointError(
            f"{file_label} does not hold the TransformerEncoder and TransformerDecoder of a "
            "Keras seq2seq form: the Keras example's (attention, dense_proj, layernorm_1..3 "
            "around keras MultiHeadAttention or q_linear, k_linear, v_linear, concat_linear) or "
            "the from-scratch notebook's (global_self_attention, causal_self_attention, "
            "cross_attention, feed_forward, layer_norm_1..3 around q_linear, k_linear, v_linear, "
            f"concat_linear). Its layers are: {layers_found(root)}"
            + ("; it looks like the TensorFlow tutorial's model: use the tf-tutorial recipe."
               if tutorial else "."))
    layout, kind = KERAS_FORMS[form]
    handwritten = kind == "handwritten"
    embeddings = [n for n in nodes if n.child("token_embeddings") and n.child("position_embeddings")]
    first_attention = encoders[0].child(layout.encoder_attention)
    d_model = model_width(first_attention.child("q_linear" if handwritten else "query_dense"),
                           2 if handwritten else 3, file_label)
    final = final_dense(root, [n.path for n in encoders + decoders + embeddings], d_model, file_label)
    out_kernel, out_bias = dense(final, file_label, d_model, None, "output Dense")
    source_emb, target_emb = split_embeddings(embeddings, encoders, decoders,
                                               out_kernel.shape[1], file_label,
                                               "PositionalEmbedding layers")
    weights, heads, head_dim = {}, None, None

    def attention(node):
        nonlocal heads, head_dim
        if not handwritten:
            if not any(node.child(part) for part in KERAS_MHA_PARTS):  # keras_mha names a lost one
                raise CheckpointError(f"{file_label}: {node.label!r} is not a keras MultiHeadAttention.")
            parts, h, k = keras_mha(node, d_model, file_label)
            if heads is not None and (h, k) != (heads, head_dim):
                raise CheckpointError(
                    f"{file_label}: the attention {node.label!r} has {h} heads of {k}, another "
                    f"has {heads} of {head_dim}; one model has one head size.")
            if num_heads is not None and num_heads != h:
                raise CheckpointError(
                    f"{file_label}: --num-heads is {num_heads} but the attention kernels hold {h} "
                    f"heads (query kernel {(d_model, h, k)}).")
            heads, head_dim = h, k
            return parts
        if not is_handwritten_mha(node):
            raise CheckpointError(f"{file_label}: {node.label!r} is not a hand-written attention.")
        return handwritten_mha(node, d_model, file_label)

    if handwritten:
        if num_heads is None:
            raise CheckpointError(
                f"{file_label} is a Keras seq2seq model with a hand-written attention (q_linear, "
                "k_linear, v_linear, concat_linear): its weights do not tell how many heads it "
                "has. Give it with --num-heads (num_heads=...), the value the model was built with.")
        if num_heads <= 0 or d_model % num_heads:
            raise CheckpointError(
                f"--num-heads {num_heads} does not divide embed_dim {d_model} (the hand-written "
                "attention has d_k = embed_dim // heads).")
        heads, head_dim = num_heads, d_model // num_heads

    dff = None
    for i, node in enumerate(encoders):
        prefix = names.layer("encoder", i)
        weights.update(names.attention(f"{prefix}/self_attention",
                       attention(node.child(layout.encoder_attention))))
        ffn = feedforward(node.child(layout.feedforward), d_model, file_label)
        dff = ffn[0][0].shape[1] if dff is None else dff
        check_dff(ffn, dff, node, file_label)
        first_norm, second_norm = layout.norms_of(node, i, d_model, file_label, "encoder")
        weights.update(names.block_rest(prefix, ffn, {"self_attention_layer_norm": first_norm,
                                               "feedforward_layer_norm": second_norm}))
    for i, node in enumerate(decoders):
        prefix = names.layer("decoder", i)
        weights.update(names.attention(f"{prefix}/self_attention",
                       attention(node.child(layout.decoder_self_attention))))
        weights.update(names.attention(f"{prefix}/cross_attention",
                       attention(node.child(layout.decoder_cross_attention))))
        ffn = feedforward(node.child(layout.feedforward), d_model, file_label)
        check_dff(ffn, dff, node, file_label)
        norms = layout.norms_of(node, i, d_model, file_label, "decoder")
        weights.update(names.block_rest(prefix, ffn, dict(zip(
            ("self_attention_layer_norm", "cross_attention_layer_norm", "feedforward_layer_norm"),
            norms))))

    lengths = {}
    for side, node in (("source", source_emb), ("target", target_emb)):
        tokens = node.child("token_embeddings").array(0, "embeddings", file_label)
        positions = node.child("position_embeddings").array(0, "embeddings", file_label)
        for what, array in (("token_embeddings", tokens), ("position_embeddings", positions)):
            if array.ndim != 2 or array.shape[1] != d_model:
                raise CheckpointError(
                    f"{file_label}: the weight {node.label + '/' + what!r} has shape "
                    f"{array.shape}; expected (rows, {d_model}).")
        weights[names.token_embedding(side)] = tokens
        weights[names.position_embedding(side)] = positions
        lengths[side] = positions.shape[0]
    if lengths["source"] != lengths["target"]:
        raise CheckpointError(
            f"{file_label}: the source PositionalEmbedding covers {lengths['source']} positions "
            f"and the target's {lengths['target']}; the example uses one sequence_length for both.")
    tgt_vocab = weights[names.token_embedding("target")].shape[0]
    if out_kernel.shape[1] != tgt_vocab:
        raise CheckpointError(
            f"{file_label}: the output Dense {final.label!r} has {out_kernel.shape[1]} outputs but "
            f"the target embedding has {tgt_vocab} rows; they are one vocabulary.")
    weights[f"{names.OUTPUT_PROJECTION}/kernel"] = out_kernel
    weights[f"{names.OUTPUT_PROJECTION}/bias"] = out_bias
    sequence_length = lengths["source"]
    root.weights.check_all_used(f"{FORM_LABELS[form]} ({len(encoders)} encoder and "
                                f"{len(decoders)} decoder layers)")
    config = dict(
        src_vocab_size=weights[names.token_embedding("source")].shape[0],
        tgt_vocab_size=tgt_vocab, d_model=d_model, num_heads=heads, head_dim=head_dim, dff=dff,
        num_encoder_layers=len(encoders), num_decoder_layers=len(decoders),
        max_len=sequence_length, positional="learned", scale_embeddings=False,
        activation="relu", layer_norm_epsilon=KERAS_LAYER_NORM_EPSILON, tie_output=False,
        output_bias=True, norm_first=False, share_embeddings=False, mask_padding=False,
        pad_source_to=sequence_length, source_start=False, source_end=False)
    return Architecture(config, weights, form)



# ------------------------------------------------------------------ tokenizers (one per recipe)
def keras_seq2seq_tokenizers(source_vocab: bytes, target_vocab: bytes, source_name: str,
                             target_name: str, architecture: Architecture):
    """The forms' TextVectorization layers: the source with the default standardization, the
    target with the form's custom_standardization ("[start]"/"[end]" kept; the Keras example also
    strips "¿"). Both forms size their embeddings by max_tokens, which may exceed the words the
    layer was adapted to: the tokenizer then covers the model's rows (ids past the file's words
    have no word)."""
    from transformer.tokenizers.word import WordTokenizer

    target_standardize = ("keras_from_scratch" if architecture.form == "from-scratch-notebook"
                          else "keras_seq2seq")
    c = architecture.config
    sides = ((source_vocab, source_name, "lower_and_strip_punctuation", None, None, c["src_vocab_size"]),
             (target_vocab, target_name, target_standardize, "[start]", "[end]", c["tgt_vocab_size"]))
    tokenizers = []
    for data, name, standardize, start, end, rows in sides:
        tok = WordTokenizer.from_vocabulary(data, standardize=standardize, start_token=start,
                                            end_token=end, name=name)
        if tok.vocab_size < rows:  # TextVectorization(max_tokens=rows) adapted on fewer words
            tok = WordTokenizer(tok.tokens, standardize=standardize, start_token=start,
                                end_token=end, name=name, vocab_size=rows)
        tokenizers.append(tok)
    return tuple(tokenizers)



def convert_keras_seq2seq(weights, source_vocab, target_vocab, num_heads: int | None = None, *,
                          command: str | None = None, metadata: dict | None = None) -> OpenedModel:
    """The Keras example (either form) -> OpenedModel. weights: a path or bytes of a .weights.h5 or
    .keras, a TF checkpoint's .index path or prefix, or {file name: bytes}; vocabularies: paths
    or bytes of TextVectorization.get_vocabulary() files. num_heads: needed for the hand-written
    attention only."""
    return convert("keras-seq2seq", weights, source_vocab, target_vocab, num_heads,
                    keras_seq2seq_tokenizers, infer_keras_seq2seq, {}, command, metadata)


def recipe_of_weights(arrays) -> tuple[str | None, str | None]:
    """(recipe, form) the weight names show: ("keras-seq2seq", a form of KERAS_FORMS),
    ("tf-tutorial", "keras-mha"), or (None, None) when they show neither. Only the names are
    read (arrays: {name: array} or the names). The recipes are told apart by what is inside
    their attention layers, not by the outer names they share (the from-scratch notebook and the
    tutorial both call theirs causal_self_attention and cross_attention): the tutorial wraps a
    keras MultiHeadAttention named "mha" with its own LayerNormalization."""
    nodes = list(tree({name: None for name in arrays}, "").walk())
    form = keras_form(nodes)[0]
    if form is not None:
        return "keras-seq2seq", form
    if any(n.path and n.path[-1] == "mha" and is_keras_mha(n) for n in nodes):
        return "tf-tutorial", "keras-mha"
    return None, None
