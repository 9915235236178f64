"""The compiled functions every pass shares, and what their loops are made of.

- shared_function: one compiled function (a decode loop, the pages' forward pass, the gradient
  pass) per architecture and kind, traced once with the model's variables as inputs, so that
  every model of that config runs it with its own weights (SharedFunction); run without
  Grappler's rewrites (unrewritten);
- the buckets: caches are 16, 32, 64, ... slots long (bucket), and under XLA (JIT_COMPILE)
  sources and decoder inputs are padded to their buckets too (source_bucket, target_bucket,
  pad_to), so that XLA compiles once per bucket and a new sentence length does not recompile;
  padded source keys are masked, so padding changes no number; a model that does not mask
  padding (config.mask_padding False) gets its sources unpadded. TensorFlow's graph without XLA
  runs any length as it is, and there padding would only add work;
- a loop's clock, time budget and Watch (a decode another thread follows and may stop), its
  per-step output arrays (arrays, stacked, fetch), and the checks every search shares (built,
  check_max_len, head_masks, encoder_finite, real_positions).

The searches are transformer.inference.search_ours (greedy decoding and beam search as this
project defines them) and transformer.inference.search_transformers (transformers' generate);
what they return is transformer.inference.decoded.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import math
import threading
import time
import weakref
from collections import OrderedDict

import keras
import numpy as np
import tensorflow as tf

from transformer.core.kinds import KIND_NAMES, head_masks

SMALLEST_BUCKET = 16  # source and cache lengths are padded to 16, 32, 64, ... (at most the model's)


# XLA compiles the decode loop when True. Off by default: on this 2-core CPU a compile costs
# seconds per bucket and the compiled loop ran slower (bench/decode.py --xla); and XLA has no
# clock, so an XLA loop has no time budget (only the step budget).
JIT_COMPILE = False
# Sources and decoder inputs are padded to their buckets under XLA alone (or with PAD_TO_BUCKETS:
# the tests' way to show that the padded pass computes the same numbers). Without XLA padding
# only costs: t5-small's maps of a 44-id source and a 24-id target took 0.065 s padded to 64 and
# 32, 0.050 s as they are; a translation's time did not change (its cache keeps its bucket).
PAD_TO_BUCKETS = False


def padded_to_buckets() -> bool:
    """Whether sources and decoder inputs are padded to their buckets (XLA, or PAD_TO_BUCKETS)."""
    return JIT_COMPILE or PAD_TO_BUCKETS


def bucket(length: int, cap: int) -> int:
    """The padded length for `length`: the smallest of 16, 32, 64, ... that holds it, at most
    cap (but never less than length)."""
    size = SMALLEST_BUCKET
    while size < length:
        size *= 2
    return max(length, min(size, cap))


def source_bucket(config, n: int) -> int:
    """The width a source of n ids (padded or not) is padded to: under XLA its bucket, at most
    the fixed length the model is fed or its max_len; n itself without XLA
    (padded_to_buckets), and when the model does not mask padding (its padding keys are attended
    to: more of them would change the numbers)."""
    if not config.mask_padding or not padded_to_buckets():
        return n
    return bucket(n, max(config.pad_source_to or config.max_len, n))


def target_bucket(config, t: int) -> int:
    """The width a decoder input of t ids is padded to: under XLA its bucket, at most max_len
    (t itself without XLA: padded_to_buckets). Always safe: the look-ahead mask keeps every real
    row off the positions after it, whether or not the model masks padding."""
    if not padded_to_buckets():
        return t
    return bucket(t, max(config.max_len, t))


def pad_to(ids: np.ndarray, width: int, pad_id: int) -> np.ndarray:
    """(B, n) int32 ids padded on the right with pad_id to (B, width) (the same array when
    width is n)."""
    batch, n = ids.shape
    if width == n:
        return np.asarray(ids, np.int32)
    padded = np.full((batch, width), pad_id, np.int32)
    padded[:, :n] = ids
    return padded


def bucketed(model, source_ids, max_len):
    """(source_ids padded to their bucket (source_bucket), the cache length (its bucket))."""
    c = model.config
    cache_len = bucket(max_len, c.max_len)
    return pad_to(source_ids, source_bucket(c, source_ids.shape[1]), c.pad_id), cache_len


class Watch:
    """A decode another thread follows and may stop (a long translation of a named model: the
    app shows its progress and a Stop). Given where a decode takes `seconds`, it stands for no
    time budget: the compiled loop reports before each step how many are done (`steps`) and
    ends at the next step once `stop()` was called (the decode then says stopped_by
    "stopped"). The loop gets it as a negative time budget, -id (budget_seconds), and a step
    of a watched loop calls back into Python (watched_step: ~50 us a step; an unwatched loop
    never does)."""

    _ids = itertools.count(1)
    _live: dict[int, "Watch"] = {}

    def __init__(self):
        self.id = next(Watch._ids)
        self.steps = 0
        self._stop = threading.Event()
        Watch._live[self.id] = self

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        Watch._live.pop(self.id, None)


def budget_seconds(seconds) -> float:
    """The float a compiled loop gets for a time budget: seconds (None: math.inf), or a Watch's
    -id."""
    if isinstance(seconds, Watch):
        return -float(seconds.id)
    return math.inf if seconds is None else float(seconds)


def watched_step(watch_id, t) -> bool:
    """A watched loop may start step t (t steps done): recorded; whether it may (no stop)."""
    watch = Watch._live.get(int(-float(watch_id)))
    if watch is None:
        return True
    watch.steps = int(t)
    return not watch.stopped


def mark_stopped(result, seconds):
    """result with stopped_by "stopped" where a Watch's stop ended it (the loop says "time")."""
    if isinstance(seconds, Watch) and seconds.stopped and result.stopped_by == "time":
        result.stopped_by = "stopped"
        for hypothesis in getattr(result, "hypotheses", None) or ():
            if hypothesis.stopped_by == "time":
                hypothesis.stopped_by = "stopped"
    return result


def loop_args(model, source_ids, head_mask, max_len, seconds):
    sources, cache_len = bucketed(model, source_ids, max_len)
    seconds = budget_seconds(seconds)
    return (tf.constant(sources), tf.constant(cache_len, tf.int32), tf.constant(max_len, tf.int32),
            tf.constant(seconds, tf.float64), *(head_mask[kind] for kind in KIND_NAMES))


def deadline(seconds) -> float:
    """time.monotonic() when a budget of `seconds` (None or a Watch: no budget) started now is
    spent."""
    seconds = budget_seconds(seconds)
    return math.inf if seconds < 0 else time.monotonic() + seconds


def fetch(out):
    """The loop's outputs as NumPy arrays of the steps taken."""
    steps = int(out.pop("steps"))
    encoder_finite = out.pop("encoder_finite").numpy()  # (L_enc, B, N): not per step
    return {"encoder_finite": encoder_finite,
            **{name: value.numpy()[:steps] for name, value in out.items()}}


class SharedFunction:
    """One compiled function (a decode loop, the pages' forward pass) for every model of one
    architecture (config).

    The loop is traced with the model's variables as inputs (their resource handles, read once
    at the start of the loop): while tracing, a keras.StatelessScope maps the variables of the
    model being called (the template) to those reads, so the graph holds no model's weights
    and any model of the same config runs it with its own. Opening another checkpoint of a
    known architecture (the bundled epochs, a retrained model) therefore traces nothing.
    (Handles, not values: passing a value costs an eager read per weight and every call.)
    """

    def __init__(self, model, make_loop, signature, xla):
        shapes = [(tuple(w.shape), w.dtype) for w in model.weights]
        handles = [tf.TensorSpec([], tf.resource)] * len(shapes)
        self._template = None  # a weak reference to the model whose call traces
        self._concrete = None  # the traced function, once traced
        self._lock = threading.Lock()

        def run(weight_handles, *args):
            template = self._template()
            values = []
            for handle, (shape, dtype) in zip(weight_handles, shapes):
                value = tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)
                value.set_shape(shape)  # the config fixes every shape
                values.append(value)
            with keras.StatelessScope(list(zip(template.weights, values))):
                return make_loop(template)(*args)

        # autograph=False: the loop is an explicit tf.while_loop and the model's Python loops
        # run over its layers at trace time; no source conversion makes the trace quicker.
        self.fn = tf.function(run, input_signature=[handles] + signature, jit_compile=xla or None,
                              autograph=False)

    def trace(self, model):
        """The loop's one concrete function (the signature is fixed), traced on first use with
        `model` as the template. Calls go to it directly: tf.function's dispatch matched every
        argument's type, ~2 ms a call."""
        if self._concrete is None:
            with self._lock, unrewritten():  # one trace, while the template is alive
                if self._concrete is None:
                    self._template = weakref.ref(model)
                    self._concrete = self.fn.get_concrete_function()
        return self._concrete

    def __call__(self, model, *args):
        handles = [w.value.handle for w in model.weights]  # the backend's tf.Variables
        concrete = self.trace(model)
        with unrewritten():
            return concrete(handles, *args)

    def tracing_count(self) -> int:
        return self.fn.experimental_get_tracing_count()


@contextlib.contextmanager
def unrewritten():
    """The compiled functions called (and the layer functions they call, traced) in this
    thread run without Grappler's graph rewrites (its meta optimizer off). Grappler rewrites a
    function when it is first run, which cost more than it gave back: bart-large's first
    translation 2.49 -> 1.93 s and its first maps 1.16 -> 0.87 s, warm translation unchanged
    (1.0 s either way, bench/real_models.py). TensorFlow offers the switch for the whole
    process only (tf.config.optimizer); this sets it in the thread's function-call options as
    tf.experimental.function_executor_type does its setting, so training keeps its rewrites."""
    from tensorflow.python.eager import context

    ctx = context.context()
    before = ctx.function_call_options
    options = copy.copy(before)
    options.config_proto_serialized = _unrewritten_config(before.config_proto_serialized)
    ctx.function_call_options = options
    try:
        yield
    finally:
        ctx.function_call_options = before


@functools.lru_cache(maxsize=8)
def _unrewritten_config(serialized: bytes):
    """The ConfigProto `serialized` holds, with Grappler's meta optimizer off (the options'
    setter serializes it)."""
    from tensorflow.core.protobuf import config_pb2

    config = config_pb2.ConfigProto.FromString(serialized)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return config


_SHARED_LOOPS: OrderedDict = OrderedDict()  # (kind, config JSON) -> SharedFunction, least recent first


MAX_SHARED_LOOPS = 32  # compiled functions kept (each a few MB of graph): several per architecture


_SHARED_LOCK = threading.Lock()


def shared_function(model, kind, make_loop, signature) -> SharedFunction:
    """The compiled function `kind` of this model's architecture (traced on its first call),
    shared by every model of the same config: make_loop(template model) -> the function of the
    inputs `signature` describes (after the weights). The decode loops and the teacher-forced
    forward pass (transformer.inference.forward) are all kept here."""
    key = (kind + ("_xla" if JIT_COMPILE else ""), model.config.to_json())
    with _SHARED_LOCK:
        loop = _SHARED_LOOPS.get(key)
        if loop is None:
            loop = SharedFunction(model, make_loop, signature, JIT_COMPILE)
            _SHARED_LOOPS[key] = loop
            while len(_SHARED_LOOPS) > MAX_SHARED_LOOPS:
                _SHARED_LOOPS.popitem(last=False)
        _SHARED_LOOPS.move_to_end(key)
        return loop


def clock(xla):
    """Now, in seconds, on the device (tf.timestamp). XLA cannot compile a clock, so a loop
    compiled with XLA (JIT_COMPILE, off by default) has no time budget: 0."""
    return tf.constant(0.0, tf.float64) if xla else tf.timestamp()


def in_time(t, started, seconds, xla):
    """May step t start? The first step always may; a later one while the time budget lasts. A
    negative budget is a Watch's (budget_seconds): no time limit, the step reported, and none
    after its stop."""
    timed = (t == 0) | (clock(xla) - started < seconds)
    if xla:
        return timed

    def watched():
        going = tf.py_function(watched_step, [seconds, t], tf.bool)
        going.set_shape([])
        return (t == 0) | going

    return tf.cond(seconds < 0, watched, lambda: timed)


def arrays(size, specs):
    """One preallocated TensorArray per output, a slot per step (size: the cache length, a
    bucket, so XLA compiles once per bucket whatever max_len is)."""
    return {name: tf.TensorArray(dtype, size=size) for name, dtype in specs}


def stacked(arrays, steps, xla):
    """Each array's written steps (the first `steps`): everything under XLA, which needs static
    shapes (the host cuts them), only those written otherwise."""
    if xla:
        return {name: a.stack() for name, a in arrays.items()}
    # at least the first (written by every loop that ran a step: one that found no token
    # left wrote it and did not count it), cut to `steps`: a list with no fully known
    # element shape cannot gather none
    return {name: a.gather(tf.range(tf.maximum(steps, 1)))[:steps]
            for name, a in arrays.items()}


def encoder_finite(enc):
    """(L_enc, B, N) bool: whether each encoder layer's attention row of each source position
    held only finite numbers (the decode loops keep no encoder maps; numerics names the first
    layer and position that did not)."""
    return tf.reduce_all(tf.math.is_finite(enc["attention"]), axis=[2, 4])


def finite_rows(row):
    """(L, B, H, keys) attention rows of a step -> (L, B) bool: all finite."""
    return tf.reduce_all(tf.math.is_finite(row), axis=[2, 3])


def real_positions(config, source_ids) -> np.ndarray:
    """(N,) bool: the source positions whose numbers count (those attended to: the real tokens,
    or every position when the model does not mask padding)."""
    source_ids = np.asarray(source_ids)
    if not config.mask_padding:
        return np.ones(source_ids.shape, bool)
    return source_ids != config.pad_id


def built(model):
    """The model, its variables created first if it has never been called (as Keras builds a
    layer on its first call): the compiled loops read the variables themselves, so an unbuilt
    model would have none to read."""
    if not model.built:
        model.build_weights()
    return model


def check_max_len(config, max_len):
    if not 1 <= max_len <= config.max_len:
        raise ValueError(f"max_len must be in [1, {config.max_len}] (the model's max_len), got {max_len}")


def head_mask_tensors(model, head_mask):
    """Full (layers, heads) float masks for each kind, ones where not given."""
    return {kind: tf.constant(mask) for kind, mask in
            head_masks(model.config, given=head_mask).items()}


__all__ = [
    "arrays",
    "bucket",
    "bucketed",
    "budget_seconds",
    "built",
    "check_max_len",
    "clock",
    "deadline",
    "encoder_finite",
    "fetch",
    "finite_rows",
    "head_mask_tensors",
    "in_time",
    "JIT_COMPILE",
    "loop_args",
    "mark_stopped",
    "MAX_SHARED_LOOPS",
    "pad_to",
    "PAD_TO_BUCKETS",
    "padded_to_buckets",
    "real_positions",
    "shared_function",
    "SharedFunction",
    "SMALLEST_BUCKET",
    "source_bucket",
    "stacked",
    "target_bucket",
    "unrewritten",
    "Watch",
    "watched_step",
]
