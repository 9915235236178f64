"""Our Hugging Face tokenizers against the ids transformers recorded for each family's fixture
(tests/fixtures/<family>/recorded.npz, written by tests/fixtures/make_<family>_fixture.py; the
layout is hf_fixture_common.RECORDED_LAYOUT): ``s{i}_source_ids`` of ``sentences[i]``,
``s{i}_forced_output_ids`` (the labels) of ``targets[i]``, and ``tok{j}_source_ids`` /
``tok{j}_target_ids`` of ``tokenizer_texts[j]``. Each fixture is read from its tokenizer.json and,
where the folder has them, from the family's original files alone (vocab.json + merges.txt,
spiece.model, sentencepiece.bpe.model). A fixture not yet built is skipped, saying so. No
transformers needed."""

from pathlib import Path

import numpy as np
import pytest

from transformer.tokenizers.hf_families import FAMILIES
from transformer.tokenizers.hf_files import read_tokenizer_config
from transformer.tokenizers.hf_pair import TOKENIZER_FILES, tokenizer_pair

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FOLDERS = ("bart", "mbart", "t5", "t5_v11", "m2m100", "nllb", "pegasus")


def fixture(folder):
    path = FIXTURES / folder
    if not (path / "recorded.npz").is_file():
        pytest.skip(f"tests/fixtures/{folder}/recorded.npz is not built yet "
                    f"(tests/fixtures/make_{folder.split('_')[0]}_fixture.py builds it)")
    files = {f: (path / f).read_bytes() for f in TOKENIZER_FILES if (path / f).is_file()}
    with np.load(path / "recorded.npz", allow_pickle=False) as npz:
        recorded = {k: npz[k] for k in npz.files}
    return files, recorded


def tokenizers(files):
    """[(what, source tokenizer, target tokenizer)]: from the folder's files (tokenizer.json
    wins where there is one), and from the family's original files alone where it has them."""
    family = read_tokenizer_config(files["tokenizer_config.json"])["family"]
    out = [("the folder's files", *tokenizer_pair(files))]
    originals = FAMILIES[family].files if family in FAMILIES else ()
    if "tokenizer.json" in files and originals and all(f in files for f in originals):
        alone = {k: v for k, v in files.items() if k != "tokenizer.json"}
        out.append((" + ".join(originals), *tokenizer_pair(alone)))
    return family, out


def cases(recorded):
    """(key, text, side) of every recorded id list."""
    out = []
    for i, text in enumerate(recorded.get("sentences", [])):
        out.append((f"s{i}_source_ids", str(text), "source"))
    for i, text in enumerate(recorded.get("targets", [])):
        out.append((f"s{i}_forced_output_ids", str(text), "target"))
    for j, text in enumerate(recorded.get("tokenizer_texts", [])):
        out.append((f"tok{j}_source_ids", str(text), "source"))
        out.append((f"tok{j}_target_ids", str(text), "target"))
    return [c for c in out if c[0] in recorded]


@pytest.mark.parametrize("folder", FOLDERS)
def test_ids_equal_transformers_recorded_ids(folder):
    files, recorded = fixture(folder)
    checked = cases(recorded)
    if not checked:
        pytest.skip(f"tests/fixtures/{folder}/recorded.npz holds no tokenizer ids")
    _, variants = tokenizers(files)
    for what, src, tgt in variants:
        for key, text, side in checked:
            tok = src if side == "source" else tgt
            got = tok.encode(text, add_start=True, add_end=True)
            assert got == recorded[key].tolist(), (folder, what, key, text)


@pytest.mark.parametrize("folder", FOLDERS)
def test_language_ids_and_specials(folder):
    files, recorded = fixture(folder)
    family, variants = tokenizers(files)
    for _, src, tgt in variants:
        for key in ("s0_source_ids", "tok0_source_ids"):
            if key in recorded and len(recorded[key]):
                ids = recorded[key].tolist()
                assert ids[:len(src.prefix_ids)] == src.prefix_ids
                assert ids[len(ids) - len(src.suffix_ids):] == src.suffix_ids
        if "decoder_start_token_id" in recorded:
            start = int(recorded["decoder_start_token_id"])
            assert 0 <= start < tgt.vocab_size
        if family in ("mbart", "mbart50", "nllb", "m2m100"):
            assert tgt.language_ids[tgt.language] in (tgt.prefix_ids + tgt.suffix_ids)
            for key, tok in (("src_lang_id", src), ("tgt_lang_id", tgt)):
                if key in recorded:  # the forced first token of a translation, and the source's
                    assert tok.language_ids[tok.language] == int(recorded[key]), (folder, key)
