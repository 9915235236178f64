"""transformer.importers.mapping: every missing, extra or mis-shaped weight, in every format, is a
sentence naming it (issue 25, item 3). The Keras files are the TF tutorial's dates model
(tests/fixtures/tutorial_dates) edited with h5py; the TF checkpoints are written field by field
(tests/fuzz_formats.py); the Marian files are tests/fixtures/marian's."""

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.importers.mapping import WeightMap

LAYER = "encoder/enc_layers/encoder_layer_1"
DECODER = "decoder/dec_layers/decoder_layer"


# ------------------------------------------------------------------ the helper
def test_take_names_the_missing_and_the_misshaped_weight():
    weights = WeightMap({"a": np.zeros((2, 3)), "b": np.zeros(4)}, "'w.h5'")
    with pytest.raises(CheckpointError, match=r"^'w\.h5' has no weight 'c' \(the query\)\.$"):
        weights.take("c", (2, 3), "the query")
    with pytest.raises(CheckpointError, match=r"^The weight 'a' \(the kernel\) in 'w\.h5' has "
                                              r"shape \(2, 3\), but the model expects \(3, 2\)\.$"):
        weights.take("a", (3, 2), "the kernel")
    assert weights.take("a", (2, None)).shape == (2, 3)  # None: any size there
    with pytest.raises(CheckpointError, match=r"^'w\.h5' has a weight 'b' that the model \(1 "
                                              r"layer\) does not have"):
        weights.check_all_used("the model (1 layer)")
    weights.take("b", (4,))
    weights.check_all_used("the model (1 layer)")


def test_the_unused_weights_are_counted_in_the_sentence():
    weights = WeightMap({f"w{i}": np.zeros(1) for i in range(3)}, "'w.h5'")
    with pytest.raises(CheckpointError, match=r"'w0' \(and 2 more\)"):
        weights.check_all_used("it")


# ------------------------------------------------------------------ Keras .weights.h5 (tutorial)
def _convert_h5(change):
    from fuzz_formats import h5_edit, vocabularies

    from transformer.importers.tf_tutorial import convert_tf_tutorial

    return convert_tf_tutorial({"m.weights.h5": h5_edit(change)}, *vocabularies().values())


def _delete(name):
    def change(h5):
        del h5[name]
    return change


@pytest.mark.parametrize("group, says", [
    (f"{LAYER}/ffn/layer_norm",
     r"^'m\.weights\.h5': encoder layer 2 \('encoder/enc_layers/encoder_layer_1'\) has no "
     r"LayerNormalization weights for its feed-forward \(expected a group like "
     r"'encoder/enc_layers/encoder_layer_1/ffn/layer_norm/vars' with gamma and beta\)\.$"),
    (f"{DECODER}/cross_attention/layernorm",
     r"decoder layer 1 .* no LayerNormalization weights for its cross attention"),
    (f"{LAYER}/self_attention/layernorm",
     r"encoder layer 2 .* no LayerNormalization weights for its self attention"),
    (f"{DECODER}/cross_attention/layernorm/vars/1",
     r"the layer '.*cross_attention/layernorm' has no LayerNormalization beta \(expected a "
     r"weight '.*cross_attention/layernorm/vars/1'\)"),
    (f"{DECODER}/causal_self_attention/mha/key_dense",
     r"the layer '.*causal_self_attention/mha' has no key projection \(expected a group like "
     r"'.*mha/key_dense/vars'\)"),
])
def test_a_keras_file_missing_a_group_names_it(group, says):
    """Before, a missing LayerNormalization group failed with "AttributeError: 'NoneType'
    object has no attribute 'array'"."""
    with pytest.raises(CheckpointError, match=says):
        _convert_h5(_delete(group))


def test_a_keras_file_with_a_misshaped_layer_norm_names_the_weight():
    name = f"{DECODER}/cross_attention/layernorm/vars/0"

    def change(h5):
        del h5[name]
        h5[name] = np.ones(5, np.float32)
    with pytest.raises(CheckpointError, match=rf"The weight '{name}' \(the LayerNormalization "
                                              r"gamma of .*\) in 'm\.weights\.h5' has shape "
                                              r"\(5,\), but the model expects \(32,\)\."):
        _convert_h5(change)


@pytest.mark.parametrize("name", [
    f"{LAYER}/backdoor/vars/0",  # a layer no recipe has
    f"{LAYER}/ffn/layer_norm/vars/2",  # a third variable of a LayerNormalization
    f"{LAYER}/ffn/layer_norm/vars/²",  # "²".isdigit() is True, int("²") fails
    f"{LAYER}/ffn/layer_norm/vars/" + "9" * 5000,  # past int()'s 4,300 digits
    "x" + "1" * 5000 + "/vars/0",
])
def test_a_keras_file_with_an_extra_weight_names_it(name):
    """A weight the mapping does not take means the file is not the model it seems to be; it
    is named (cut to 80 characters), not loaded and silently ignored."""
    def change(h5):
        h5.create_dataset(name, data=np.ones((4, 4), np.float32))
    with pytest.raises(CheckpointError, match=r"^'m\.weights\.h5' has a weight '.{10,80}' that "
                                              r"the TensorFlow tutorial's Transformer \(2 encoder "
                                              r"and 2 decoder layers\) does not have"):
        _convert_h5(change)


# ------------------------------------------------------------------ TF checkpoint (tutorial)
def _convert_bundle(change):
    from fuzz_formats import tf_bundle, vocabularies

    from transformer.importers.tf_tutorial import convert_tf_tutorial

    index, data = tf_bundle(change)
    return convert_tf_tutorial({"t.index": index, "t.data-00000-of-00001": data},
                               *vocabularies().values())


def test_a_tf_checkpoint_missing_a_layer_norm_group_names_it():
    def drop(entries, data):
        entries[:] = [e for e in entries if "encoder_layer_1/ffn/layer_norm/" not in e["key"]]
    with pytest.raises(CheckpointError, match=r"^'t': encoder layer 2 .* has no "
                                              r"LayerNormalization weights for its feed-forward"):
        _convert_bundle(drop)


def test_a_tf_checkpoint_tensor_of_a_huge_empty_shape_is_a_sentence():
    """(0, 2**63 - 1) holds no bytes; NumPy said "array is too big"."""
    def huge(entries, data):
        entries.append(dict(entries[0], key="model/extra/.ATTRIBUTES/VARIABLE_VALUE",
                            shape=(0, 2**63 - 1), size=0, offset=0))
    with pytest.raises(CheckpointError, match=r"the variable 'model/extra' has the shape "
                                              r"\[0, 9223372036854775807\]: a dimension"):
        _convert_bundle(huge)


# ------------------------------------------------------------------ safetensors (Marian, ours)
def _safetensors(shape, data=b""):
    import json
    import struct

    header = json.dumps({"w": {"dtype": "F32", "shape": shape,
                               "data_offsets": [0, len(data)]}}).encode()
    return struct.pack("<Q", len(header)) + header + data


@pytest.mark.parametrize("shape, says", [
    ([0, 2**63 - 1], r"invalid shape \[0, 9223372036854775807\] .* from 0 to"),
    ([0, 10**19], r"invalid shape \[0, 10000000000000000000\]"),
    ([2**20, 2**20, 2**20], r"shape \(1048576, 1048576, 1048576\): more values than the 0 "
                            r"bytes of data"),
])
def test_a_safetensors_shape_is_checked_dimension_by_dimension(shape, says):
    from transformer.checkpoint import safetensors

    raw = _safetensors(shape)
    with pytest.raises(CheckpointError, match=says):
        safetensors.arrays(raw, safetensors.header(raw))


def test_a_marian_weight_of_the_wrong_shape_says_what_it_is_for():
    from test_marian import safetensors_with

    from transformer.importers.hf.marian import FAMILY

    def reshape(tensors):
        tensors["final_logits_bias"] = np.zeros((1, 5), np.float32)
    with pytest.raises(CheckpointError, match=r"The weight 'final_logits_bias' \(the logits' "
                                              r"bias\) in model\.safetensors in the given files "
                                              r"has shape \(1, 5\), but config\.json describes"):
        FAMILY.checkpoint_bytes(safetensors_with(reshape))
