"""Two kinds of source (issue 36): a model the person running the server names (a folder, a
Hugging Face name from the local cache) opens deep and wide, in every precision and layout the
hub uses; a stranger's upload keeps every limit, refused from config.json before any weight is
read.

The deep model here is the recorded mBART fixture (pre-LN: each sublayer's input is normalised,
the residual stream is not) grown to 24 + 24 layers by repeating its layers: narrow, so it runs
in seconds, but as deep as flan-t5-large. Its F16, BF16 and sharded saves must compute what the
F32 save computes with the same (rounded) values; equality with transformers at full size is
bench/real_models.py's.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

from transformer import load_checkpoint
from transformer.checkpoint.format import CheckpointError
from transformer.core import limits
from transformer.importers import hf_family

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mbart"
LAYERS = 24
SOURCE = "the black cat sleeps"
DTYPE_NAMES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
               np.dtype(ml_dtypes.bfloat16): "BF16"}


def save_safetensors(arrays: dict, path: Path) -> None:
    """A safetensors file as the format says (header JSON, then each tensor's bytes), written
    here because safetensors' NumPy API has no bfloat16."""
    header, blobs, at = {}, [], 0
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": DTYPE_NAMES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


def deep_weights(layers: int = LAYERS) -> dict[str, np.ndarray]:
    """The fixture's weights with each stack's layers repeated to `layers`."""
    source = load_file(FIXTURE / "model.safetensors")
    pattern = re.compile(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.*)")
    kept = {n: a for n, a in source.items() if not pattern.fullmatch(n)}
    by_layer = {}
    for name, array in source.items():
        match = pattern.fullmatch(name)
        if match:
            by_layer.setdefault(match[1], {}).setdefault(int(match[2]), {})[match[3]] = array
    for stack, found in by_layer.items():
        for i in range(layers):
            for rest, array in found[i % len(found)].items():
                kept[f"model.{stack}.layers.{i}.{rest}"] = array
    return kept


def deep_folder(root: Path, name: str, dtype=np.float32, shards: int = 0,
                layers: int = LAYERS) -> Path:
    """The deep mBART in a folder: config.json with `layers` + `layers`, the tokenizer and
    generation files, the weights in `dtype`, in one file or split in `shards`."""
    folder = root / name
    folder.mkdir()
    for child in FIXTURE.iterdir():
        if child.name not in ("model.safetensors", "tf_model.h5", "recorded.npz", "config.json"):
            shutil.copy(child, folder / child.name)
    config = json.loads((FIXTURE / "config.json").read_text())
    config.update(encoder_layers=layers, decoder_layers=layers)
    (folder / "config.json").write_text(json.dumps(config))
    arrays = {n: a.astype(dtype) for n, a in deep_weights(layers).items()}
    if not shards:
        save_safetensors(arrays, folder / "model.safetensors")
        return folder
    names = sorted(arrays)
    weight_map = {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: arrays[n] for n in names[k::shards]}
        save_safetensors(part, folder / shard)
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(a.nbytes for a in arrays.values())},
         "weight_map": weight_map}))
    return folder


def forced_log_probs(ckpt) -> np.ndarray:
    maps = ckpt.attention(SOURCE, "le chat noir dort")
    return np.asarray(maps["log_probs"])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    return {
        "f32": deep_folder(root, "f32"),
        "f16": deep_folder(root, "f16", np.float16),
        "bf16": deep_folder(root, "bf16", ml_dtypes.bfloat16),
        "sharded": deep_folder(root, "sharded", shards=3),
        # the F32 model with its values rounded to each half precision, saved as F32
        "f16_as_f32": _rounded(root, "f16_as_f32", np.float16),
        "bf16_as_f32": _rounded(root, "bf16_as_f32", ml_dtypes.bfloat16),
    }


def _rounded(root: Path, name: str, dtype) -> Path:
    folder = deep_folder(root, name)
    arrays = load_file(folder / "model.safetensors")
    save_safetensors({n: a.astype(dtype).astype(np.float32) for n, a in arrays.items()},
                     folder / "model.safetensors")
    return folder


@pytest.fixture(scope="module")
def deep_f32(folders):
    return load_checkpoint(folders["f32"])


def test_a_named_folder_opens_24_plus_24_pre_ln_layers(deep_f32):
    assert deep_f32.budgets.named
    assert (deep_f32.config.num_encoder_layers, deep_f32.config.num_decoder_layers) == (24, 24)
    assert deep_f32.config.norm_first
    result = deep_f32.translate(SOURCE)
    assert result.token_ids and np.isfinite(forced_log_probs(deep_f32)).all()


def test_the_same_folder_as_an_upload_is_refused_from_its_config_before_its_weights(folders):
    files = {p.name: p.read_bytes() for p in folders["f32"].iterdir()}
    files["model.safetensors"] = b"\0" * 64  # never read: the config is refused first
    with pytest.raises(CheckpointError, match=r"num_encoder_layers is 24; the limit is 12"):
        hf_family(files).convert(files)
    with pytest.raises(CheckpointError, match=r"num_encoder_layers is 24; the limit is 12"):
        load_checkpoint(files)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_half_precision_computes_what_its_values_compute_in_float32(folders, kind):
    half = load_checkpoint(folders[kind])
    widened = load_checkpoint(folders[f"{kind}_as_f32"])
    np.testing.assert_allclose(forced_log_probs(half), forced_log_probs(widened),
                               rtol=0, atol=1e-5)
    assert half.translate(SOURCE).token_ids == widened.translate(SOURCE).token_ids
    # the files differ (2 bytes a value against 4), the models are the same
    assert half.content_hash != widened.content_hash


def test_a_sharded_model_equals_its_one_file_save(folders, deep_f32):
    sharded = load_checkpoint(folders["sharded"])
    np.testing.assert_array_equal(forced_log_probs(sharded), forced_log_probs(deep_f32))
    shard_names = [f["name"] for f in sharded.metadata["source"]["files"]]
    assert "model.safetensors.index.json" in shard_names
    assert "model-00003-of-00003.safetensors" in shard_names


def test_a_shard_the_index_names_that_is_missing_or_wrong_is_a_sentence(folders, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(folders["sharded"], broken)
    (broken / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing model-00002-of-00003\.safetensors, "
                                              r"which model\.safetensors\.index\.json names"):
        load_checkpoint(broken)
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    index["weight_map"] = {n: "../../etc/passwd" for n in index["weight_map"]}
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"names the shard '\.\./\.\./etc/passwd'"):
        load_checkpoint(broken)


def test_only_a_pickle_is_refused_with_how_to_convert(folders, tmp_path):
    pickled = tmp_path / "pickled"
    shutil.copytree(folders["f32"], pickled)
    (pickled / "model.safetensors").unlink()
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04 a pickle that must never be read")
    with pytest.raises(CheckpointError, match=r"only in pytorch_model\.bin, a pickle, which can "
                                              r"run code.*save_pretrained"):
        load_checkpoint(pickled)


def test_a_named_model_beyond_the_memory_available_is_refused_before_reading(folders):
    budgets = limits.named_budgets(available=100 * limits.MB)
    with pytest.raises(CheckpointError, match=r"would take about .* GB of memory; 0\.1 GB are "
                                              r"available"):
        load_checkpoint(folders["f32"], budgets=budgets)


def test_named_budgets_follow_the_model_not_the_upload_limits(deep_f32):
    assert deep_f32.budgets.decode_seconds == float("inf")
    # the model's own positions (64 in the fixture), not an upload's cut
    assert deep_f32.source_len == deep_f32.config.max_len
    upload = limits.UPLOAD
    assert limits.token_budget(deep_f32.config, upload) <= upload.input_tokens


def hub_cache(root: Path, repo: str, folder: Path) -> Path:
    """A Hugging Face cache holding `folder` as repository `repo`, laid out as huggingface_hub
    lays it out: blobs named by their SHA-256, a snapshot of links to them, refs/main."""
    base = root / ("models--" + repo.replace("/", "--"))
    commit = hashlib.sha1(repo.encode()).hexdigest()
    (base / "blobs").mkdir(parents=True)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(commit)
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for child in folder.iterdir():
        data = child.read_bytes()
        blob = base / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / child.name).symlink_to(Path("../../blobs") / blob.name)
    return snapshot


def test_a_hub_name_opens_from_the_local_cache_offline(folders, deep_f32, tmp_path,
                                                       monkeypatch):
    cache = tmp_path / "hub"
    hub_cache(cache, "someone/deep-mbart", folders["f32"])
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    ckpt = load_checkpoint("someone/deep-mbart")
    np.testing.assert_array_equal(forced_log_probs(ckpt), forced_log_probs(deep_f32))
    weights = next(f for f in ckpt.metadata["source"]["files"] if f["name"] == "model.safetensors")
    # the blob's name is its SHA-256: the cache key without reading the file again
    assert weights["sha256"] == hashlib.sha256(
        (folders["f32"] / "model.safetensors").read_bytes()).hexdigest()
    with pytest.raises(CheckpointError, match=r"not in the Hugging Face cache"):
        load_checkpoint("someone/not-downloaded")
