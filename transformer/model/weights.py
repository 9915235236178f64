"""The model's weights by name: their shapes from a config alone, reading them out of a built
model, and the one place weights are copied into a model (every importer and the checkpoint
loader call assign_weights, which names every missing, extra or mis-shaped weight)."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from transformer.core.mapped import release
from transformer.core.text import quoted
from transformer.model.config import TransformerConfig


class WeightError(ValueError):
    """A weight missing, extra or of the wrong shape; the error names it."""


# ------------------------------------------------------------------ our weights' names
# Every path below is relative to the model; importers name the weights they map through these,
# so the model's layout is written here once (weight_shapes is checked against a built model).
SIDES = ("source", "target")
STACKS = {"encoder": ("self_attention",), "decoder": ("self_attention", "cross_attention")}
ATTENTION_DENSES = ("query", "key", "value", "output")
OUTPUT_PROJECTION = "output_projection"


def token_embedding(side: str) -> str:
    return f"{side}_embedding/{side}_token_embedding/embeddings"


def position_embedding(side: str) -> str:
    return f"{side}_embedding/position_embedding/embeddings"


def embedding_norm(side: str) -> str:
    """The norm on a stack's embedded input (BART's layernorm_embedding)."""
    return f"{side}_embedding/embedding_norm"


def relative_bias(stack: str) -> str:
    """T5's relative position bias of a stack: (buckets, heads)."""
    return f"{stack}_position_bias/relative_bias/embeddings"


def norm_parts(config) -> tuple[str, ...]:
    """The weights of one norm: LayerNorm's gamma and beta, or RMSNorm's scale."""
    return ("gamma", "beta") if config.norm == "layer" else ("scale",)


def layer(stack: str, i: int) -> str:
    """"encoder_layer_0": the prefix of one layer of a stack ("encoder" or "decoder")."""
    return f"{stack}_layer_{i}"


def dense(prefix: str, kernel, bias) -> dict:
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}


def layer_norm(prefix: str, gamma, beta) -> dict:
    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta}


def attention(prefix: str, parts: dict) -> dict:
    """One attention sublayer's weights: parts {dense of ATTENTION_DENSES: (kernel, bias)}."""
    return {k: v for name, (kernel, bias) in parts.items()
            for k, v in dense(f"{prefix}/{name}", kernel, bias).items()}


def block_rest(prefix: str, ffn, norms: dict) -> dict:
    """A layer's feed-forward ((kernel, bias) of intermediate and output) and its LayerNorms
    ({"self_attention_layer_norm": (gamma, beta), ...})."""
    (k1, b1), (k2, b2) = ffn
    out = {**dense(f"{prefix}/feedforward/intermediate", k1, b1),
           **dense(f"{prefix}/feedforward/output", k2, b2)}
    for name, (gamma, beta) in norms.items():
        out.update(layer_norm(f"{prefix}/{name}", gamma, beta))
    return out


def weight_shapes(config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """{weight path relative to the model: shape} of every weight a Transformer(config) has,
    computed from the config alone (nothing is built or allocated): a checkpoint's weights are
    checked against it before the model is built. Equal to the built model's weights (tested)."""
    c = config
    d, inner = c.d_model, c.num_heads * c.head_dim
    shapes: dict[str, tuple[int, ...]] = {}

    def dense_shape(prefix, n_in, n_out, bias=c.use_bias):
        shapes[f"{prefix}/kernel"] = (n_in, n_out)
        if bias:
            shapes[f"{prefix}/bias"] = (n_out,)

    def norm(prefix):
        for part in norm_parts(c):
            shapes[f"{prefix}/{part}"] = (d,)

    def attention_shapes(prefix):
        for part in ATTENTION_DENSES:
            dense_shape(f"{prefix}/{part}", *((inner, d) if part == "output" else (d, inner)))

    for side in SIDES:
        if side == "source" or not c.share_embeddings:
            shapes[token_embedding(side)] = (c.src_vocab_size if side == "source"
                                             else c.tgt_vocab_size, d)
        if c.positional == "learned":
            shapes[position_embedding(side)] = (c.max_len, d)
        if c.embedding_norm:
            norm(embedding_norm(side))
    if c.relative_attention:
        for stack in STACKS:
            shapes[relative_bias(stack)] = (c.relative_buckets, c.num_heads)
    for stack, sublayers in STACKS.items():
        for i in range(c.num_encoder_layers if stack == "encoder" else c.num_decoder_layers):
            p = layer(stack, i)
            for sublayer in sublayers:
                attention_shapes(f"{p}/{sublayer}")
                norm(f"{p}/{sublayer}_layer_norm")
            if c.feedforward == "gated":
                dense_shape(f"{p}/feedforward/gate", d, c.dff)
            dense_shape(f"{p}/feedforward/intermediate", d, c.dff)
            dense_shape(f"{p}/feedforward/output", c.dff, d)
            norm(f"{p}/feedforward_layer_norm")
    if c.norm_first:
        norm("encoder_norm")
        norm("decoder_norm")
    if not c.tie_output:
        dense_shape(OUTPUT_PROJECTION, d, c.tgt_vocab_size, bias=c.output_bias)
    elif c.output_bias:
        shapes["output_bias"] = (c.tgt_vocab_size,)
    return shapes


def relative_path(model, variable) -> str:
    """A weight's path without the model's own name, so renaming the model changes nothing."""
    path = variable.path
    prefix = model.name + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def weight_arrays(model) -> dict[str, np.ndarray]:
    """{path relative to the model: float32 array} for every weight, the keys a checkpoint stores."""
    return {relative_path(model, w): np.asarray(w.numpy(), np.float32) for w in model.weights}


def check_weights(expected: dict[str, tuple], weights: dict, where: str) -> None:
    """Every weight `expected` ({name: shape}) names is in `weights` ({name: array, or anything
    with .shape}) with that shape, and nothing else is: else a WeightError naming the first
    weight that is not, and `where` its values came from ("the checkpoint", "config.json in
    the folder 'x'")."""
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise WeightError(f"{where[:1].upper() + where[1:]} has no value for the weight "
                          f"{quoted(missing[0])}.")
    unexpected = sorted(set(weights) - set(expected))
    if unexpected:
        raise WeightError(f"{where[:1].upper() + where[1:]} has a weight "
                          f"{quoted(unexpected[0])} that this model does not have.")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != tuple(shape):
            raise WeightError(
                f"The weight {quoted(name)} has shape {str(tuple(weights[name].shape))[:80]} in "
                f"{where} but {tuple(shape)} in the model its config describes.")


def assign_weights(model, weights: dict[str, np.ndarray], where: str = "the checkpoint",
                   arena: WeightArena | None = None) -> None:
    """Copy {name: array} into a built model, after check_weights against its variables.
    arena: memory made ready for the float32 weights while the model was built (WeightArena)."""
    variables = {relative_path(model, w): w for w in model.weights}
    check_weights({name: tuple(v.shape) for name, v in variables.items()}, weights, where)
    with _small_pages():
        for name, variable in variables.items():
            _assign_weight(variable, weights[name], arena.take(name) if arena else None)


class WeightArena:
    """One block of memory for the copies of the float32 weights (what the model's variables
    then own), its pages touched by a thread as soon as it exists, so that the kernel hands
    them over while the model is built instead of during the copies. Where the page cache fills
    memory each new page waits for the kernel to evict a cached one: pegasus-xsum's 1.75 GiB of
    transposing copies took 1.6-3.5 s so, 1.0 s with free memory. The pages are touched a byte
    at a time by NumPy, which lets go of the interpreter meanwhile; a weight's memory is handed
    out (take) only once the thread is past it."""

    def __init__(self, weights: dict[str, np.ndarray]):
        self._offsets, total = {}, 0
        for name, array in weights.items():
            if getattr(array, "dtype", None) == np.float32 and array.ndim:
                self._offsets[name] = (total, array.shape)
                total += -(-array.nbytes // ALIGN_BYTES) * ALIGN_BYTES
        with _small_pages():
            self._buffer = np.empty(total + ALIGN_BYTES, np.uint8)
        self._start = -self._buffer.ctypes.data % ALIGN_BYTES
        self._touched = 0  # bytes from the start whose pages the thread has touched
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._touch, name="weight-arena", daemon=True)
        self._thread.start()

    def _touch(self) -> None:
        page = 4096
        try:
            for i in range(0, len(self._buffer), ARENA_TOUCH_BYTES):
                self._buffer[i:i + ARENA_TOUCH_BYTES:page] = 0
                with self._progress:
                    self._touched = min(len(self._buffer), i + ARENA_TOUCH_BYTES)
                    self._progress.notify_all()
        finally:  # whatever happened, no copy waits for ever (the rest is touched as copied)
            with self._progress:
                self._touched = len(self._buffer)
                self._progress.notify_all()

    def take(self, name: str) -> np.ndarray | None:
        """The float32 array of memory for weight `name` (None for one of another kind), once
        the thread has touched all of it: it writes a zero into each page, which must never
        land in a weight already copied there."""
        if name not in self._offsets:
            return None
        offset, shape = self._offsets[name]
        start = self._start + offset
        end = start + int(np.prod(shape)) * 4
        with self._progress:
            self._progress.wait_for(lambda: self._touched >= end)
        return self._buffer[start:end].view(np.float32).reshape(shape)


ARENA_TOUCH_BYTES = 64 * 2**20


@contextlib.contextmanager
def _small_pages():
    """NumPy's large arrays in 4 KB pages for the duration. NumPy asks the kernel for 2 MB
    pages (madvise) for them, and where the memory is fragmented each first touch then waits
    for the kernel to compact: 2 GB of new arrays took 0.14-3.5 s here, in 4 KB pages 0.7 s
    every time (PyTorch's allocator asks for none either)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # another NumPy: its default
        yield
        return
    before = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(before)


def _assign_weight(variable, array, out: np.ndarray | None = None) -> None:
    """variable = array, in one assignment of one weight, copied once into memory the variable
    then owns (_owned: NumPy's, handed to TensorFlow through DLPack without a copy; tf.constant
    of a NumPy array took 1.5-3.5 s for NLLB's 1 GB embedding, DLPack 0.24 s with the copy).
    A transposed float32 view (a Hugging Face (out, in) matrix read as our (in, out) kernel) is
    transposed STRIP columns at a time as it is copied (NumPy's strided copy of the whole took
    8x as long); float16 / bfloat16 is copied as stored and transposed and widened to float32 by
    TensorFlow. What is in flight besides the model is that one weight, in both precisions at
    most. Never an assignment to a slice of the variable: TensorFlow then keeps the variable in
    its copy-on-read mode, and every later read copied it whole (NLLB's 1 GB embedding: 2.7 s a
    read, at every load's probe and every compiled call)."""
    import tensorflow as tf

    array = np.asarray(array)
    transposed = array.ndim == 2 and not array.flags.c_contiguous and array.T.flags.c_contiguous
    if array.dtype == np.float32:
        value = _shared_tensor(_owned(array, out))
    else:
        value = _shared_tensor(_owned(array.T if transposed else array))
        if transposed:
            value = tf.transpose(value)  # (in, out) from the stored (out, in)
        value = tf.cast(value, tf.float32)
    tf.raw_ops.AssignVariableOp(resource=variable.value.handle, value=value)


ALIGN_BYTES = 64  # Eigen's widest vector alignment: TensorFlow's kernels may assume it
# A transposing copy goes STRIP columns of the output at a time: STRIP whole rows of the stored
# (out, in) matrix read in order, one 64-byte line written per output row. Measured on pegasus-
# xsum's matrices (fresh memory, as a load meets it): 0.54 s/GiB, against 0.85 for 64 x 64 tiles
# (each tile a Python-level step) and 1.2 for NumPy's whole strided copy.
STRIP = 16


def _owned(array: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A C-ordered copy of array (a view of a memory-mapped file, in any order) in new memory
    aligned to ALIGN_BYTES, the file's pages given back as they are copied (core.mapped.release:
    a block of COPY_BLOCK_BYTES at a time, so NLLB's 1 GB embedding is never in memory twice);
    a 2-D view in another order (a stored (out, in) matrix read as (in, out)) is copied STRIP
    of its columns at a time."""
    if out is None:
        buffer = np.empty(array.nbytes + ALIGN_BYTES, np.uint8)
        start = -buffer.ctypes.data % ALIGN_BYTES
        out = buffer[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    if array.ndim == 2 and not array.flags.c_contiguous:
        for j in range(0, array.shape[1], STRIP):  # (rows, STRIP): STRIP rows of the stored
            out[:, j:j + STRIP] = array[:, j:j + STRIP]  # matrix read in order, a line per row
        release(array)
    elif array.ndim == 0:
        np.copyto(out, array)
    else:
        rows = max(1, COPY_BLOCK_BYTES // max(1, array[0].nbytes))
        for i in range(0, len(array), rows):
            np.copyto(out[i:i + rows], array[i:i + rows])
            release(array[i:i + rows])
    return out


COPY_BLOCK_BYTES = 8 * 2**20  # the file's pages in the process while a weight is copied: 64 MB
# blocks put opus-mt-en-de's load peak 58 MB higher (1.48x its weights), at the same speed


def _shared_tensor(array: np.ndarray):
    """A tensor over array's memory (DLPack: no copy; the tensor keeps the array alive).
    bfloat16 (ml_dtypes, which DLPack does not name) travels as its bits."""
    import tensorflow as tf

    from_dlpack = tf.experimental.dlpack.from_dlpack
    if array.dtype == tf.bfloat16.as_numpy_dtype:
        return tf.bitcast(from_dlpack(array.view(np.uint16).__dlpack__()), tf.bfloat16)
    return from_dlpack(array.__dlpack__())


class _Unwritten:
    """A Keras initializer that allocates without writing (tf.raw_ops.Empty, init=False): the
    values are whatever the memory held until assign_weights replaces every one (it checks that
    it has a weight for each variable first). Zeros wrote the whole model once more: pegasus-
    xsum-shaped open 9.1-9.7 -> 7.8-8.5 s, its peak 6.0 -> 5.4 GB."""

    def __call__(self, shape, dtype=None):
        import tensorflow as tf

        return tf.raw_ops.Empty(shape=list(shape), dtype=tf.dtypes.as_dtype(dtype or "float32"),
                                init=False)

    def get_config(self):
        return {}


_INITIALIZERS = ("kernel_initializer", "bias_initializer", "embeddings_initializer",
                 "gamma_initializer", "beta_initializer")


def empty_model(config: TransformerConfig):
    """The model `config` describes, its variables allocated but not written (_Unwritten): for
    a load that assigns every weight next (assign_weights). Drawing random initial values costs
    about a second for a model of opus-mt's size (75M weights), only to be overwritten."""
    from transformer.model.transformer import Transformer

    model = Transformer(config)
    for layer in model._flatten_layers():  # Keras layers read these when they build
        for name in _INITIALIZERS:
            if hasattr(layer, name):
                setattr(layer, name, _Unwritten())
    return model.build_weights()
