"""Only regular files are read, by every entry point that takes a path (issue 25, item 4): the
converter's command line (a weights file, a ModelCheckpoint folder, a Marian folder),
read_weights and load_checkpoint. A FIFO, a link into /proc, a folder or a folder of too many
entries is a sentence, never a hang, an OSError or a traceback.

A FIFO here has a writer waiting in a thread: if anything opened it to read, it would get a few
bytes and the end of the file instead of waiting forever, so a regression fails instead of
hanging the suite."""

import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import read_weights
from transformer.importers import load_checkpoint
from transformer.importers.cli import main

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tests" / "fixtures" / "tutorial_dates"
MARIAN = ROOT / "tests" / "fixtures" / "marian"
PROC_MEM = Path("/proc/self/mem")
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
needs_proc = pytest.mark.skipif(not PROC_MEM.exists(), reason="no /proc here")


@pytest.fixture
def make_fifo():
    made = []

    def make(path: Path) -> Path:
        os.mkfifo(path)

        def feed():
            with open(path, "wb") as writer:  # blocks until a reader opens it
                writer.write(b"\x89HDF\r\n\x1a\n")
        thread = threading.Thread(target=feed, daemon=True)
        thread.start()
        made.append((path, thread))
        return path

    yield make
    for path, thread in made:  # release a writer nobody read from
        if thread.is_alive():
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            thread.join()
            os.close(fd)


def _cli(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return out.err


def _tutorial_args(weights, tmp_path):
    return ("tf-tutorial", "--weights", str(weights), "--source-vocab",
            str(TUTORIAL / "source_vocab.txt"), "--target-vocab", str(TUTORIAL / "target_vocab.txt"),
            "--out", str(tmp_path / "out.ckpt"))


# ------------------------------------------------------------------ the converter's command line
@needs_proc
def test_cli_weights_linked_to_proc_self_mem_is_a_sentence(tmp_path, capsys):
    (tmp_path / "model.weights.h5").symlink_to(PROC_MEM)
    err = _cli(capsys, *_tutorial_args(tmp_path / "model.weights.h5", tmp_path))
    assert err.startswith("error: ") and "model.weights.h5" in err


@needs_fifo
def test_cli_weights_that_are_a_fifo_is_a_sentence(tmp_path, capsys, make_fifo):
    err = _cli(capsys, *_tutorial_args(make_fifo(tmp_path / "model.weights.h5"), tmp_path))
    assert err.startswith("error: ") and "model.weights.h5" in err
    assert "not a regular file" in err


@needs_fifo
def test_cli_checkpoint_folder_with_a_fifo_index_is_a_sentence(tmp_path, capsys, make_fifo):
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    make_fifo(folder / ".index")
    make_fifo(folder / ".data-00000-of-00001")
    err = _cli(capsys, *_tutorial_args(folder, tmp_path))
    assert err.startswith("error: ") and ".index" in err and "not a regular file" in err


def test_cli_out_under_a_file_is_a_sentence(tmp_path, capsys):
    """Writing fails too: an OSError past the readers is a sentence, not a traceback."""
    (tmp_path / "a_file").write_bytes(b"")
    args = list(_tutorial_args(TUTORIAL / "model.weights.h5", tmp_path))
    args[-1] = str(tmp_path / "a_file" / "out.ckpt")
    err = _cli(capsys, *args)
    assert err.startswith("error: could not read or write") and "a_file" in err


# ------------------------------------------------------------------ TF checkpoint folders
def test_a_checkpoint_folder_of_too_many_entries_is_a_sentence(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for i in range(4097):
        (folder / f"f{i}").touch()
    with pytest.raises(CheckpointError, match=r"The folder 'ckpt' holds more than 4,096 files"):
        read_weights(folder)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0,
                    reason="permissions do not bind here")
def test_a_checkpoint_folder_that_cannot_be_listed_is_a_sentence(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0)
    try:
        with pytest.raises(CheckpointError, match=r"'.*locked' could not be read \(Permission"):
            read_weights(folder)
    finally:
        folder.chmod(0o700)


# ------------------------------------------------------------------ Marian folders
def _marian_folder(tmp_path) -> Path:
    folder = tmp_path / "opus-mt-xx"
    shutil.copytree(MARIAN, folder, ignore=shutil.ignore_patterns("*.npz"))
    return folder


@needs_fifo
def test_a_marian_folder_whose_config_is_a_fifo_says_so(tmp_path, make_fifo):
    """Before, a config.json that is not a regular file was skipped and called missing."""
    folder = _marian_folder(tmp_path)
    (folder / "config.json").unlink()
    make_fifo(folder / "config.json")
    with pytest.raises(CheckpointError, match="config.json") as raised:
        load_checkpoint(folder)
    assert "missing" not in str(raised.value)


@needs_proc
def test_a_marian_folder_with_weights_linked_to_proc_self_mem_is_a_sentence(tmp_path):
    folder = _marian_folder(tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(PROC_MEM)
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(folder)


def test_a_marian_folder_is_not_listed(tmp_path, monkeypatch):
    """Only the files a Marian model has are looked up by name: a folder of a million entries
    costs nothing."""
    folder = _marian_folder(tmp_path)

    def refuse(*_):
        raise AssertionError("the folder was listed")
    monkeypatch.setattr(Path, "iterdir", refuse)
    monkeypatch.setattr(os, "scandir", refuse)
    monkeypatch.setattr(os, "listdir", refuse)
    from transformer.importers.hf.marian import FAMILY

    assert FAMILY.read(folder)[1]["num_encoder_layers"] >= 1
