"""A Hugging Face tf_model.h5 (what transformers' TF classes save: TFMarianMTModel.save_pretrained
and the like) read as data, into the {PyTorch name: array} a model.safetensors would give.

Many Helsinki-NLP opus-mt repositories have no model.safetensors, only pytorch_model.bin (a
pickle: never read) and tf_model.h5. The file is a tf-keras HDF5 weights file: one top-level
group per Keras layer of the model ("model", "final_logits_bias"; T5: "shared", "encoder",
"decoder", "lm_head"), holding each of that layer's variables under the variable's own name, a
path whose first part is the model's name or a shared layer's scope:

    model/tf_marian_mt_model/model/encoder/layers.0/self_attn/k_proj/kernel:0   (in, out)
    model/model.shared/model.shared/embeddings:0                                 (vocab, d)
    final_logits_bias/final_logits_bias:0                                        (1, vocab)
    encoder/shared/shared/embeddings:0    (T5: the shared embedding, once per layer using it)

It is read by transformer.checkpoint.readers.read_keras_h5 (h5py on the bytes, never Keras: only
plain groups and float arrays, with its bounds on objects, depth, dimensions and total bytes),
and each variable is renamed as transformers' convert_tf_weight_name_to_pt_weight_name
(modeling_tf_pytorch_utils, 4.x) names it when PyTorch loads TF weights (from_tf=True):

* the layer's group is dropped (the variable's own name is the path below it), then ":0";
* "X___Y" between slashes becomes "Y"; "_._" becomes a level ("block_._0" -> "block/0");
  empty levels go; the first level (the model's name, or the shared layer's scope) is dropped
  when there are several;
* the last level: "kernel" -> "weight", transposed ((in, out) -> PyTorch's (out, in)); a
  kernel of any rank but 2 (a convolution's) is refused: no family read here has one;
  "embeddings" and "gamma" -> "weight", "beta" -> "bias";
* "/" -> ".".

A PyTorch name several variables give (T5's shared embedding, saved under "shared", "encoder"
and "decoder") must hold the same values in each, and is kept once. What the file holds beside
model.safetensors' names is for the family importers to take or refuse, as for a safetensors
file: Marian's sinusoidal embed_positions tables (TF saves them, transformers 5 does not), no
final_logits_bias in a file saved before transformers 4.22 (the importers then use zeros, as
transformers starts it), no tied lm_head.weight or encoder/decoder embed_tokens (model.shared /
shared only, as in model.safetensors).
"""

from __future__ import annotations

import re

import numpy as np

from transformer.checkpoint.format import CheckpointError, read_input
from transformer.checkpoint.readers import HDF5_MAGIC, natural_key, read_keras_h5
from transformer.checkpoint.safetensors import all_finite
from transformer.core.text import quoted

__all__ = ["read_tf_weights", "pytorch_name", "FILE_NAME"]

FILE_NAME = "tf_model.h5"
_DROPPED_SCOPE = re.compile(r"/[^/]*___([^/]*)/")  # transformers' "$1___$2" -> "$2"
_EMPTY_LEVELS = re.compile(r"//+")
_LAST_LEVEL = {"kernel": "weight", "embeddings": "weight", "gamma": "weight", "beta": "bias"}
MAX_SCOPE_MARKERS = 10  # "___" in one name: transformers refuses more (its ReDoS check)


def read_tf_weights(data_or_path, label: str, limit: int | None = None
                    ) -> dict[str, np.ndarray]:
    """{PyTorch weight name: float32 array} of a tf_model.h5, in natural order of the names.

    data_or_path: the file's bytes, or a path to it. label: where it is, for the sentences ("the
    folder 'opus-mt-en-de'"; they read "tf_model.h5 in the folder 'opus-mt-en-de' ..."). Every
    failure is a CheckpointError naming the file. limit: the file's bytes at most
    (by default an upload's, read_input's)."""
    where = f"{FILE_NAME} in {label}"
    data = read_input(data_or_path, where, limit)
    if not data.startswith(HDF5_MAGIC):
        raise CheckpointError(f"{where} is not an HDF5 file (the weights transformers' TF "
                              "classes save); it may be damaged or not that file.")
    try:
        stored = read_keras_h5(data, name=FILE_NAME, limit=limit)
    except CheckpointError as err:  # its errors begin with the quoted name: say where it is
        message, prefix = str(err), repr(FILE_NAME)
        raise CheckpointError(where + message[len(prefix):] if message.startswith(prefix)
                              else f"{where}: {message}") from None
    weights: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    for path, array in stored.items():
        name, transpose = pytorch_name(path, where, array.ndim)
        if transpose:
            array = np.ascontiguousarray(array.T)
        if not all_finite(array):
            raise CheckpointError(f"{where} holds NaN or infinite values in {quoted(path)} "
                                  "(training diverged?).")
        if name in weights:
            if weights[name].shape != array.shape or not np.array_equal(weights[name], array):
                raise CheckpointError(
                    f"{where} holds {quoted(sources[name])} and {quoted(path)}, which are both "
                    f"the weight {quoted(name)}, with different values: it is damaged.")
            continue
        weights[name], sources[name] = array, path
    return dict(sorted(weights.items(), key=lambda item: natural_key(item[0])))


def pytorch_name(path: str, where: str = FILE_NAME, ndim: int = 2) -> tuple[str, bool]:
    """(the PyTorch name, whether the array is transposed) of the array at `path` in the file
    ("model/tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0" ->
    ("model.encoder.layers.0.fc1.weight", True)); ndim: the array's dimensions."""
    variable = path.split("/", 1)[1] if "/" in path else path  # below the Keras layer's group
    name = variable.replace(":0", "")  # the device suffix, as transformers drops it
    if name.count("___") > MAX_SCOPE_MARKERS:
        raise CheckpointError(f"{where} names a weight {quoted(path)} with more than "
                              f"{MAX_SCOPE_MARKERS} '___' scopes; transformers refuses it too.")
    name = _DROPPED_SCOPE.sub(r"/\1/", name).replace("_._", "/")
    levels = _EMPTY_LEVELS.sub("/", name).split("/")
    if len(levels) > 1:
        levels = levels[1:]  # the model's name ("tf_marian_mt_model") or a shared scope
    last = levels[-1]
    transpose = last == "kernel"
    if transpose and ndim != 2:
        raise CheckpointError(f"{where} holds {quoted(path)}, a kernel of {ndim} dimensions; "
                              "only dense layers' kernels (2) are read.")
    levels[-1] = _LAST_LEVEL.get(last, last)
    name = ".".join(levels)
    if not name or any(not level for level in levels):
        raise CheckpointError(f"{where} holds {quoted(path)}, which names no weight.")
    return name, transpose

