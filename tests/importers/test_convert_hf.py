"""python -m transformer.convert hf: any Hugging Face family the registry reads (by config.json's
model_type) written as our checkpoint, and the command line the app shows for one
(transformer.importers.cli.hf_argv)."""

from pathlib import Path

import numpy as np
import pytest

from transformer.importers.cli import HF_COMMANDS, hf_argv, main
from transformer.importers.hf import FAMILIES, bart
from transformer.inference.session import load_checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_hf_writes_a_bart_folder_as_a_checkpoint_that_opens_as_the_folder(tmp_path, capsys):
    out = tmp_path / "bart.ckpt"
    assert main(["hf", "--model-dir", str(FIXTURES / "bart"), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    written, opened = load_checkpoint(out), bart.FAMILY.convert(FIXTURES / "bart")
    assert written.config == opened.config
    assert written.metadata["source"]["command"] == (
        f"python -m transformer.convert hf --model-dir {FIXTURES / 'bart'} --out {out}")
    sentence = "Hello world."
    assert written.encode_source(sentence) == opened.encode_source(sentence)
    ours, theirs = written.attention(sentence), opened.attention(sentence)
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(ours[kind], theirs[kind], atol=1e-6)


def test_the_export_keeps_the_generation_config_and_decodes_as_the_folder(tmp_path):
    """The folder's generation_config.json travels in the checkpoint (an optional member): the
    export searches as the folder does (BART's 4 beams), and a file without one still opens."""
    import zipfile

    from transformer import CheckpointError

    out = tmp_path / "bart.ckpt"
    assert main(["hf", "--model-dir", str(FIXTURES / "bart"), "--out", str(out)]) == 0
    folder, written = bart.FAMILY.convert(FIXTURES / "bart"), load_checkpoint(out)
    assert written.generation == folder.generation and written.generation.num_beams == 4
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        member = archive.read("generation_config.json")
    assert names[-1] == "weights.safetensors"  # the weights still end the file
    assert member == (FIXTURES / "bart" / "generation_config.json").read_bytes()
    sentence = "the black cat sleeps"
    assert written.generate(sentence).token_ids == folder.generate(sentence).token_ids
    # Rewritten without it (an older export), or with a hostile one, or with another file.
    def rewrite(path, extra: dict, drop=("generation_config.json",)):
        with zipfile.ZipFile(out) as src, zipfile.ZipFile(path, "w") as dst:
            for info in src.infolist():
                if info.filename not in drop:
                    dst.writestr(info, src.read(info.filename))
            for name, data in extra.items():
                dst.writestr(name, data)
        return path
    plain = load_checkpoint(rewrite(tmp_path / "plain.ckpt", {}))
    assert plain.generation is None and plain.config == written.config
    with pytest.raises(CheckpointError, match="num_beams"):
        load_checkpoint(rewrite(tmp_path / "bad.ckpt",
                                {"generation_config.json": b'{"num_beams": "four"}'}))
    with pytest.raises(CheckpointError, match="unexpected file 'notes.json'"):
        load_checkpoint(rewrite(tmp_path / "extra.ckpt", {"notes.json": b"{}"}, drop=()))


def test_hf_reads_a_marian_folder_too(tmp_path):
    out = tmp_path / "opus.ckpt"
    assert main(["hf", "--model-dir", str(FIXTURES / "marian"), "--out", str(out)]) == 0
    assert load_checkpoint(out).metadata["recipe"] == "marian"


def test_a_folder_of_no_family_read_here_is_a_sentence(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    assert main(["hf", "--model-dir", str(tmp_path), "--out", str(tmp_path / "x.ckpt")]) == 2
    err = capsys.readouterr().err
    assert "model_type 'gpt2'" in err and "Traceback" not in err
    assert not (tmp_path / "x.ckpt").exists()


def test_the_command_line_of_each_family_is_one_the_cli_takes():
    for family in FAMILIES:
        argv = hf_argv(family.recipe.name, "MODEL_DIR", "m.ckpt")
        assert argv[3] == (family.recipe.name if family.recipe.name in HF_COMMANDS else "hf")
        assert argv[4:] == ["--model-dir", "MODEL_DIR", "--out", "m.ckpt"]
    assert hf_argv("marian", "D", "o.ckpt")[3] == "marian"  # Marian keeps its own subcommand
    assert hf_argv("bart", "D", "o.ckpt")[3] == "hf"


@pytest.mark.parametrize("model_type, family", [("bart", "BART"), ("t5", "T5"),
                                                ("mbart", "mBART"), ("pegasus", "Pegasus")])
def test_a_marian_folder_whose_config_names_another_family_says_so(model_type, family):
    """A Marian folder whose config.json says model_type "bart" (or another family's): the
    sentence names what that family misses and that the files are a Marian model's (issue 37:
    the upload reader failed with a ValueError once)."""
    import json as json_

    from transformer import CheckpointError
    from transformer.importers import load_checkpoint as open_model

    files = {p.name: p.read_bytes() for p in sorted((FIXTURES / "marian").iterdir())
             if p.suffix in (".json", ".safetensors", ".spm")}
    config = json_.loads(files["config.json"])
    files["config.json"] = json_.dumps({**config, "model_type": model_type}).encode()
    with pytest.raises(CheckpointError, match=f"The {family} model in the given files is "
                                              r"missing .* The files hold source.spm and "
                                              r"target.spm, which a Marian model has"):
        open_model(files)
