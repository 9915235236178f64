"""transformer.checkpoint.readers: weight files read as data, every failure a sentence naming the file."""

import io
import zipfile

import h5py
import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import (
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


def test_natural_key_never_converts_a_digit_run():
    """"²" is a digit to str.isdigit but not to int(); a run of 5,000 digits is past Python's
    int() limit (4,300): both are names like any other, the runs ordered as numbers."""
    long_run = "9" * 5000
    names = [f"d{long_run}", "d²", "d10", "d2", "d010", f"d1{long_run}"]
    assert sorted(names, key=natural_key) == ["d2", "d010", "d10", f"d{long_run}",
                                              f"d1{long_run}", "d²"]


def test_h5_weight_names_with_a_digit_run_past_int_are_read_in_order():
    name = "layers/dense_" + "7" * 5000 + "/vars/0"

    def build(f):
        f.create_dataset(name, data=np.ones(2, np.float32))
        f.create_dataset("layers/dense_2/vars/0", data=np.ones(2, np.float32))
    assert list(read_keras_h5(_h5(build), name="w.h5")) == ["layers/dense_2/vars/0", name]


# ------------------------------------------------------------------ hostile files (issue 15)
def test_h5_a_group_linked_into_itself_is_refused_not_walked_forever():
    def build(f):
        group = f.create_group("layers/dense")
        group.create_dataset("vars/0", data=np.ones((2, 2), np.float32))
        group["again"] = group
    with pytest.raises(CheckpointError, match="links the group 'layers/dense/again' into itself"):
        read_keras_h5(_h5(build), name="w.h5")


def test_h5_declared_sizes_are_bounded_by_the_file_before_anything_is_read():
    """A chunked dataset whose chunks were never written reads as its fill value: 900 MB from a
    file of a few kilobytes, unless the declared sizes are checked first."""
    def build(f):
        f.create_dataset("layers/d/vars/0", data=np.ones((2, 2), np.float32))
        f.create_dataset("layers/big/vars/0", (225 * 2**10, 2**10), np.float32, chunks=(1024, 1024))
    data = _h5(build)
    assert len(data) < 100_000
    with pytest.raises(CheckpointError, match=r"'w\.h5' declares more weights than it can hold: "
                                              r"at least 900\.0 MB"):
        read_keras_h5(data, name="w.h5")


def test_h5_too_many_objects_or_too_deep_is_refused():
    deep = _h5(lambda f: f.create_dataset("/".join(["g"] * 70) + "/0", data=np.ones(2)))
    with pytest.raises(CheckpointError, match="nested more than 64 groups deep"):
        read_keras_h5(deep, name="w.h5")


def test_h5_a_filter_hdf5_lacks_is_damage_not_a_plugin_to_load():
    def build(f):
        dataset = f.create_dataset("layers/d/vars/0", (4, 4), np.float32, chunks=(4, 4),
                                   compression=32015, allow_unknown_filter=True)
        dataset.id.write_direct_chunk((0, 0), bytes(64))
    with pytest.raises(CheckpointError, match="'w.h5' stores the array 'layers/d/vars/0' through "
                                              "the HDF5 filter 32015; only gzip and shuffle"):
        read_keras_h5(_h5(build), name="w.h5")


def _keras(members, method=zipfile.ZIP_DEFLATED):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


def test_keras_archive_is_unpacked_within_its_declared_size():
    """The weights member declares its real size but inflates to 64 MB of zeros: zipfile would
    hand all of it over; the bounded reader stops one byte past the declared size."""
    import zlib

    weights = _h5(lambda f: f.create_dataset("layers/d/vars/0", data=np.ones((2, 2), np.float32)))
    data = _keras({"model.weights.h5": weights}, zipfile.ZIP_STORED)
    stream = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = stream.compress(bytes(64 * 2**20)) + stream.flush()
    start = data.index(weights)
    local = bytearray(data[:start])
    local[8:10] = (8).to_bytes(2, "little")  # method: deflated
    local[18:22] = len(bomb).to_bytes(4, "little")  # compressed size
    directory = bytearray(data[start + len(weights):])
    directory[10:12] = (8).to_bytes(2, "little")
    directory[20:24] = len(bomb).to_bytes(4, "little")
    end = directory.rindex(b"PK\x05\x06")
    directory[end + 16:end + 20] = (len(local) + len(bomb)).to_bytes(4, "little")
    with pytest.raises(CheckpointError, match="unpacks to more than the .* bytes its header "
                                              "declares"):
        read_keras_archive(bytes(local) + bomb + bytes(directory), name="m.keras")


@pytest.mark.parametrize("method, says", [(zipfile.ZIP_BZIP2, "version 4.6"),
                                          (zipfile.ZIP_LZMA, "version 6.3")])
def test_keras_archive_methods_the_bounded_reader_does_not_read_are_refused(method, says):
    weights = _h5(lambda f: f.create_dataset("layers/d/vars/0", data=np.ones((2, 2), np.float32)))
    with pytest.raises(CheckpointError, match=says):
        read_keras_archive(_keras({"model.weights.h5": weights}, method), name="m.keras")


def _bundle(entries, data=b""):
    """A TF checkpoint written field by field (tests/fuzz_formats.py), so that fields can lie."""
    from fuzz_formats import TF_SUFFIX, bundle_entry, bundle_header, sstable

    items = sorted((f"model/{name}{TF_SUFFIX}".encode(), bundle_entry(**fields))
                   for name, fields in entries.items())
    return sstable([(b"", bundle_header())] + items), data


def test_tf_checkpoint_hand_written_reads_like_tensorflow_writes_it():
    from fuzz_formats import masked_crc32c

    half = np.arange(4, dtype="<f2").tobytes()
    whole = np.arange(6, dtype="<f4").tobytes()
    index, data = _bundle({"w": dict(dtype=1, shape=(2, 3), offset=0, size=24,
                                     crc=masked_crc32c(whole)),
                           "h": dict(dtype=19, shape=(4,), offset=24, size=8,
                                     crc=masked_crc32c(half))}, whole + half)
    arrays = read_tf_checkpoint(index, data, name="ckpt")
    assert list(arrays) == ["model/h", "model/w"]
    np.testing.assert_array_equal(arrays["model/w"], np.arange(6).reshape(2, 3))
    assert arrays["model/h"].dtype == np.float32


@pytest.mark.parametrize("fields, says", [
    # TensorFlow's own reader aborts the process on these (Check failed: d >= 0)
    (dict(shape=(-1, 2)), r"the shape \[-1, 2\], which no array has"),
    (dict(shape=(-32, -64)), r"the shape \[-32, -64\]"),
    (dict(shape=(2**31, 2**31, 2**31), size=24), r"the shape \[2147483648, 2147483648, "
                                                  r"2147483648\]: a dimension below 0 or above"),
    # a zero dimension does not hide a huge other one (NumPy: "array is too big")
    (dict(shape=(0, 2**63 - 1), size=0), r"the variable 'model/w' has the shape \[0, "
                                         r"9223372036854775807\]: a dimension"),
    (dict(shape=(2**14, 2**14, 2**14), size=24), r"declares more than 268,435,456 values"),
    (dict(offset=2**40), r"at 1,099,511,627,776 of the data file"),
    (dict(dtype=7), r"holds 'model/w' of type string; only float weights"),
    (dict(dtype=999), r"of type an unknown type \(999\)"),
    (dict(slices=[[(0, 1), (0, -1)]]), "split in parts"),
])
def test_tf_checkpoint_entries_are_checked_before_the_data_is_read(fields, says):
    index, data = _bundle({"w": {**dict(dtype=1, shape=(2, 3), offset=0, size=24), **fields}},
                          bytes(24))
    with pytest.raises(CheckpointError, match=says):
        read_tf_checkpoint(index, data, name="ckpt")


def test_tf_checkpoint_index_that_is_not_a_proto_is_a_sentence():
    from fuzz_formats import bundle_header, sstable

    index = sstable([(b"", bundle_header()), (b"model/w/.ATTRIBUTES/VARIABLE_VALUE", b"\xff" * 40)])
    with pytest.raises(CheckpointError, match="the .index entry of 'model/w' is damaged"):
        read_tf_checkpoint(index, bytes(24), name="ckpt")
    index = bytearray(_bundle({"w": dict(dtype=1, shape=(2, 3), size=24)})[0])
    index[20] ^= 0xFF  # inside a block: its checksum no longer fits
    with pytest.raises(CheckpointError, match="could not be read: its .index is damaged"):
        read_tf_checkpoint(bytes(index), bytes(24), name="ckpt")


def test_tf_checkpoint_written_by_hand_is_one_tensorflow_reads(tmp_path):
    """The fuzz test's TF checkpoints are written field by field: TensorFlow's own reader reads
    the valid one as ours does, so the hostile ones are mutations of a real checkpoint."""
    import tensorflow as tf
    from fuzz_formats import TF_SUFFIX, tf_bundle

    index, data = tf_bundle()
    (tmp_path / "t.index").write_bytes(index)
    (tmp_path / "t.data-00000-of-00001").write_bytes(data)
    reader = tf.train.load_checkpoint(str(tmp_path / "t"))
    ours = read_tf_checkpoint(index, data, name="t")
    assert sorted(reader.get_variable_to_shape_map()) == sorted(k + TF_SUFFIX for k in ours)
    for key, value in ours.items():
        np.testing.assert_array_equal(reader.get_tensor(key + TF_SUFFIX), value)


# ------------------------------------------------------------------ hostile files (issue 25)
def _gzip_dataset(f, name, data, **options):
    return f.create_dataset(name, data=data, chunks=(2, 3), compression="gzip", **options)


@pytest.mark.parametrize("options", [{}, {"shuffle": True}])
@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<f2", "<f8"])
def test_h5_filtered_chunks_are_inflated_here_as_h5py_reads_them(options, dtype, monkeypatch):
    """Filtered chunks are never handed to HDF5 (whose deflate filter inflates a chunk whole,
    however large): they are read raw and inflated here, and give what h5py gives, edge chunks,
    a chunk never written (the fill value) and the shuffle filter included."""
    values = np.arange(35, dtype=dtype).reshape(5, 7) / 3

    def build(f):
        _gzip_dataset(f, "layers/d/vars/0", values, **options)
        sparse = f.create_dataset("layers/d/vars/1", (5, 7), dtype, chunks=(2, 3),
                                  compression="gzip", fillvalue=0.5, **options)
        sparse[0:2, 3:6] = 1.0  # one chunk of six written
    data = _h5(build)
    with h5py.File(io.BytesIO(data), "r") as f:
        expected = {name: f[name][()].astype(np.float32) for name in
                    ("layers/d/vars/0", "layers/d/vars/1")}
    read_by_hdf5 = h5py.Dataset.__getitem__

    def unfiltered_only(self, key):
        assert self.compression is None, "HDF5 was asked to inflate a chunk"
        return read_by_hdf5(self, key)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", unfiltered_only)
    arrays = read_keras_h5(data, name="w.h5")
    assert arrays.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(arrays[name], value)
    assert arrays["layers/d/vars/1"][0, 0] == 0.5 and arrays["layers/d/vars/1"][0, 3] == 1.0


def test_h5_a_chunk_that_inflates_past_its_declared_size_is_refused():
    """A (4, 4) float32 dataset's one chunk (64 bytes declared) holding 64 MB of zeros
    deflated (~64 KB): HDF5's own deflate filter inflates all of it (memory grew by 1.5 GB from
    a 2.9 MB file) before it keeps the first 64 bytes; it is refused at byte 65."""
    import zlib

    def build(f):
        dataset = f.create_dataset("layers/d/vars/0", data=np.ones((4, 4), np.float32),
                                   chunks=(4, 4), compression="gzip")
        dataset.id.write_direct_chunk((0, 0), zlib.compress(bytes(64 * 2**20), 9))
    data = _h5(build)
    assert len(data) < 200_000
    with pytest.raises(CheckpointError, match=r"'w\.h5' holds a compressed chunk of "
                                              r"'layers/d/vars/0' that inflates past its declared "
                                              r"size of 64 bytes"):
        read_keras_h5(data, name="w.h5")


def test_h5_a_chunk_larger_than_its_array_is_refused():
    """A resizable (4, 4) array in chunks of (4096, 4096): each chunk may inflate to 64 MB of
    its own declared size, whatever the array's; Keras never writes one."""
    import zlib

    def build(f):
        dataset = f.create_dataset("layers/d/vars/0", data=np.ones((4, 4), np.float32),
                                   chunks=(4096, 4096), maxshape=(None, None),
                                   compression="gzip")
        dataset.id.write_direct_chunk((0, 0), zlib.compress(bytes(64 * 2**20), 9))
    with pytest.raises(CheckpointError, match=r"'w\.h5' stores the array 'layers/d/vars/0' "
                                              r"\(4, 4\) in chunks of \(4096, 4096\), larger"):
        read_keras_h5(_h5(build), name="w.h5")


@pytest.mark.parametrize("chunk, says", [(b"not zlib at all", "is damaged"),
                                         (None, "is truncated")])
def test_h5_a_damaged_gzip_chunk_is_a_sentence(chunk, says):
    import zlib

    chunk = chunk or zlib.compress(bytes(64))[:-6]

    def build(f):
        dataset = f.create_dataset("layers/d/vars/0", data=np.ones((4, 4), np.float32),
                                   chunks=(4, 4), compression="gzip")
        dataset.id.write_direct_chunk((0, 0), chunk)
    with pytest.raises(CheckpointError, match=f"'w.h5' holds a compressed chunk of "
                                              f"'layers/d/vars/0' that {says}"):
        read_keras_h5(_h5(build), name="w.h5")


def test_h5_a_dataset_of_a_huge_empty_shape_is_refused_by_its_dimension():
    """(0, 2**40): no bytes, but NumPy cannot make the array; each dimension is checked."""
    def build(f):
        f.create_dataset("layers/d/vars/0", data=np.ones((2, 2), np.float32))
        f.create_dataset("layers/e/vars/0", (0, 2**40), np.float32)
    with pytest.raises(CheckpointError, match=r"'w\.h5': the array 'layers/e/vars/0' has the "
                                              r"shape \[0, 1099511627776\]: a dimension"):
        read_keras_h5(_h5(build), name="w.h5")
