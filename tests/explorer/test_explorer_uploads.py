"""explorer.uploads (and transformer.importers.detect_recipe): what uploaded files are, which
recipe they are for, the guessed vocabulary sides, .zip unpacking, the cache key and the command
line, and the sentences for files that are not a model."""

import io
import zipfile
from pathlib import Path

import pytest

from explorer import uploads
from transformer.checkpoint.format import CheckpointError
from transformer.importers import HF_FAMILIES, detect_recipe, is_weights_file
from transformer.inference.session import load_checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TUTORIAL = {name: (FIXTURES / "tutorial_dates" / name).read_bytes()
            for name in ("model.weights.h5", "source_vocab.txt", "target_vocab.txt")}
MARIAN = {path.name: path.read_bytes() for path in sorted((FIXTURES / "marian").iterdir())}


def zipped(files: dict[str, bytes], folder: str = "") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(folder + name, data)
    return buffer.getvalue()


def test_weights_files_and_recipes_are_recognised():
    assert all(is_weights_file(n) for n in ("m.weights.h5", "m.keras", "ckpt-3.index",
                                            "ckpt-3.data-00000-of-00001", "model.h5"))
    assert not any(is_weights_file(n) for n in ("vocab.txt", "config.json", "model.ckpt"))
    assert detect_recipe(TUTORIAL) == "tf-tutorial"
    assert detect_recipe(MARIAN) == "marian"
    assert detect_recipe({"a.txt": b"x"}) is None
    assert detect_recipe({"broken.weights.h5": b"not hdf5", "a.txt": b""}) is None


@pytest.mark.parametrize("names, expected", [
    (("source_vocab.txt", "target_vocab.txt"), ("source_vocab.txt", "target_vocab.txt")),
    (("spa_vocab.txt", "eng_vocab.txt"), ("eng_vocab.txt", "spa_vocab.txt")),
    (("en_vocab.txt", "pt_vocab.txt"), ("pt_vocab.txt", "en_vocab.txt")),  # the tutorial: pt -> en
    (("tgt.txt", "src.txt"), ("src.txt", "tgt.txt")),
    (("b.txt", "a.txt"), ("a.txt", "b.txt")),  # nothing tells: the order of the names
])
def test_vocabulary_sides_are_guessed_from_the_names(names, expected):
    assert uploads.vocabulary_roles(names) == expected


def test_the_tutorials_files_are_read_as_the_tutorial():
    upload = uploads.read_upload({"README.md": b"notes", **TUTORIAL})
    assert (upload.recipe, upload.form) == ("tf-tutorial", "keras-mha")
    assert upload.weights == ["model.weights.h5"]
    assert upload.vocabularies == ("source_vocab.txt", "target_vocab.txt")
    assert upload.ignored == ["README.md"] and not upload.needs_heads and upload.asks
    assert uploads.read_upload(dict(reversed(list(TUTORIAL.items())))).digest == upload.digest


def test_a_zip_gives_the_same_files_as_the_files_themselves():
    files = uploads.read_upload(MARIAN)
    archive = uploads.read_upload({"opus.zip": zipped(MARIAN, "opus-mt-tiny/")})
    assert files.recipe == archive.recipe == "marian" and not archive.asks
    assert archive.files == files.files and archive.digest == files.digest
    # every file a Marian model is read from that the folder holds; of its weights in two
    # forms, model.safetensors (read first), not tf_model.h5; recorded.npz etc. not read
    assert sorted(archive.files) == sorted(n for n in HF_FAMILIES["marian"].folder_files
                                           if n in MARIAN and n != "tf_model.h5")
    assert "model.safetensors" in archive.files and "tf_model.h5" not in archive.files
    assert archive.label == "the archive 'opus.zip'"
    zipped_tutorial = uploads.read_upload({"t.zip": zipped({"__MACOSX/._x.txt": b"", **TUTORIAL})})
    assert zipped_tutorial.vocabularies == ("source_vocab.txt", "target_vocab.txt")


def test_the_key_follows_the_files_and_the_answers():
    upload = uploads.read_upload(TUTORIAL)
    plain = uploads.Choices("tf-tutorial", None, "source_vocab.txt", "target_vocab.txt")
    swapped = uploads.Choices("tf-tutorial", None, "target_vocab.txt", "source_vocab.txt")
    assert uploads.import_key(upload, plain) == uploads.import_key(upload, plain)
    assert uploads.import_key(upload, plain) != uploads.import_key(upload, swapped)
    assert uploads.command(upload, plain) == (
        "python -m transformer.convert tf-tutorial --weights model.weights.h5 --source-vocab "
        "source_vocab.txt --target-vocab target_vocab.txt --out model.ckpt")


def test_convert_gives_checkpoint_bytes_that_translate_as_the_converter():
    from transformer.importers.tf_tutorial import convert_tf_tutorial

    upload = uploads.read_upload(TUTORIAL)
    data = uploads.convert(upload, uploads.Choices("tf-tutorial", None, *upload.vocabularies))
    ckpt = load_checkpoint(data)
    expected = convert_tf_tutorial(*(FIXTURES / "tutorial_dates" / n for n in TUTORIAL))
    assert ckpt.translate("5 july 1987").text == expected.translate("5 july 1987").text
    assert ckpt.metadata["source"]["command"] == uploads.command(
        upload, uploads.Choices("tf-tutorial", None, *upload.vocabularies))


@pytest.mark.parametrize("files, says", [
    ({"notes.txt": b"a", "b.txt": b"b"}, "None of the files b.txt and notes.txt is a model"),
    ({"notes.txt": b"a"}, "The file notes.txt is not a model: give a .ckpt"),  # issue 38
    ({"model.weights.h5": TUTORIAL["model.weights.h5"], "a.txt": b""},
     "need two vocabulary files"),
    ({"m.zip": zipped(TUTORIAL), "x.txt": b""}, "Give either one .zip or the model's files"),
    ({"m.zip": b"PK\x03\x04 not really"}, "archive 'm.zip'"),
    ({"m.zip": zipped({"README": b"hi"})}, "holds no model file"),
    ({"m.zip": zipped({"a/v.txt": b"1", "b/v.txt": b"2", "m.weights.h5": b""})},
     "two files named 'v.txt'"),
    ({"model.weights.h5": b"garbage", "s.txt": b"", "t.txt": b""}, "model.weights.h5"),
])
def test_files_that_are_not_a_model_get_a_sentence(files, says):
    with pytest.raises(CheckpointError) as err:
        uploads.read_upload(files)
    assert says in str(err.value)


def test_answers_that_cannot_work_get_a_sentence():
    upload = uploads.read_upload(TUTORIAL)
    with pytest.raises(CheckpointError, match="Pick which of source_vocab.txt and "):
        uploads.check_choices(upload, uploads.Choices("tf-tutorial", None, "a.txt", "b.txt"))
    with pytest.raises(CheckpointError, match=r"is no Marian \(opus-mt\) model"):
        uploads.check_choices(upload, uploads.Choices("marian"))


# ------------------------------------------------------------------ any Hugging Face family
BART = {path.name: path.read_bytes() for path in sorted((FIXTURES / "bart").iterdir())}


def test_a_bart_folder_is_read_by_its_family_and_asks_nothing():
    from transformer.importers.hf import bart

    upload = uploads.read_upload(BART)
    assert upload.recipe == "bart" and not upload.asks
    assert sorted(upload.files) == sorted(n for n in BART if n in bart.FAMILY.folder_files
                                          and n != "tf_model.h5")  # model.safetensors is read
    # not read by BART's importer
    assert upload.ignored == ["recorded.npz", "tf_model.h5", "tokenizer_config.json"]
    archive = uploads.read_upload({"bart-tiny.zip": zipped(BART, "bart-tiny/")})
    assert archive.files == upload.files and archive.digest == upload.digest
    assert detect_recipe(BART) == "bart"


def test_a_bart_upload_opens_exports_and_names_the_cli_line_through_the_registry():
    from transformer.importers.hf import bart

    upload = uploads.read_upload({"bart-tiny.zip": zipped(BART, "bart-tiny/")})
    choices = uploads.Choices("bart")
    uploads.check_choices(upload, choices)
    line = uploads.command(upload, choices)
    assert line == "python -m transformer.convert hf --model-dir bart-tiny --out bart-tiny.ckpt"
    exported = load_checkpoint(uploads.convert(upload, choices))  # the export: our checkpoint
    expected = bart.FAMILY.convert(FIXTURES / "bart")
    assert exported.config == expected.config
    assert exported.metadata["source"]["command"] == line
    assert exported.translate("Hello world.").text == expected.translate("Hello world.").text
    # Marian keeps its own subcommand.
    marian = uploads.read_upload({"opus-mt-tiny.zip": zipped(MARIAN, "opus-mt-tiny/")})
    assert uploads.command(marian, uploads.Choices("marian")) == (
        "python -m transformer.convert marian --model-dir opus-mt-tiny --out opus-mt-tiny.ckpt")


def test_answers_of_another_family_get_a_sentence():
    upload = uploads.read_upload(BART)
    with pytest.raises(CheckpointError, match="is a BART model"):
        uploads.check_choices(upload, uploads.Choices("marian"))
    with pytest.raises(CheckpointError, match="is a BART model"):
        uploads.check_choices(upload, uploads.Choices("tf-tutorial", None, "a.txt", "b.txt"))
    with pytest.raises(CheckpointError, match=r"is a Marian \(opus-mt\) model"):
        uploads.check_choices(uploads.read_upload(MARIAN), uploads.Choices("bart"))
    with pytest.raises(CheckpointError, match="is no BART model"):
        uploads.check_choices(uploads.read_upload(TUTORIAL), uploads.Choices("bart"))


def test_a_config_of_a_family_not_read_here_is_named():
    config = b'{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}'
    with pytest.raises(CheckpointError, match="model_type 'gpt2'"):
        uploads.read_upload({"config.json": config, "model.safetensors": b""})
