"""What every Keras recipe shares: the weights of a Keras file as a tree of layers (read as data
by transformer.checkpoint.readers), Dense and LayerNormalization groups, the two attention forms
(keras.layers.MultiHeadAttention and the hand-written one), our weight names for a block, and the
conversion itself (files -> our config, weights and tokenizers -> an OpenedModel)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from transformer.checkpoint.format import CheckpointError, check_size, checkpoint_bytes, read_input
from transformer.checkpoint.readers import (
    TF_DATA_SUFFIX,
    checkpoint_label,
    natural_key,
    read_weights,
    tf_checkpoint_prefix,
)
from transformer.core.text import quoted
from transformer.importers.mapping import WeightMap
from transformer.inference.session import load_checkpoint
from transformer.model import weights as names
from transformer.tokenizers.base import TokenizerError

KERAS_LAYER_NORM_EPSILON = 1e-3  # keras.layers.LayerNormalization's default
_NOISE = {"layers", "vars", ".ATTRIBUTES", "VARIABLE_VALUE"}
_INDEX = {"kernel": 0, "embeddings": 0, "gamma": 0, "bias": 1, "beta": 1}

# ------------------------------------------------------------------ the weights as a tree
@dataclass
class Node:
    """One layer (or container) of the original model: its child layers and its variables,
    numbered as Keras numbers them (kernel/embeddings/gamma 0, bias/beta 1). Every node of one
    tree shares the file's WeightMap: a variable is taken through it (so that what no recipe
    used can be named at the end), and a missing layer or variable is an error naming it."""
    path: tuple = ()
    children: dict = field(default_factory=dict)
    variables: dict = field(default_factory=dict)  # index -> (name in the file, array)
    weights: WeightMap | None = field(default=None, repr=False, compare=False)
    where: str = ""  # its path in the file, Keras's bookkeeping parts kept ("layers/x/layernorm_1")

    @property
    def label(self) -> str:
        return "/".join(self.path) or "(root)"

    @property
    def in_file(self) -> str:
        """Its path as the file spells it, for sentences that say what to look for."""
        return self.where or self.label

    def child(self, name):
        return self.children.get(name)

    def need(self, name, what, file_label, holding="", owner=None):
        """The child layer `name`, or an error naming the weight group that is missing: "the
        layer 'encoder/enc_layers/encoder_layer_1' has no LayerNormalization weights for its
        feed-forward (expected a group like 'encoder/.../ffn/layer_norm/vars' with gamma and
        beta)". owner: how the sentence names this node (default: the layer and its path)."""
        node = self.children.get(name)
        if node is None:
            owner = owner or f"the layer {quoted(self.in_file)}"
            raise CheckpointError(
                f"{file_label}: {owner} has no {what} (expected a group like "
                f"{quoted(self.in_file + '/' + name + '/vars')}{holding}).")
        return node

    def walk(self):
        yield self
        for key in sorted(self.children, key=natural_key):
            yield from self.children[key].walk()

    def array(self, index, what, file_label, shape=None):
        """Variable `index` (0: kernel, embeddings or gamma; 1: bias or beta), taken from the
        file's weights (checked to have `shape` when one is given)."""
        if index not in self.variables:
            raise CheckpointError(
                f"{file_label}: the layer {quoted(self.in_file)} has no {what} (expected a weight "
                f"{quoted(self.in_file + '/vars/' + str(index))}).")
        name = self.variables[index][0]
        return self.weights.take(name, shape, f"the {what} of {quoted(self.label)}")

    def optional(self, index, what, file_label, shape=None):
        """Variable `index` when the layer has it (a bias a layer was built without), else None."""
        return self.array(index, what, file_label, shape) if index in self.variables else None

    def shape(self, index):
        """The shape of variable `index` (None when absent), without taking it."""
        item = self.variables.get(index)
        return None if item is None or item[1] is None else tuple(np.shape(item[1]))


def variable_index(part: str):
    """A variable's number from the last part of its name: "0" (Keras 3's vars/0), "kernel" or
    "gamma" (0), "bias" or "beta" (1); any other part stays a name (BatchNormalization
    statistics: part of no recipe). Only ASCII digits, at most 9 of them, are read as a number:
    "²" is a digit to str.isdigit but not to int(), and a run of thousands of digits is refused
    by int() only after the work."""
    if re.fullmatch(r"[0-9]{1,9}", part):
        return int(part)
    return _INDEX.get(part, part)


def tree(arrays: dict[str, np.ndarray], file_label: str) -> Node:
    """The file's weights as a tree of layers (names split at "/", Keras's bookkeeping parts
    dropped), every node sharing one WeightMap of the file."""
    weights = WeightMap(arrays, file_label)
    root = Node(weights=weights)
    for name, array in arrays.items():
        raw = name.split("/")
        kept = [i for i, p in enumerate(raw) if p and p not in _NOISE]
        if not kept:
            continue  # left untaken: check_all_used names it
        index = variable_index(raw[kept[-1]].lstrip("_"))
        node = root
        for i in kept[:-1]:
            part = raw[i].lstrip("_")
            node = node.children.setdefault(part, Node(node.path + (part,), weights=weights,
                                                       where="/".join(raw[:i + 1])))
        node.variables.setdefault(index, (name, array))  # a second spelling: left untaken
    return root


def ordered(nodes):
    return sorted(nodes, key=lambda n: [natural_key(p) for p in n.path])


def dense(node, file_label, in_dim=None, out_dim=None, what="Dense layer"):
    """(kernel (in, out), bias (out,)) of a Dense node, checked."""
    kernel = node.array(0, "kernel", file_label)
    bias = node.optional(1, "bias", file_label)
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


LAYER_NORM_GROUP = " with gamma and beta"  # what a missing LayerNormalization group held


def layer_norm(node, d_model, file_label):
    """(gamma, beta) of a LayerNormalization node, each (d_model,)."""
    return (node.array(0, "LayerNormalization gamma", file_label, (d_model,)),
            node.array(1, "LayerNormalization beta", file_label, (d_model,)))


# ------------------------------------------------------------------ attention
def keras_mha(node, d_model, file_label):
    """keras.layers.MultiHeadAttention -> ({query,key,value,output}: (kernel, bias)), heads, head_dim.

    query/key/value kernels (d_model, H, key_dim) -> (d_model, H * key_dim), biases (H, key_dim)
    -> (H * key_dim,); the output kernel (H, key_dim, d_model) -> (H * key_dim, d_model)."""
    parts = {}
    query = node.need("query_dense", "query projection", file_label)
    kernel = query.array(0, "kernel", file_label)
    if kernel.ndim != 3 or kernel.shape[0] != d_model:
        raise CheckpointError(
            f"{file_label}: the attention {node.label!r} has a query kernel {kernel.shape}; "
            f"keras MultiHeadAttention's is (d_model = {d_model}, heads, key_dim).")
    _, heads, head_dim = kernel.shape
    width = heads * head_dim
    for ours, theirs in (("query", "query_dense"), ("key", "key_dense"), ("value", "value_dense")):
        sub = node.need(theirs, f"{ours} projection", file_label)
        k = sub.array(0, "kernel", file_label)
        b = sub.optional(1, "bias", file_label)
        b = np.zeros((heads, head_dim), np.float32) if b is None else b
        if k.shape != (d_model, heads, head_dim) or b.shape != (heads, head_dim):
            raise CheckpointError(
                f"{file_label}: the weight {sub.label!r} has kernel {k.shape} and bias {b.shape}; "
                f"expected {(d_model, heads, head_dim)} and {(heads, head_dim)} like the query's.")
        parts[ours] = (k.reshape(d_model, width), b.reshape(width))
    out = node.need("output_dense", "output projection", file_label)
    k = out.array(0, "kernel", file_label)
    b = out.optional(1, "bias", file_label)
    b = np.zeros(d_model, np.float32) if b is None else b
    if k.shape != (heads, head_dim, d_model) or b.shape != (d_model,):
        raise CheckpointError(
            f"{file_label}: the weight {out.label!r} has kernel {k.shape} and bias {b.shape}; "
            f"expected {(heads, head_dim, d_model)} and {(d_model,)}.")
    parts["output"] = (k.reshape(width, d_model), b)
    return parts, heads, head_dim


def handwritten_mha(node, d_model, file_label):
    """The notebook variant: q_linear, k_linear, v_linear, concat_linear, all (d_model, d_model)."""
    parts = {}
    for ours, theirs in (("query", "q_linear"), ("key", "k_linear"), ("value", "v_linear"),
                         ("output", "concat_linear")):
        parts[ours] = dense(node.need(theirs, f"{ours} Dense layer", file_label), file_label,
                            d_model, d_model, "attention Dense")
    return parts


KERAS_MHA_PARTS = ("query_dense", "key_dense", "value_dense", "output_dense")


def is_keras_mha(node):
    return node is not None and all(node.child(n) for n in KERAS_MHA_PARTS)


def is_handwritten_mha(node):
    return node is not None and all(node.child(n) for n in
                                    ("q_linear", "k_linear", "v_linear", "concat_linear"))


def sequential_denses(node, file_label):
    """The Dense layers of a keras.Sequential, in order."""
    denses = [n for n in ordered(node.children.values()) if 0 in n.variables]
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


def feedforward(node, d_model, file_label):
    first, second = sequential_denses(node, file_label)
    k1, b1 = dense(first, file_label, d_model, None, "feed-forward Dense")
    k2, b2 = dense(second, file_label, k1.shape[1], d_model, "feed-forward Dense")
    return (k1, b1), (k2, b2)


def side_of(node, encoders, decoders):
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


def split_embeddings(embeddings, encoders, decoders, target_vocab, file_label, what):
    """(source node, target node) among two embedding nodes."""
    if len(embeddings) != 2:
        raise CheckpointError(
            f"{file_label}: found {len(embeddings)} {what}; a translator has 2 (source and "
            "target). Is this the right recipe?")
    sides = [side_of(e, encoders, decoders) for e in embeddings]
    if sides.count(None) == 1:  # one side is known: the other embedding is the other side
        known = next(s for s in sides if s)
        sides = [s or ("source" if known == "target" else "target") for s in sides]
    if sorted(s for s in sides if s) == ["source", "target"]:
        return tuple(e for s in ("source", "target") for e, side in zip(embeddings, sides) if side == s)
    rows = [token_table(e, file_label).shape[0] for e in embeddings]
    matches = [e for e, r in zip(embeddings, rows) if r == target_vocab]
    if len(matches) == 1:  # the target's vocabulary is the output layer's
        target = matches[0]
        return next(e for e in embeddings if e is not target), target
    return tuple(ordered(embeddings))  # created source first, as both originals do


def token_table(node, file_label):
    """The token embedding matrix of an embedding node (the example's PositionalEmbedding holds
    token_embeddings; the tutorial's node is the Embedding itself)."""
    token = node.child("token_embeddings") or node
    table = token.array(0, "embeddings", file_label)
    if table.ndim != 2:
        raise CheckpointError(f"{file_label}: the weight {token.label!r} has shape "
                              f"{table.shape}; expected (vocabulary, d_model).")
    return table


def model_width(node, ndim, file_label):
    """d_model: the inputs of the first attention's query kernel, which has `ndim` dimensions."""
    kernel = node.array(0, "kernel", file_label)
    if kernel.ndim != ndim or not kernel.shape[0]:
        raise CheckpointError(f"{file_label}: the query kernel of {node.label!r} has shape "
                              f"{kernel.shape}; expected {ndim} dimensions, the first d_model.")
    return kernel.shape[0]


def final_dense(root, used, d_model, file_label):
    candidates = [n for n in root.walk() if n.path and 0 in n.variables
                  and not any(n.path[:len(u)] == u for u in used)]
    denses = [n for n in candidates if (n.shape(0) or ())[:1] == (d_model,) and len(n.shape(0)) == 2]
    if len(denses) != 1:
        raise CheckpointError(
            f"{file_label}: expected one output Dense layer (d_model = {d_model} inputs) besides "
            f"the encoder and decoder; found {len(denses)}"
            + (f" ({', '.join(n.label for n in denses)[:200]})" if denses else "") + ".")
    return denses[0]


def check_dff(ffn, dff, node, file_label):
    if ffn[0][0].shape[1] != dff:
        raise CheckpointError(
            f"{file_label}: the feed-forward of {node.label!r} is {ffn[0][0].shape[1]} wide, "
            f"another layer's is {dff}; one model has one dff.")


# ------------------------------------------------------------------ conversion
def read_files(source, default_name):
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


def convert(recipe, weights, source_vocab, target_vocab, num_heads, make_tokenizers, infer,
             overrides, command, extra_metadata):
    from transformer.model.config import TransformerConfig
    from transformer.model.transformer import Transformer

    files, label, hashes = read_files(weights, "weights")
    arrays = read_weights(files)
    architecture = infer(arrays, repr(label), num_heads)  # messages start with the file's name
    src_data, src_label, src_hash = read_files(source_vocab, "source vocabulary")
    tgt_data, tgt_label, tgt_hash = read_files(target_vocab, "target vocabulary")
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
            emb = names.token_embedding(side)
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
    check_size(config, architecture.weights)  # layers, padding, work and size: before any build
    model = Transformer(config).build_weights()
    assign(model, architecture.weights, repr(label))
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


def assign(model, weights, label):
    """Our weights mapped from `label`'s into the model (model.weights.assign_weights's checks)."""
    from transformer.model.weights import WeightError, assign_weights

    try:
        assign_weights(model, weights, f"the weights mapped from {label}")
    except WeightError as err:  # a mapping bug, or a config option the mapping does not cover
        raise CheckpointError(str(err)) from None


