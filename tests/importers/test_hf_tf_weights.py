"""tf_model.h5 (transformers' TF classes' save_pretrained) read as data into PyTorch names.

tests/fixtures/<family>/tf_model.h5 is the fixture's own model.safetensors converted by
transformers 4.57 (TF<Class>.from_pretrained(folder, from_pt=True).save_pretrained), checked by
transformers to give the PyTorch model's logits (tests/fixtures/make_tf_h5_fixtures.py). Read by
read_tf_weights, it must be model.safetensors name for name and value for value, except what the
TF file holds beside it (TF_ONLY), and the family importers must map both to the same weights.
"""

import io
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import natural_key
from transformer.importers.hf import bart, marian, mbart, pegasus, t5
from transformer.importers.hf.tf_weights import pytorch_name, read_tf_weights

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TOL = 1e-6
LABEL = "the folder 'opus-mt-xx-yy'"
WHERE = "tf_model.h5 in the folder 'opus-mt-xx-yy'"

# Names the TF file holds beside model.safetensors' (transformers 5 wrote the fixtures):
# TFMarianSinusoidalPositionalEmbedding's tables are Keras weights, so save_weights writes them;
# transformers 5's MarianMTModel does not save them (the importer checks them against Marian's
# sinusoids). BART, mBART and Pegasus save their position tables on both sides. Names neither
# side has: the tied lm_head.weight and model.{encoder,decoder}.embed_tokens.weight (T5:
# {encoder,decoder}.embed_tokens.weight), which are model.shared.weight (T5: shared.weight) in
# PyTorch and are kept once by save_pretrained; TF has one shared embedding layer (T5 saves it
# under "shared", "encoder" and "decoder", read as one shared.weight).
TF_ONLY = {
    "marian": {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"},
    "bart": set(), "mbart": set(), "pegasus": set(), "t5": set(), "t5_v11": set(),
}
IMPORTERS = {  # family: (its config.json mapping, its weight mapping)
    "marian": (marian.marian_config, marian.marian_weights),
    "bart": (bart.bart_config, bart.bart_weights),
    "mbart": (mbart.mbart_config, mbart.mbart_weights),
    "pegasus": (pegasus.pegasus_config, pegasus.pegasus_weights),
    "t5": (t5.t5_config, t5.t5_weights),
    "t5_v11": (t5.t5_config, t5.t5_weights),
}
REQUIRED = ("marian", "bart")  # the others are checked where the fixture has a tf_model.h5


def _families():
    return [pytest.param(family, marks=() if family in REQUIRED or
                         (FIXTURES / family / "tf_model.h5").exists() else
                         pytest.mark.skip(reason=f"no tests/fixtures/{family}/tf_model.h5"))
            for family in TF_ONLY]


def _h5_bytes(path: Path, edit) -> bytes:
    """The file at `path` with edit(h5py.File) applied, as bytes."""
    buffer = io.BytesIO(path.read_bytes())
    with h5py.File(buffer, "r+") as h5:
        edit(h5)
    return buffer.getvalue()


@pytest.mark.parametrize("family", _families())
def test_tf_weights_are_the_safetensors_weights(family):
    folder = FIXTURES / family
    ours = read_tf_weights(folder / "tf_model.h5", f"the folder {family!r}")
    expected = load_file(str(folder / "model.safetensors"))
    assert set(ours) - set(expected) == TF_ONLY[family]
    assert set(expected) <= set(ours)  # nothing model.safetensors holds is missing
    for name, array in expected.items():
        assert ours[name].dtype == np.float32 and ours[name].shape == array.shape, name
        np.testing.assert_allclose(ours[name], array, rtol=0, atol=TOL, err_msg=name)
    assert list(ours) == sorted(ours, key=natural_key)  # layers.2 before layers.10


@pytest.mark.parametrize("family", _families())
def test_the_family_importer_maps_both_to_the_same_weights(family):
    import json

    folder = FIXTURES / family
    config_of, weights_of = IMPORTERS[family]
    config = config_of(json.loads((folder / "config.json").read_text()))
    from_tf = weights_of(read_tf_weights((folder / "tf_model.h5").read_bytes(), "x"), config)
    from_safetensors = weights_of(load_file(str(folder / "model.safetensors")), config)
    assert set(from_tf) == set(from_safetensors)
    for name, array in from_safetensors.items():
        np.testing.assert_allclose(from_tf[name], array, rtol=0, atol=TOL, err_msg=name)


def test_a_file_saved_before_transformers_4_22_has_no_final_logits_bias():
    # TFMarianMTModel saved no final_logits_bias until transformers 4.22 (huggingface/
    # transformers#18833): older opus-mt tf_model.h5 files lack it; the importers use zeros
    import json

    def drop(h5):
        del h5["final_logits_bias"]

    data = _h5_bytes(FIXTURES / "marian" / "tf_model.h5", drop)
    ours = read_tf_weights(data, LABEL)
    assert "final_logits_bias" not in ours
    config = marian.marian_config(json.loads((FIXTURES / "marian" / "config.json").read_text()))
    mapped = marian.marian_weights(ours, config)
    assert mapped["output_bias"].shape == (189,) and not np.any(mapped["output_bias"])


def test_marian_positions_are_its_sinusoids():
    ours = read_tf_weights(FIXTURES / "marian" / "tf_model.h5", LABEL)
    positions = np.load(FIXTURES / "marian" / "recorded.npz")["positions"]
    for stack in ("encoder", "decoder"):
        np.testing.assert_allclose(ours[f"model.{stack}.embed_positions.weight"], positions,
                                   rtol=0, atol=TOL)


# (path in the file, transformers 4.57's convert_tf_weight_name_to_pt_weight_name, transposed)
TRANSFORMERS_NAMES = [
    ("model/tf_marian_mt_model/model/encoder/layers.0/self_attn/k_proj/kernel:0",
     "model.encoder.layers.0.self_attn.k_proj.weight", True),
    ("model/tf_marian_mt_model/model/decoder/layers.1/encoder_attn/out_proj/bias:0",
     "model.decoder.layers.1.encoder_attn.out_proj.bias", False),
    ("model/tf_bart_for_conditional_generation/model/encoder/layernorm_embedding/gamma:0",
     "model.encoder.layernorm_embedding.weight", False),
    ("model/tfm_bart_for_conditional_generation/model/decoder/layer_norm/beta:0",
     "model.decoder.layer_norm.bias", False),
    ("model/model.shared/model.shared/embeddings:0", "model.shared.weight", False),
    ("model/tf_marian_mt_model/model/decoder/embed_positions/embeddings:0",
     "model.decoder.embed_positions.weight", False),
    ("final_logits_bias/final_logits_bias:0", "final_logits_bias", False),
    ("shared/shared/shared/embeddings:0", "shared.weight", False),
    ("encoder/shared/shared/embeddings:0", "shared.weight", False),
    ("decoder/tft5_for_conditional_generation/decoder/block_._1/layer_._2/DenseReluDense/"
     "wi_0/kernel:0", "decoder.block.1.layer.2.DenseReluDense.wi_0.weight", True),
    ("encoder/tft5_for_conditional_generation/encoder/block_._0/layer_._0/SelfAttention/"
     "relative_attention_bias/embeddings:0",
     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", False),
    ("encoder/tft5_for_conditional_generation/encoder/final_layer_norm/weight:0",
     "encoder.final_layer_norm.weight", False),
    ("lm_head/tft5_for_conditional_generation/lm_head/kernel:0", "lm_head.weight", True),
    ("model/tf_marian_mt_model_1/model/x___encoder/fc1/kernel:0", "model.encoder.fc1.weight",
     True),
]


@pytest.mark.parametrize("path, name, transposed", TRANSFORMERS_NAMES)
def test_names_are_the_ones_transformers_gives(path, name, transposed):
    assert pytorch_name(path) == (name, transposed)


def test_bytes_a_path_and_a_memory_map_read_the_same():
    import mmap

    path = FIXTURES / "bart" / "tf_model.h5"
    from_path = read_tf_weights(path, LABEL)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        from_map = read_tf_weights(mapped, LABEL)
    from_bytes = read_tf_weights(path.read_bytes(), LABEL)
    assert list(from_path) == list(from_map) == list(from_bytes)
    for name, array in from_path.items():
        assert np.array_equal(array, from_map[name]) and np.array_equal(array, from_bytes[name])


def test_kernels_are_transposed_to_pytorch_layout():
    folder = FIXTURES / "marian"
    ours = read_tf_weights(folder / "tf_model.h5", LABEL)
    with h5py.File(folder / "tf_model.h5", "r") as h5:
        kernel = h5["model/tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0"][()]
    assert kernel.shape == (16, 32)  # TF Dense: (in, out)
    assert ours["model.encoder.layers.0.fc1.weight"].shape == (32, 16)  # PyTorch: (out, in)
    np.testing.assert_array_equal(ours["model.encoder.layers.0.fc1.weight"], kernel.T)


# ------------------------------------------------------------------ damaged files
DATA = (FIXTURES / "marian" / "tf_model.h5").read_bytes() if (
    FIXTURES / "marian" / "tf_model.h5").exists() else b""


@pytest.mark.parametrize("data", [
    pytest.param(DATA[: len(DATA) // 2], id="half"),
    pytest.param(DATA[:600], id="superblock-only"),
    pytest.param(DATA[:-64], id="last-bytes-cut"),
    pytest.param(DATA[:8], id="magic-only"),
    pytest.param(b"\x89HDF\r\n\x1a\n" + bytes(4096), id="zeros"),
    pytest.param(b"<html>Not found</html>", id="html"),
    pytest.param(b"\x80\x04\x95" + bytes(64) + b".", id="pickle"),
    pytest.param(b"", id="empty"),
    pytest.param(np.random.default_rng(0).bytes(200_000), id="noise"),
])
def test_damaged_files_are_sentences_fast(data):
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as err:
        read_tf_weights(data, LABEL)
    assert time.perf_counter() - start < 2
    assert str(err.value).startswith(WHERE), str(err.value)


def test_a_missing_file_is_a_sentence(tmp_path):
    with pytest.raises(CheckpointError, match="tf_model.h5 in the folder 'opus-mt-xx-yy'"):
        read_tf_weights(tmp_path / "tf_model.h5", LABEL)


def test_a_folder_is_not_a_file(tmp_path):
    with pytest.raises(CheckpointError, match="folder"):
        read_tf_weights(tmp_path, LABEL)


def test_nan_is_refused():
    def poison(h5):
        h5["final_logits_bias/final_logits_bias:0"][0, 3] = np.nan

    data = _h5_bytes(FIXTURES / "marian" / "tf_model.h5", poison)
    with pytest.raises(CheckpointError, match=f"^{WHERE} holds NaN.*final_logits_bias"):
        read_tf_weights(data, LABEL)


@pytest.mark.skipif(not (FIXTURES / "t5" / "tf_model.h5").exists(), reason="no T5 tf_model.h5")
def test_copies_of_one_weight_that_differ_are_refused():
    def edit(h5):
        h5["decoder/shared/shared/embeddings:0"][0, 0] += 1.0

    data = _h5_bytes(FIXTURES / "t5" / "tf_model.h5", edit)
    with pytest.raises(CheckpointError, match=r"both the weight 'shared.weight', with different"):
        read_tf_weights(data, LABEL)


def test_a_convolution_kernel_is_refused():
    def edit(h5):
        del h5["model/tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0"]
        h5["model/tf_marian_mt_model/model/encoder/layers.0/fc1/kernel:0"] = np.zeros(
            (3, 16, 32), np.float32)

    data = _h5_bytes(FIXTURES / "marian" / "tf_model.h5", edit)
    with pytest.raises(CheckpointError, match="a kernel of 3 dimensions"):
        read_tf_weights(data, LABEL)


def test_integer_arrays_and_links_are_refused():
    def integers(h5):
        h5["model/extra:0"] = np.zeros(3, np.int64)

    def link(h5):
        h5["model/elsewhere"] = h5py.ExternalLink("/etc/passwd", "/x")

    for edit, words in ((integers, "only float weights"), (link, "link")):
        data = _h5_bytes(FIXTURES / "marian" / "tf_model.h5", edit)
        with pytest.raises(CheckpointError, match=words) as err:
            read_tf_weights(data, LABEL)
        assert str(err.value).startswith(WHERE)


def test_too_many_groups_are_refused_fast():
    from transformer.checkpoint.readers import MAX_OBJECTS

    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        group = h5.create_group("model")
        for i in range(MAX_OBJECTS + 1):
            group.create_group(f"g{i}")
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match="groups and arrays") as err:
        read_tf_weights(buffer.getvalue(), LABEL)
    assert time.perf_counter() - start < 10
    assert str(err.value).startswith(WHERE)


def test_a_file_without_weights_is_refused():
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as h5:
        h5.create_group("model")
    with pytest.raises(CheckpointError, match=f"^{WHERE} holds no weights"):
        read_tf_weights(buffer.getvalue(), LABEL)
