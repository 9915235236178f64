"""Issue 25, item 2 and 4: what a config implies is checked before anything is built (layers,
vocabulary, the work of one pass, the padding a recipe applies), and only regular files are
read, with the size cap from the file's stat and every OSError as a sentence."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from transformer.checkpoint.format import CheckpointError, check_size, read_input
from transformer.core import limits
from transformer.model.config import TransformerConfig
from transformer.model.weights import weight_shapes


def config(**sizes) -> TransformerConfig:
    values = dict(src_vocab_size=16, tgt_vocab_size=16, d_model=8, num_heads=2, dff=8,
                  num_encoder_layers=2, num_decoder_layers=2, max_len=64)
    values.update(sizes)
    return TransformerConfig(**values)


def weights_of(c: TransformerConfig) -> dict[str, np.ndarray]:
    """Zeros of every shape the config describes: the file holds what it says (so only the
    budget under test can refuse it)."""
    return {name: np.zeros(shape, np.float32) for name, shape in weight_shapes(c).items()}


def test_a_consistent_config_within_every_budget_passes():
    check_size(config(), weights_of(config()))
    for layers in ((8, 8), (12, 4), (4, 12)):  # flan-t5-small; deep encoder, shallow decoder
        allowed = config(num_encoder_layers=layers[0], num_decoder_layers=layers[1])
        check_size(allowed, weights_of(allowed))


@pytest.mark.parametrize("layers", [(64, 64), (24, 24), (12, 12), (9, 8), (1, 16), (13, 1)])
def test_many_narrow_layers_are_refused_before_anything_is_built(layers):
    """64 + 64 layers of width 5 were inside the old limits: 14 s to open and 48 s to the
    first translation (tracing and compiling grow with layers, not width)."""
    c = config(d_model=5, num_heads=1, dff=5, num_encoder_layers=layers[0],
               num_decoder_layers=layers[1])
    with pytest.raises(CheckpointError, match="layers") as err:
        check_size(c, weights_of(c))
    assert str(err.value).endswith(".") and "limit" in str(err.value)


def test_a_vocabulary_beyond_the_largest_real_one_is_refused():
    c = config(src_vocab_size=limits.MAX_VOCAB + 1, tgt_vocab_size=16)
    with pytest.raises(CheckpointError, match=r"src_vocab_size is 262,145; the limit is 262,144"):
        check_size(c, {})  # refused on the config alone, before the weights are counted


def test_padding_every_source_beyond_the_maps_or_the_work_budget_is_refused():
    """The Keras example pads every source to its position table's rows: 16,384 rows with 8
    heads made every translation allocate 8 GiB (and 2.4 GB with 2 heads)."""
    for heads in (8, 2):
        c = config(d_model=16, num_heads=heads, max_len=16_384, pad_source_to=16_384,
                   positional="learned")
        with pytest.raises(CheckpointError, match="padded to 16,384 ids"):
            check_size(c, weights_of(c))


def test_the_work_of_one_pass_bounds_the_budgets_of_a_wide_model():
    """pass_flops grows with layers x width x length; token and step budgets keep one pass
    within MAX_PASS_FLOPS, and a model whose pass fits reads its full budget."""
    small = config()
    assert limits.flops_length(small) == limits.MAX_POSITIONS
    wide = config(d_model=2048, num_heads=16, dff=8192, num_encoder_layers=8,
                  num_decoder_layers=8, src_vocab_size=250_000, tgt_vocab_size=250_000,
                  max_len=1024)
    n = limits.flops_length(wide)
    assert limits.MIN_POSITIONS <= n < limits.MAX_INPUT_TOKENS
    assert limits.pass_flops(wide, n) <= limits.MAX_PASS_FLOPS < limits.pass_flops(wide, n + 1)
    assert limits.token_budget(wide) <= n and limits.step_budget(wide) <= n
    opus = config(d_model=512, num_heads=8, dff=2048, num_encoder_layers=6, num_decoder_layers=6,
                  src_vocab_size=59_514, tgt_vocab_size=59_514, max_len=512)
    assert limits.flops_length(opus) > limits.MAX_INPUT_TOKENS  # real models are not cut by it


# ------------------------------------------------------------------ only regular files
def test_special_files_and_folders_are_refused_with_a_sentence(tmp_path):
    fifo = tmp_path / "model.weights.h5"
    os.mkfifo(fifo)  # reading it would block forever
    with pytest.raises(CheckpointError, match="not a regular file"):
        read_input(fifo, "the checkpoint")
    folder = tmp_path / "dates.ckpt"
    folder.mkdir()
    with pytest.raises(CheckpointError, match="is a folder"):
        read_input(folder, "the checkpoint")
    with pytest.raises(CheckpointError, match="not a regular file"):
        read_input("/dev/zero", "the checkpoint")  # endless
    link = tmp_path / "mem.ckpt"
    link.symlink_to("/proc/self/mem")  # a regular file to stat, whose read fails
    with pytest.raises(CheckpointError, match=r"could not be read \(.+\)\.$"):
        read_input(link, "the checkpoint")
    with pytest.raises(CheckpointError, match="No file at"):
        read_input(tmp_path / "missing.ckpt", "the checkpoint")


def test_the_size_cap_comes_from_the_stat_before_anything_is_read(tmp_path):
    sparse = tmp_path / "huge.ckpt"
    with open(sparse, "wb") as handle:  # 2 GB declared, nothing written: no read would end soon
        handle.truncate(2 * 2**30)
    with pytest.raises(CheckpointError, match=r"is 2048\.0 MB; the limit is 400 MB"):
        read_input(sparse, "the checkpoint")


def test_an_error_while_reading_an_upload_is_a_sentence():
    class Failing(io.RawIOBase):  # a stream whose disk fails mid-read
        def readable(self):
            return True

        def read(self, size=-1):
            raise OSError(5, "Input/output error")

    with pytest.raises(CheckpointError, match=r"^The checkpoint could not be read \(Input/output "
                                              r"error\)\.$"):
        read_input(Failing(), "the checkpoint")
