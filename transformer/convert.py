"""Convert translators other people trained into our checkpoints: recipes, inference, the CLI.

Recipes:

``keras-seq2seq``  the Keras example "English-to-Spanish translation with a sequence-to-sequence
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
``tf-tutorial``  the TensorFlow tutorial "Neural machine translation with a Transformer and Keras":
    embeddings times sqrt(d_model) plus [sin | cos] positions, keras MultiHeadAttention (heads
    from the kernels), LayerNormalization epsilon 1e-3, a logits Dense, WordPiece vocabularies
    framed with [START] ... [END].

Everything is read as data (transformer.readers) and the result is built through
checkpoint_bytes + load_checkpoint, so a converted model is validated exactly as an upload is.

    python -m transformer.convert keras-seq2seq --weights W --source-vocab S --target-vocab T \
        [--num-heads H] --out OUT.ckpt
    python -m transformer.convert tf-tutorial --weights W --source-vocab S --target-vocab T \
        [--num-heads H] --out OUT.ckpt
    python -m transformer.convert marian --model-dir D --out OUT.ckpt   (or --hub NAME)
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .checkpoint import (
    Checkpoint,
    CheckpointError,
    checkpoint_bytes,
    load_checkpoint,
    read_input,
)
from .readers import TF_DATA_SUFFIX, checkpoint_label, natural_key, read_weights, tf_checkpoint_prefix
from .tokenizer import TokenizerError

__all__ = ["convert_keras_seq2seq", "convert_tf_tutorial", "infer_keras_seq2seq",
           "infer_tf_tutorial", "detect_recipe", "recipe_of_weights", "is_weights_file",
           "RECIPES", "main"]

RECIPES = ("keras-seq2seq", "tf-tutorial", "marian")
KERAS_LAYER_NORM_EPSILON = 1e-3  # keras.layers.LayerNormalization's default
TUTORIAL_POSITIONS = 2048  # the tutorial's positional_encoding(length=2048, ...)
_NOISE = {"layers", "vars", ".ATTRIBUTES", "VARIABLE_VALUE"}
_INDEX = {"kernel": 0, "embeddings": 0, "gamma": 0, "bias": 1, "beta": 1}


# ------------------------------------------------------------------ the weights as a tree
@dataclass
class Node:
    """One layer (or container) of the original model: its child layers and its variables,
    numbered as Keras numbers them (kernel/embeddings/gamma 0, bias/beta 1)."""
    path: tuple = ()
    children: dict = field(default_factory=dict)
    variables: dict = field(default_factory=dict)  # index -> (name in the file, array)

    @property
    def label(self) -> str:
        return "/".join(self.path) or "(root)"

    def child(self, name):
        return self.children.get(name)

    def walk(self):
        yield self
        for key in sorted(self.children, key=natural_key):
            yield from self.children[key].walk()

    def array(self, index, what, file_label):
        if index not in self.variables:
            raise CheckpointError(f"{file_label}: the layer {self.label!r} has no {what}.")
        return self.variables[index][1]


def _tree(arrays: dict[str, np.ndarray], file_label: str) -> Node:
    root = Node()
    for name, array in arrays.items():
        parts = [p.lstrip("_") for p in name.split("/") if p and p not in _NOISE]
        if not parts:
            continue
        last = parts[-1]
        if last.isdigit():
            index = int(last)
        elif last in _INDEX:
            index = _INDEX[last]
        else:  # e.g. BatchNormalization statistics: not part of any recipe
            index = last
        node = root
        for part in parts[:-1]:
            node = node.children.setdefault(part, Node(node.path + (part,)))
        node.variables[index] = (name, array)
    return root


def _ordered(nodes):
    return sorted(nodes, key=lambda n: [natural_key(p) for p in n.path])


def _dense(node, file_label, in_dim=None, out_dim=None, what="Dense layer"):
    """(kernel (in, out), bias (out,)) of a Dense node, checked."""
    kernel = node.array(0, "kernel", file_label)
    bias = node.variables.get(1, (None, None))[1]
    if kernel.ndim != 2 or (bias is not None and bias.shape != (kernel.shape[1],)):
        raise CheckpointError(
            f"{file_label}: the {what} {node.label!r} has a kernel {kernel.shape} and bias "
            f"{None if bias is None else bias.shape}; expected (in, out) and (out,).")
    for expected, got, side in ((in_dim, kernel.shape[0], "inputs"), (out_dim, kernel.shape[1], "outputs")):
        if expected is not None and got != expected:
            raise CheckpointError(
                f"{file_label}: the {what} {node.label!r} has {got} {side} (kernel "
                f"{kernel.shape}) but {expected} were expected.")
    if bias is None:
        bias = np.zeros(kernel.shape[1], np.float32)
    return kernel, bias


def _layer_norm(node, d_model, file_label):
    gamma = node.array(0, "gamma", file_label)
    beta = node.array(1, "beta", file_label)
    if gamma.shape != (d_model,) or beta.shape != (d_model,):
        raise CheckpointError(
            f"{file_label}: the LayerNormalization {node.label!r} has gamma {gamma.shape} and "
            f"beta {beta.shape}; expected ({d_model},) (d_model).")
    return gamma, beta


# ------------------------------------------------------------------ attention
def _keras_mha(node, d_model, file_label):
    """keras.layers.MultiHeadAttention -> ({query,key,value,output}: (kernel, bias)), heads, head_dim.

    query/key/value kernels (d_model, H, key_dim) -> (d_model, H * key_dim), biases (H, key_dim)
    -> (H * key_dim,); the output kernel (H, key_dim, d_model) -> (H * key_dim, d_model)."""
    parts = {}
    query = node.child("query_dense")
    kernel = query.array(0, "kernel", file_label)
    if kernel.ndim != 3 or kernel.shape[0] != d_model:
        raise CheckpointError(
            f"{file_label}: the attention {node.label!r} has a query kernel {kernel.shape}; "
            f"keras MultiHeadAttention's is (d_model = {d_model}, heads, key_dim).")
    _, heads, head_dim = kernel.shape
    width = heads * head_dim
    for ours, theirs in (("query", "query_dense"), ("key", "key_dense"), ("value", "value_dense")):
        sub = node.child(theirs)
        k = sub.array(0, "kernel", file_label)
        b = sub.variables.get(1, (None, np.zeros((heads, head_dim), np.float32)))[1]
        if k.shape != (d_model, heads, head_dim) or b.shape != (heads, head_dim):
            raise CheckpointError(
                f"{file_label}: the weight {sub.label!r} has kernel {k.shape} and bias {b.shape}; "
                f"expected {(d_model, heads, head_dim)} and {(heads, head_dim)} like the query's.")
        parts[ours] = (k.reshape(d_model, width), b.reshape(width))
    out = node.child("output_dense")
    k = out.array(0, "kernel", file_label)
    b = out.variables.get(1, (None, np.zeros(d_model, np.float32)))[1]
    if k.shape != (heads, head_dim, d_model) or b.shape != (d_model,):
        raise CheckpointError(
            f"{file_label}: the weight {out.label!r} has kernel {k.shape} and bias {b.shape}; "
            f"expected {(heads, head_dim, d_model)} and {(d_model,)}.")
    parts["output"] = (k.reshape(width, d_model), b)
    return parts, heads, head_dim


def _handwritten_mha(node, d_model, file_label):
    """The notebook variant: q_linear, k_linear, v_linear, concat_linear, all (d_model, d_model)."""
    parts = {}
    for ours, theirs in (("query", "q_linear"), ("key", "k_linear"), ("value", "v_linear"),
                         ("output", "concat_linear")):
        parts[ours] = _dense(node.child(theirs), file_label, d_model, d_model, "attention Dense")
    return parts


def _is_keras_mha(node):
    return node is not None and all(node.child(n) for n in
                                    ("query_dense", "key_dense", "value_dense", "output_dense"))


def _is_handwritten_mha(node):
    return node is not None and all(node.child(n) for n in
                                    ("q_linear", "k_linear", "v_linear", "concat_linear"))


def _sequential_denses(node, file_label):
    """The Dense layers of a keras.Sequential, in order."""
    denses = [n for n in _ordered(node.children.values()) if 0 in n.variables]
    if len(denses) != 2:
        raise CheckpointError(
            f"{file_label}: the feed-forward {node.label!r} has {len(denses)} Dense layers; "
            "expected 2 (Dense(dff, relu), Dense(d_model)).")
    return denses


# ------------------------------------------------------------------ architecture
@dataclass
class Architecture:
    """What the weights say (and the flags add): sizes and our weights by name."""
    config: dict
    weights: dict
    form: str
    notes: list = field(default_factory=list)


def _feedforward(node, d_model, file_label):
    first, second = _sequential_denses(node, file_label)
    k1, b1 = _dense(first, file_label, d_model, None, "feed-forward Dense")
    k2, b2 = _dense(second, file_label, k1.shape[1], d_model, "feed-forward Dense")
    return (k1, b1), (k2, b2)


def _put_attention(weights, prefix, parts):
    for name, (kernel, bias) in parts.items():
        weights[f"{prefix}/{name}/kernel"] = kernel
        weights[f"{prefix}/{name}/bias"] = bias


def _put_block_rest(weights, prefix, ffn, norms):
    (k1, b1), (k2, b2) = ffn
    weights[f"{prefix}/feedforward/intermediate/kernel"] = k1
    weights[f"{prefix}/feedforward/intermediate/bias"] = b1
    weights[f"{prefix}/feedforward/output/kernel"] = k2
    weights[f"{prefix}/feedforward/output/bias"] = b2
    for name, (gamma, beta) in norms.items():
        weights[f"{prefix}/{name}/gamma"] = gamma
        weights[f"{prefix}/{name}/beta"] = beta


def _side_of(node, encoders, decoders):
    """"source" or "target" for an embedding node: the stack whose layers share more of its path
    (the Keras example's decoder is a nested Model); None when it cannot tell."""
    def shared(other):
        n = 0
        for a, b in zip(node.path, other.path):
            if a != b:
                break
            n += 1
        return n
    to_encoder = max((shared(e) for e in encoders), default=0)
    to_decoder = max((shared(d) for d in decoders), default=0)
    if to_encoder == to_decoder:
        return None
    return "source" if to_encoder > to_decoder else "target"


def _split_embeddings(embeddings, encoders, decoders, target_vocab, file_label, what):
    """(source node, target node) among two embedding nodes."""
    if len(embeddings) != 2:
        raise CheckpointError(
            f"{file_label}: found {len(embeddings)} {what}; a translator has 2 (source and "
            "target). Is this the right recipe?")
    sides = [_side_of(e, encoders, decoders) for e in embeddings]
    if sides.count(None) == 1:  # one side is known: the other embedding is the other side
        known = next(s for s in sides if s)
        sides = [s or ("source" if known == "target" else "target") for s in sides]
    if sorted(s for s in sides if s) == ["source", "target"]:
        return tuple(e for s in ("source", "target") for e, side in zip(embeddings, sides) if side == s)
    rows = [_token_table(e, file_label).shape[0] for e in embeddings]
    matches = [e for e, r in zip(embeddings, rows) if r == target_vocab]
    if len(matches) == 1:  # the target's vocabulary is the output layer's
        target = matches[0]
        return next(e for e in embeddings if e is not target), target
    return tuple(_ordered(embeddings))  # created source first, as both originals do


def _token_table(node, file_label):
    """The token embedding matrix of an embedding node (the example's PositionalEmbedding holds
    token_embeddings; the tutorial's node is the Embedding itself)."""
    token = node.child("token_embeddings") or node
    table = token.array(0, "embeddings", file_label)
    if table.ndim != 2:
        raise CheckpointError(f"{file_label}: the weight {token.label!r} has shape "
                              f"{table.shape}; expected (vocabulary, d_model).")
    return table


def _model_width(node, ndim, file_label):
    """d_model: the inputs of the first attention's query kernel, which has `ndim` dimensions."""
    kernel = node.array(0, "kernel", file_label)
    if kernel.ndim != ndim or not kernel.shape[0]:
        raise CheckpointError(f"{file_label}: the query kernel of {node.label!r} has shape "
                              f"{kernel.shape}; expected {ndim} dimensions, the first d_model.")
    return kernel.shape[0]


def _final_dense(root, used, d_model, file_label):
    candidates = [n for n in root.walk() if n.path and 0 in n.variables
                  and not any(n.path[:len(u)] == u for u in used)]
    denses = [n for n in candidates if n.variables[0][1].ndim == 2 and n.variables[0][1].shape[0] == d_model]
    if len(denses) != 1:
        raise CheckpointError(
            f"{file_label}: expected one output Dense layer (d_model = {d_model} inputs) besides "
            f"the encoder and decoder; found {len(denses)}"
            + (f" ({', '.join(n.label for n in denses)[:200]})" if denses else "") + ".")
    return denses[0]


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
        return _ordered([n for n in nodes if n.child(self.encoder_attention)
                         and n.child(self.feedforward) and n.child(self.norms[0])
                         and n.child(self.norms[1]) and not n.child(self.decoder_cross_attention)])

    def decoders(self, nodes):
        return _ordered([n for n in nodes if n.child(self.decoder_self_attention)
                         and n.child(self.decoder_cross_attention) and n.child(self.feedforward)
                         and all(n.child(name) for name in self.norms)])


# The Keras example's layers (both of its attentions), and the "Transformer from scratch"
# English-to-French notebook's (../shared/seeds/002): the TF tutorial's outer names around a
# hand-written attention.
EXAMPLE_LAYOUT = KerasLayout("attention", "attention_1", "attention_2", "dense_proj",
                             ("layernorm_1", "layernorm_2", "layernorm_3"))
FROM_SCRATCH_LAYOUT = KerasLayout("global_self_attention", "causal_self_attention",
                                  "cross_attention", "feed_forward",
                                  ("layer_norm_1", "layer_norm_2", "layer_norm_3"))
FORM_LABELS = {
    "keras-mha": "the Keras example",
    "handwritten-mha": "the Keras example with a hand-written attention",
    "from-scratch-notebook": "the \"Transformer from scratch\" English-to-French notebook",
}
# form -> (layout, attention): what each form of the keras-seq2seq recipe holds.
KERAS_FORMS = {
    "keras-mha": (EXAMPLE_LAYOUT, "keras"),
    "handwritten-mha": (EXAMPLE_LAYOUT, "handwritten"),
    "from-scratch-notebook": (FROM_SCRATCH_LAYOUT, "handwritten"),
}
_GENERIC = re.compile(r"^(layer(_with_weights)?-\d+|layers|vars)$")


def _attention_kind(node) -> str | None:
    """What is inside an attention layer: "keras" (keras.layers.MultiHeadAttention's query_dense,
    key_dense, value_dense, output_dense), "handwritten" (q_linear, k_linear, v_linear,
    concat_linear) or None."""
    if _is_keras_mha(node):
        return "keras"
    if _is_handwritten_mha(node):
        return "handwritten"
    return None


def _layers_found(root) -> str:
    """The names of the layers a file holds, for a sentence that says what is there when no
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
                _attention_kind(encoders[0].child(layout.encoder_attention)) == attention:
            return form, encoders, decoders
    return None, [], []


def infer_keras_seq2seq(arrays: dict[str, np.ndarray], file_label: str,
                        num_heads: int | None = None) -> Architecture:
    root = _tree(arrays, file_label)
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
            f"concat_linear). Its layers are: {_layers_found(root)}"
            + ("; it looks like the TensorFlow tutorial's model: use the tf-tutorial recipe."
               if tutorial else "."))
    layout, kind = KERAS_FORMS[form]
    handwritten = kind == "handwritten"
    embeddings = [n for n in nodes if n.child("token_embeddings") and n.child("position_embeddings")]
    first_attention = encoders[0].child(layout.encoder_attention)
    d_model = _model_width(first_attention.child("q_linear" if handwritten else "query_dense"),
                           2 if handwritten else 3, file_label)
    final = _final_dense(root, [n.path for n in encoders + decoders + embeddings], d_model, file_label)
    out_kernel, out_bias = _dense(final, file_label, d_model, None, "output Dense")
    source_emb, target_emb = _split_embeddings(embeddings, encoders, decoders,
                                               out_kernel.shape[1], file_label,
                                               "PositionalEmbedding layers")
    weights, heads, head_dim = {}, None, None

    def attention(node):
        nonlocal heads, head_dim
        if not handwritten:
            if not _is_keras_mha(node):
                raise CheckpointError(f"{file_label}: {node.label!r} is not a keras MultiHeadAttention.")
            parts, h, k = _keras_mha(node, d_model, file_label)
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
        if not _is_handwritten_mha(node):
            raise CheckpointError(f"{file_label}: {node.label!r} is not a hand-written attention.")
        return _handwritten_mha(node, d_model, file_label)

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
        prefix = f"encoder_layer_{i}"
        _put_attention(weights, f"{prefix}/self_attention",
                       attention(node.child(layout.encoder_attention)))
        ffn = _feedforward(node.child(layout.feedforward), d_model, file_label)
        dff = ffn[0][0].shape[1] if dff is None else dff
        _check_dff(ffn, dff, node, file_label)
        first_norm, second_norm = (_layer_norm(node.child(name), d_model, file_label)
                                   for name in layout.norms[:2])
        _put_block_rest(weights, prefix, ffn, {"self_attention_layer_norm": first_norm,
                                               "feedforward_layer_norm": second_norm})
    for i, node in enumerate(decoders):
        prefix = f"decoder_layer_{i}"
        _put_attention(weights, f"{prefix}/self_attention",
                       attention(node.child(layout.decoder_self_attention)))
        _put_attention(weights, f"{prefix}/cross_attention",
                       attention(node.child(layout.decoder_cross_attention)))
        ffn = _feedforward(node.child(layout.feedforward), d_model, file_label)
        _check_dff(ffn, dff, node, file_label)
        norms = [_layer_norm(node.child(name), d_model, file_label) for name in layout.norms]
        _put_block_rest(weights, prefix, ffn, dict(zip(
            ("self_attention_layer_norm", "cross_attention_layer_norm", "feedforward_layer_norm"),
            norms)))

    lengths = {}
    for side, node in (("source", source_emb), ("target", target_emb)):
        tokens = node.child("token_embeddings").array(0, "embeddings", file_label)
        positions = node.child("position_embeddings").array(0, "embeddings", file_label)
        for what, array in (("token_embeddings", tokens), ("position_embeddings", positions)):
            if array.ndim != 2 or array.shape[1] != d_model:
                raise CheckpointError(
                    f"{file_label}: the weight {node.label + '/' + what!r} has shape "
                    f"{array.shape}; expected (rows, {d_model}).")
        weights[f"{side}_embedding/{side}_token_embedding/embeddings"] = tokens
        weights[f"{side}_embedding/position_embedding/embeddings"] = positions
        lengths[side] = positions.shape[0]
    if lengths["source"] != lengths["target"]:
        raise CheckpointError(
            f"{file_label}: the source PositionalEmbedding covers {lengths['source']} positions "
            f"and the target's {lengths['target']}; the example uses one sequence_length for both.")
    tgt_vocab = weights["target_embedding/target_token_embedding/embeddings"].shape[0]
    if out_kernel.shape[1] != tgt_vocab:
        raise CheckpointError(
            f"{file_label}: the output Dense {final.label!r} has {out_kernel.shape[1]} outputs but "
            f"the target embedding has {tgt_vocab} rows; they are one vocabulary.")
    weights["output_projection/kernel"] = out_kernel
    weights["output_projection/bias"] = out_bias
    sequence_length = lengths["source"]
    config = dict(
        src_vocab_size=weights["source_embedding/source_token_embedding/embeddings"].shape[0],
        tgt_vocab_size=tgt_vocab, d_model=d_model, num_heads=heads, head_dim=head_dim, dff=dff,
        num_encoder_layers=len(encoders), num_decoder_layers=len(decoders),
        max_len=sequence_length, positional="learned", scale_embeddings=False,
        activation="relu", layer_norm_epsilon=KERAS_LAYER_NORM_EPSILON, tie_output=False,
        output_bias=True, norm_first=False, share_embeddings=False, mask_padding=False,
        pad_source_to=sequence_length, source_start=False, source_end=False)
    return Architecture(config, weights, form)


def _check_dff(ffn, dff, node, file_label):
    if ffn[0][0].shape[1] != dff:
        raise CheckpointError(
            f"{file_label}: the feed-forward of {node.label!r} is {ffn[0][0].shape[1]} wide, "
            f"another layer's is {dff}; one model has one dff.")


def infer_tf_tutorial(arrays: dict[str, np.ndarray], file_label: str,
                      num_heads: int | None = None) -> Architecture:
    root = _tree(arrays, file_label)
    nodes = list(root.walk())
    encoders = _ordered([n for n in nodes if n.child("self_attention") and n.child("ffn")])
    decoders = _ordered([n for n in nodes if n.child("causal_self_attention")
                         and n.child("cross_attention") and n.child("ffn")])
    if not encoders or not decoders or not _is_keras_mha(
            encoders[0].child("self_attention").child("mha")):
        form = keras_form(nodes)[0]
        raise CheckpointError(
            f"{file_label} does not hold the TensorFlow tutorial's EncoderLayer and DecoderLayer "
            "(self_attention, causal_self_attention, cross_attention, each around a keras "
            f"MultiHeadAttention named mha, and ffn). Its layers are: {_layers_found(root)}"
            + (f"; it looks like a Keras seq2seq model ({FORM_LABELS[form]}): use the "
               "keras-seq2seq recipe." if form else "."))
    embeddings = [n.child("pos_embedding").child("embedding") for n in nodes
                  if n.child("pos_embedding") and n.child("pos_embedding").child("embedding")]
    first = encoders[0].child("self_attention").child("mha")
    d_model = _model_width(first.child("query_dense"), 3, file_label)
    final = _final_dense(root, [n.path for n in encoders + decoders + embeddings], d_model, file_label)
    out_kernel, out_bias = _dense(final, file_label, d_model, None, "final Dense")
    source_emb, target_emb = _split_embeddings(embeddings, encoders, decoders, out_kernel.shape[1],
                                               file_label, "PositionalEmbedding layers")
    weights, shape, dff = {}, None, None

    def attention(node, what):
        nonlocal shape
        mha = node.child(what) and node.child(what).child("mha")
        if not _is_keras_mha(mha):
            raise CheckpointError(f"{file_label}: {node.label + '/' + what!r} has no keras "
                                  "MultiHeadAttention (mha).")
        parts, h, k = _keras_mha(mha, d_model, file_label)
        if shape is not None and (h, k) != shape:
            raise CheckpointError(f"{file_label}: the attention {mha.label!r} has {h} heads of {k}, "
                                  f"another has {shape[0]} of {shape[1]}.")
        if num_heads is not None and num_heads != h:
            raise CheckpointError(f"{file_label}: --num-heads is {num_heads} but the attention "
                                  f"kernels hold {h} heads (query kernel {(d_model, h, k)}).")
        shape = (h, k)
        return parts, _layer_norm(node.child(what).child("layernorm"), d_model, file_label)

    def feedforward(node):
        ffn = node.child("ffn")
        if not ffn.child("seq") or not ffn.child("layer_norm"):
            raise CheckpointError(f"{file_label}: {ffn.label!r} is not the tutorial's FeedForward "
                                  "(seq, layer_norm).")
        return _feedforward(ffn.child("seq"), d_model, file_label), \
            _layer_norm(ffn.child("layer_norm"), d_model, file_label)

    for i, node in enumerate(encoders):
        prefix = f"encoder_layer_{i}"
        parts, norm = attention(node, "self_attention")
        _put_attention(weights, f"{prefix}/self_attention", parts)
        ffn, ffn_norm = feedforward(node)
        dff = ffn[0][0].shape[1] if dff is None else dff
        _check_dff(ffn, dff, node, file_label)
        _put_block_rest(weights, prefix, ffn, {"self_attention_layer_norm": norm,
                                               "feedforward_layer_norm": ffn_norm})
    for i, node in enumerate(decoders):
        prefix = f"decoder_layer_{i}"
        parts, self_norm = attention(node, "causal_self_attention")
        _put_attention(weights, f"{prefix}/self_attention", parts)
        parts, cross_norm = attention(node, "cross_attention")
        _put_attention(weights, f"{prefix}/cross_attention", parts)
        ffn, ffn_norm = feedforward(node)
        _check_dff(ffn, dff, node, file_label)
        _put_block_rest(weights, prefix, ffn, {"self_attention_layer_norm": self_norm,
                                               "cross_attention_layer_norm": cross_norm,
                                               "feedforward_layer_norm": ffn_norm})
    for side, node in (("source", source_emb), ("target", target_emb)):
        table = node.array(0, "embeddings", file_label)
        if table.ndim != 2 or table.shape[1] != d_model:
            raise CheckpointError(f"{file_label}: the weight {node.label!r} has shape {table.shape}; "
                                  f"expected (vocabulary, {d_model}).")
        weights[f"{side}_embedding/{side}_token_embedding/embeddings"] = table
    tgt_vocab = weights["target_embedding/target_token_embedding/embeddings"].shape[0]
    if out_kernel.shape[1] != tgt_vocab:
        raise CheckpointError(
            f"{file_label}: the final Dense {final.label!r} has {out_kernel.shape[1]} outputs but "
            f"the target embedding has {tgt_vocab} rows; they are one vocabulary.")
    weights["output_projection/kernel"] = out_kernel
    weights["output_projection/bias"] = out_bias
    config = dict(
        src_vocab_size=weights["source_embedding/source_token_embedding/embeddings"].shape[0],
        tgt_vocab_size=tgt_vocab, d_model=d_model, num_heads=shape[0], head_dim=shape[1], dff=dff,
        num_encoder_layers=len(encoders), num_decoder_layers=len(decoders),
        max_len=TUTORIAL_POSITIONS, positional="sinusoidal_concat", scale_embeddings=True,
        activation="relu", layer_norm_epsilon=KERAS_LAYER_NORM_EPSILON, tie_output=False,
        output_bias=True, norm_first=False, share_embeddings=False, mask_padding=True,
        pad_source_to=0, source_start=True, source_end=True)
    return Architecture(config, weights, "keras-mha")


# ------------------------------------------------------------------ tokenizers (one per recipe)
def keras_seq2seq_tokenizers(source_vocab: bytes, target_vocab: bytes, source_name: str,
                             target_name: str, architecture: Architecture):
    """The forms' TextVectorization layers: the source with the default standardization, the
    target with the form's custom_standardization ("[start]"/"[end]" kept; the Keras example also
    strips "¿"). Both forms size their embeddings by max_tokens, which may exceed the words the
    layer was adapted to: the tokenizer then covers the model's rows (ids past the file's words
    have no word)."""
    from .word_tokenizer import WordTokenizer

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


def tf_tutorial_tokenizers(source_vocab: bytes, target_vocab: bytes, source_name: str,
                           target_name: str, architecture: Architecture):
    """The tutorial's tf_text.BertTokenizer(vocab, lower_case=True) on each side."""
    from .wordpiece_tokenizer import WordPieceTokenizer

    return (WordPieceTokenizer.from_vocabulary(source_vocab, lower_case=True, name=source_name),
            WordPieceTokenizer.from_vocabulary(target_vocab, lower_case=True, name=target_name))


# ------------------------------------------------------------------ conversion
def _read_input(source, default_name):
    """(bytes or {name: bytes} / path for the readers, label, [(file name, sha256)])."""
    if isinstance(source, dict):
        files = {str(k): read_input(v, repr(str(k)), allow_empty=True) for k, v in source.items()}
        index = [k for k in files if k.endswith(".index")]  # a TF checkpoint: its prefix
        label = checkpoint_label(index[0][:-len(".index")]) if index else \
            ", ".join(Path(k).name for k in files)
        return files, label, \
            [(Path(k).name, hashlib.sha256(v).hexdigest()) for k, v in files.items()]
    if isinstance(source, (str, Path)):
        path = Path(source)
        prefix = tf_checkpoint_prefix(path)
        if prefix is not None:
            names = [prefix + ".index", prefix + TF_DATA_SUFFIX]
            files = {n: read_input(Path(n), repr(Path(n).name), allow_empty=True) for n in names}
            return files, checkpoint_label(prefix), \
                [(Path(k).name, hashlib.sha256(v).hexdigest()) for k, v in files.items()]
        data = read_input(path, repr(path.name), allow_empty=True)
        return {path.name: data}, path.name, [(path.name, hashlib.sha256(data).hexdigest())]
    data = read_input(source, f"the {default_name}", allow_empty=True)
    return {default_name: data}, default_name, [(default_name, hashlib.sha256(data).hexdigest())]


def _convert(recipe, weights, source_vocab, target_vocab, num_heads, make_tokenizers, infer,
             overrides, command, extra_metadata):
    from .config import TransformerConfig
    from .model import Transformer

    files, label, hashes = _read_input(weights, "weights")
    arrays = read_weights(files)
    architecture = infer(arrays, repr(label), num_heads)  # messages start with the file's name
    src_data, src_label, src_hash = _read_input(source_vocab, "source vocabulary")
    tgt_data, tgt_label, tgt_hash = _read_input(target_vocab, "target vocabulary")
    try:
        source_tok, target_tok = make_tokenizers(next(iter(src_data.values())),
                                                 next(iter(tgt_data.values())), src_label,
                                                 tgt_label, architecture)
    except TokenizerError as err:  # the message names the file
        raise CheckpointError(f"A vocabulary file is invalid: {str(err).rstrip('.')}.") from None
    c = architecture.config
    for tok, tok_label, size, side in ((source_tok, src_label, c["src_vocab_size"], "source"),
                                       (target_tok, tgt_label, c["tgt_vocab_size"], "target")):
        if tok.vocab_size != size:
            emb = f"{side}_embedding/{side}_token_embedding/embeddings"
            raise CheckpointError(
                f"The {side} vocabulary {tok_label!r} has {tok.vocab_size} tokens but the "
                f"{side} token embedding in {label!r} has {size} rows ({emb}); give the "
                "vocabulary the model was trained with.")
    c.update(pad_id=target_tok.pad_id, start_id=target_tok.start_id, end_id=target_tok.end_id)
    if source_tok.pad_id != target_tok.pad_id:
        raise CheckpointError(f"The source vocabulary {src_label!r} pads with id "
                              f"{source_tok.pad_id}, the target's {tgt_label!r} with "
                              f"{target_tok.pad_id}; the model has one padding id.")
    c.update({k: v for k, v in overrides.items() if v is not None})
    try:
        config = TransformerConfig(**c)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"The model {label!r} describes cannot be built here: {err}.") from None
    model = Transformer(config).build_weights()
    _assign(model, architecture.weights, repr(label))
    metadata = {
        "name": Path(label).stem.replace(".weights", "") or recipe,
        "source": {"recipe": recipe, "form": architecture.form,
                   "files": [{"role": role, "name": n, "sha256": h}
                             for role, items in (("weights", hashes), ("source vocabulary", src_hash),
                                                 ("target vocabulary", tgt_hash))
                             for n, h in items],
                   "command": command or ""},
        **(extra_metadata or {}),
    }
    return load_checkpoint(checkpoint_bytes(model, source_tok, target_tok, metadata))


def _assign(model, weights, label):
    from .checkpoint import weight_arrays

    ours = weight_arrays(model)
    missing = sorted(set(ours) - set(weights))
    if missing:
        raise CheckpointError(f"{label}: nothing in the file gives our weight {missing[0]!r}.")
    extra = sorted(set(weights) - set(ours))
    if extra:
        raise CheckpointError(f"{label}: the converted weight {extra[0]!r} has no place in the model.")
    prefix = model.name + "/"
    for variable in model.weights:
        name = variable.path[len(prefix):] if variable.path.startswith(prefix) else variable.path
        value = weights[name]
        if tuple(value.shape) != tuple(variable.shape):
            raise CheckpointError(f"{label}: the weight {name!r} is {value.shape} in the file but "
                                  f"{tuple(variable.shape)} in the model.")
        variable.assign(value.astype(np.float32))


def convert_keras_seq2seq(weights, source_vocab, target_vocab, num_heads: int | None = None, *,
                          command: str | None = None, metadata: dict | None = None) -> Checkpoint:
    """The Keras example (either form) -> Checkpoint. weights: a path or bytes of a .weights.h5 or
    .keras, a TF checkpoint's .index path or prefix, or {file name: bytes}; vocabularies: paths
    or bytes of TextVectorization.get_vocabulary() files. num_heads: needed for the hand-written
    attention only."""
    return _convert("keras-seq2seq", weights, source_vocab, target_vocab, num_heads,
                    keras_seq2seq_tokenizers, infer_keras_seq2seq, {}, command, metadata)


def convert_tf_tutorial(weights, source_vocab, target_vocab, num_heads: int | None = None, *,
                        max_len: int | None = None, mask_padding: bool | None = None,
                        command: str | None = None, metadata: dict | None = None) -> Checkpoint:
    """The TF tutorial's Transformer -> Checkpoint. Vocabularies: WordPiece files with [PAD] [UNK]
    [START] [END]. max_len: positions covered (the tutorial's table has 2048). mask_padding:
    None = True, padded keys masked as the embedding's mask_zero intends (under Keras 2 every
    layer does so; under Keras 3.15 only the first encoder and decoder self-attention receive the
    mask, which matters only for padded batches, never for one sentence)."""
    return _convert("tf-tutorial", weights, source_vocab, target_vocab, num_heads,
                    tf_tutorial_tokenizers, infer_tf_tutorial,
                    {"max_len": max_len, "mask_padding": mask_padding}, command, metadata)


# ------------------------------------------------------------------ which recipe
WEIGHT_SUFFIXES = (".h5", ".hdf5", ".keras", ".index")  # a Keras weights file, a TF checkpoint
MARIAN_FILES = ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json")


def is_weights_file(name: str) -> bool:
    """Whether a file name is a weights file of the Keras/TF recipes (.weights.h5, .h5, .keras, a
    TF checkpoint's .index or .data-NNNNN-of-NNNNN)."""
    name = Path(str(name)).name.lower()
    return name.endswith(WEIGHT_SUFFIXES) or ".data-" in name and "-of-" in name


def recipe_of_weights(arrays) -> tuple[str | None, str | None]:
    """(recipe, form) the weight names show: ("keras-seq2seq", a form of KERAS_FORMS),
    ("tf-tutorial", "keras-mha"), or (None, None) when they show neither. Only the names are
    read (arrays: {name: array} or the names). The recipes are told apart by what is inside
    their attention layers, not by the outer names they share (the from-scratch notebook and the
    tutorial both call theirs causal_self_attention and cross_attention): the tutorial wraps a
    keras MultiHeadAttention named "mha" with its own LayerNormalization."""
    nodes = list(_tree({name: None for name in arrays}, "").walk())
    form = keras_form(nodes)[0]
    if form is not None:
        return "keras-seq2seq", form
    if any(n.path and n.path[-1] == "mha" and _is_keras_mha(n) for n in nodes):
        return "tf-tutorial", "keras-mha"
    return None, None


def detect_recipe(files) -> str | None:
    """The recipe a set of files is for ({file name: bytes}): "marian" when a Marian model's
    files are among them (config.json, model.safetensors, *.spm, vocab.json); "keras-seq2seq" or
    "tf-tutorial" when a weights file's names show it; None when nothing tells (or the weights
    cannot be read: converting them says why)."""
    names = {Path(str(n)).name for n in files}
    if names & set(MARIAN_FILES):
        return "marian"
    weights = {n: v for n, v in files.items() if is_weights_file(n)}
    if not weights:
        return None
    try:
        arrays = read_weights(weights)
    except CheckpointError:
        return None
    return recipe_of_weights(arrays)[0]


# ------------------------------------------------------------------ CLI
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer.convert",
        description="Convert a translator trained with someone else's code into a checkpoint.")
    sub = parser.add_subparsers(dest="recipe", required=True)
    for recipe, text in (("keras-seq2seq", "the Keras English-to-Spanish example (either form) "
                                           "or the 'Transformer from scratch' English-to-French "
                                           "notebook"),
                         ("tf-tutorial", "the TensorFlow 'Transformer and Keras' tutorial")):
        p = sub.add_parser(recipe, help=text)
        p.add_argument("--weights", required=True,
                       help=".weights.h5, .keras, or a TF checkpoint's .index file (or its prefix, "
                            "or the folder ModelCheckpoint wrote it in)")
        p.add_argument("--source-vocab", required=True, help="source vocabulary file")
        p.add_argument("--target-vocab", required=True, help="target vocabulary file")
        p.add_argument("--num-heads", type=int, default=None,
                       help="number of attention heads (needed when the weights do not tell)")
        p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
        if recipe == "tf-tutorial":
            p.add_argument("--max-len", type=int, default=None,
                           help=f"positions covered (default {TUTORIAL_POSITIONS}, the tutorial's)")
            p.add_argument("--mask-padding", choices=("yes", "no"), default=None,
                           help="mask padded keys (default yes, as the tutorial's mask_zero intends)")
    p = sub.add_parser("marian", help="a Hugging Face MarianMT model")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--model-dir", help="a folder with config.json, the weights and vocabularies")
    where.add_argument("--hub", help="a model name on the Hugging Face Hub (downloads it)")
    p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
    return parser


def _download_marian(name: str) -> str:
    """The five files of a Marian model from the Hugging Face Hub (needs the network)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, allow_patterns=list(MARIAN_FILES))
    except Exception as err:  # noqa: BLE001 - offline, unknown name, no huggingface_hub...
        raise CheckpointError(
            f"Could not download {name!r} from the Hugging Face Hub ({type(err).__name__}). "
            f"Offline, download {', '.join(MARIAN_FILES)} from the model's page and use "
            "--model-dir.") from None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    command = "python -m transformer.convert " + shlex.join(argv)
    try:
        if args.recipe == "keras-seq2seq":
            checkpoint = convert_keras_seq2seq(args.weights, args.source_vocab, args.target_vocab,
                                               args.num_heads, command=command)
        elif args.recipe == "tf-tutorial":
            mask = None if args.mask_padding is None else args.mask_padding == "yes"
            checkpoint = convert_tf_tutorial(args.weights, args.source_vocab, args.target_vocab,
                                             args.num_heads, max_len=args.max_len,
                                             mask_padding=mask, command=command)
        else:
            from .marian import convert_marian  # another module; imported only when asked

            model_dir = args.model_dir
            if args.hub:
                model_dir = _download_marian(args.hub)
            checkpoint = convert_marian(model_dir)
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _write(checkpoint, args.out)
    c = checkpoint.config
    print(f"wrote {args.out}: {c.num_encoder_layers} encoder and {c.num_decoder_layers} decoder "
          f"layers, d_model {c.d_model}, {c.num_heads} heads of {c.head_dim}, dff {c.dff}, "
          f"vocabularies {c.src_vocab_size} / {c.tgt_vocab_size}")
    return 0


def _write(checkpoint: Checkpoint, out) -> None:
    from .checkpoint import save_checkpoint

    save_checkpoint(out, checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                    checkpoint.metadata)


if __name__ == "__main__":
    raise SystemExit(main())
