"""Every Hugging Face family against what transformers recorded (issue 39, item 5): one suite
over every recorded fixture (tests/fixtures/<name>/recorded.npz, made by
tests/fixtures/make_<family>_fixture.py with transformers on PyTorch CPU): the tokenizer's ids,
the logits and every attention map of the model eagerly and of the pages' compiled pass on
transformers' ids, and generate with the folder's generation_config.json, greedy and beam. A
family adds a row to RECORDED; what only one family has (its config's meaning, its generation
config's settings, its refusals) stays in its own test file."""

from pathlib import Path

import numpy as np
import pytest

from transformer.core.kinds import KINDS
from transformer.importers import hf_family
from transformer.inference.forward import forward
from transformer.inference.generation_config import read_generation_config
from transformer.inference.search_transformers import generate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = ("bart", "mbart", "t5", "t5_v11", "pegasus", "m2m100", "nllb")  # fixture folders
TOL = 1e-4
OUR_KEYS = {"encoder": "encoder_attention", "decoder": "decoder_attention",
            "cross": "cross_attention"}
_OPENED: dict[str, tuple] = {}


def opened(name: str):
    """(folder, the model opened as the app opens a folder, what transformers recorded)."""
    if name not in _OPENED:
        folder = FIXTURES / name
        with np.load(folder / "recorded.npz", allow_pickle=False) as npz:
            recorded = {key: npz[key] for key in npz.files}
        _OPENED[name] = (folder, hf_family(folder).convert(folder), recorded)
    return _OPENED[name]


@pytest.mark.parametrize("name", RECORDED)
def test_tokenization_equals_transformers(name):
    _, ckpt, rec = opened(name)
    for i, text in enumerate(rec["sentences"]):
        assert ckpt.encode_source(str(text)) == rec[f"s{i}_source_ids"].tolist(), i
    for i, text in enumerate(rec.get("targets", ())):  # typed targets, where recorded
        assert ckpt.encode_target(str(text)) == rec[f"s{i}_forced_output_ids"].tolist(), i
        # the decoder is fed start_id, then the target but its last id (shift_tokens_right)
        fed = [ckpt.config.start_id] + rec[f"s{i}_forced_output_ids"].tolist()[:-1]
        assert fed == rec[f"s{i}_forced_target_ids"].tolist(), i
    for j, text in enumerate(rec["tokenizer_texts"]):
        assert ckpt.encode_source(str(text)) == rec[f"tok{j}_source_ids"].tolist(), j
        assert ckpt.encode_target(str(text)) == rec[f"tok{j}_target_ids"].tolist(), j


@pytest.mark.parametrize("mode", ["forced", "greedy"])
@pytest.mark.parametrize("name", RECORDED)
def test_logits_and_every_map_equal_recorded(name, mode):
    """The model eagerly and the pages' compiled pass, on transformers' ids."""
    _, ckpt, rec = opened(name)
    for i in range(len(rec["sentences"])):
        source = rec[f"s{i}_source_ids"][None]
        target = rec[f"s{i}_{mode}_target_ids"][None]
        eager = ckpt.model((source, target), return_attention=True)
        compiled = forward(ckpt.model, source, target)
        np.testing.assert_allclose(eager["logits"].numpy()[0], rec[f"s{i}_{mode}_logits"],
                                   atol=TOL, err_msg=f"sentence {i} logits")
        for kind in KINDS:
            expected = rec.get(f"s{i}_{mode}_{kind}")
            if expected is None:  # the greedy pass records the decoder's maps only
                continue
            for ours in (eager[OUR_KEYS[kind]].numpy()[:, 0], compiled[OUR_KEYS[kind]][:, 0]):
                assert ours.shape == expected.shape
                np.testing.assert_allclose(ours, expected, atol=TOL,
                                           err_msg=f"sentence {i} {mode} {kind}")


@pytest.mark.parametrize("name", RECORDED)
def test_generate_equals_transformers_greedy_and_beam(name):
    """The folder's generation config as saved (a beam search) and the same greedily; the
    model's own generate decodes as the config says."""
    folder, ckpt, rec = opened(name)
    beam = read_generation_config((folder / "generation_config.json").read_bytes(), ckpt.config)
    assert beam.num_beams > 1
    for i in range(len(rec["sentences"])):
        source = rec[f"s{i}_source_ids"]
        assert generate(ckpt.model, source, beam.greedy()).token_ids == \
            rec[f"s{i}_greedy_ids"].tolist(), i
        searched = generate(ckpt.model, source, beam)
        assert searched.token_ids == rec[f"s{i}_beam_ids"].tolist(), i
        assert searched.score == pytest.approx(float(rec[f"s{i}_beam_score"]), abs=TOL)
    assert ckpt.generate(str(rec["sentences"][0])).token_ids == rec["s0_beam_ids"].tolist()


def test_every_recorded_fixture_is_in_the_suite():
    recorded = sorted(p.parent.name for p in FIXTURES.glob("*/recorded.npz"))
    # Marian's fixture records no beam search (tests/importers/test_marian.py); t5_v11_524's
    # holds one pass's logits, to check a config transformers 5.24 writes (test_t5.py)
    assert sorted(RECORDED) == [n for n in recorded if n not in ("marian", "t5_v11_524")]
