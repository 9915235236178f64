"""transformer.readers: weight files read as data, every failure a sentence naming the file."""

import io
import zipfile

import h5py
import numpy as np
import pytest

from transformer.checkpoint import CheckpointError
from transformer.readers import (
    natural_key,
    read_keras_archive,
    read_keras_h5,
    read_tf_checkpoint,
    read_weights,
)


def _h5(build) -> bytes:
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        build(f)
    return buffer.getvalue()


def test_h5_arrays_in_natural_order_as_float32():
    def build(f):
        for i in (10, 2, 1):
            f.create_dataset(f"layers/dense_{i}/vars/0", data=np.full((2, 3), i, np.float64))
    arrays = read_keras_h5(_h5(build), name="w.weights.h5")
    assert list(arrays) == [f"layers/dense_{i}/vars/0" for i in (1, 2, 10)]
    assert all(a.dtype == np.float32 and a.shape == (2, 3) for a in arrays.values())
    assert arrays["layers/dense_10/vars/0"][0, 0] == 10


def test_h5_refuses_what_is_not_a_float_weight(tmp_path):
    ints = _h5(lambda f: f.create_dataset("layers/x/vars/0", data=np.arange(3)))
    with pytest.raises(CheckpointError, match="'w.h5' holds 'layers/x/vars/0' of type int64"):
        read_keras_h5(ints, name="w.h5")
    strings = _h5(lambda f: f.create_dataset("s", data=np.array([b"pickle"])))
    with pytest.raises(CheckpointError, match="only float weights"):
        read_keras_h5(strings, name="w.h5")
    (tmp_path / "secret.h5").write_bytes(_h5(lambda f: f.create_dataset("a", data=np.ones(2))))

    def external(f):
        f.create_dataset("a", data=np.ones(2, np.float32))
        f["b"] = h5py.ExternalLink(str(tmp_path / "secret.h5"), "a")
    with pytest.raises(CheckpointError, match="link 'b' to another place or file"):
        read_keras_h5(_h5(external), name="w.h5")


def test_h5_damaged_or_empty():
    data = _h5(lambda f: f.create_dataset("a", data=np.ones((64, 64), np.float32)))
    with pytest.raises(CheckpointError, match="'cut.h5' could not be read .*truncated"):
        read_keras_h5(data[: len(data) // 2], name="cut.h5")
    with pytest.raises(CheckpointError, match="holds no weights"):
        read_keras_h5(_h5(lambda f: f.create_group("layers")), name="empty.h5")
    with pytest.raises(CheckpointError, match="is not an HDF5 file"):
        read_keras_h5(b"not hdf5 at all", name="x.h5")


def test_keras_archive_reads_only_its_weights_member():
    weights = _h5(lambda f: f.create_dataset("layers/d/vars/0", data=np.ones((2, 2), np.float32)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", "this is never parsed {")
        z.writestr("model.weights.h5", weights)
    arrays = read_keras_archive(buffer.getvalue(), name="m.keras")
    assert list(arrays) == ["layers/d/vars/0"]
    assert read_weights({"m.keras": buffer.getvalue()}).keys() == arrays.keys()  # dispatch by content
    with pytest.raises(CheckpointError, match="'m.keras' is not a .keras archive"):
        read_keras_archive(b"PK\x03\x04 broken", name="m.keras")


def test_tf_checkpoint_skips_optimizer_and_counter(tmp_path):
    import tensorflow as tf

    class Holder(tf.Module):
        def __init__(self):
            self.dense = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
            self.step = tf.Variable(3, dtype=tf.int64)

    holder = Holder()
    prefix = tf.train.Checkpoint(model=holder).write(str(tmp_path / "ckpt"))
    index, data = prefix + ".index", prefix + ".data-00000-of-00001"
    with pytest.raises(CheckpointError, match="'ckpt' holds 'model/step' of type int64"):
        read_tf_checkpoint(index, data, name="ckpt")
    holder.step = tf.Variable(3.0)
    prefix = tf.train.Checkpoint(model=holder).save(str(tmp_path / "c2"))  # with save_counter
    arrays = read_weights(prefix + ".index")
    assert list(arrays) == ["model/dense", "model/step"]
    np.testing.assert_array_equal(arrays["model/dense"], np.arange(6).reshape(2, 3))
    files = {"c2.index": open(prefix + ".index", "rb").read()}
    with pytest.raises(CheckpointError, match="without its data file 'c2.data-00000-of-00001'"):
        read_weights(files)
    with pytest.raises(CheckpointError, match="could not be read"):
        read_tf_checkpoint(b"garbage index", b"", name="bad")


def test_natural_key():
    names = ["layer_with_weights-10", "layer_with_weights-9", "dense", "dense_1"]
    assert sorted(names, key=natural_key) == ["dense", "dense_1", "layer_with_weights-9",
                                              "layer_with_weights-10"]
