"""Activation patching and attention knockout against transformers (issue 41, item 8).

tests/fixtures/make_interventions_oracle.py computes both on the tiny Marian fixture with
transformers' MarianMTModel and PyTorch forward hooks (no edit to transformers): every site of
every kind restored from the clean run at two steps and with a foil; knockouts of subsets and of
all layers, heads and source positions, on the greedy translation and on a typed target, with
the greedy continuation.

- recorded (CI, no torch): OpenedModel.patch and OpenedModel.knockout equal
  tests/fixtures/marian/interventions.json (log-probabilities within 1e-4, ids equal);
- live (where torch and transformers are installed): the recipe run now equals ours and the
  recording.
(tests/inference/test_patching.py and test_knockout.py compare with our own Keras model re-run
with hooks.)
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from transformer.inference.patching import SITES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_spec = importlib.util.spec_from_file_location("make_interventions_oracle",
                                               FIXTURES / "make_interventions_oracle.py")
recipe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe)

ATOL = 1e-4  # log-probabilities: float32 models, two frameworks
LIVE_ATOL = 1e-5  # the recording against the recipe run now (another torch build may round apart)


@pytest.fixture(scope="module")
def recorded():
    return json.loads(recipe.OUT.read_text())


@pytest.fixture(scope="module")
def ours(marian):
    """Ours' patch and knockout for every case of the recipe, once."""
    p = recipe.PATCH
    patched = [marian.patch(p["clean"], p["corrupted"], p["target"], step=case["step"],
                            foil=case["foil"]) for case in recipe.PATCH_CASES]
    knocked = [marian.knockout(recipe.KNOCKOUT_SOURCE, case["target"], step=case["step"],
                               layers=case["layers"], heads=case["heads"],
                               source_positions=case["positions"], max_steps=case["max_steps"])
               for case in recipe.KNOCKOUT_CASES]
    return {"patch": patched, "knockout": knocked}


def assert_patch_equal(got: dict, want: dict, atol: float = ATOL) -> float:
    """got: ours' patch result or a recipe one; want: a recipe one. The largest difference."""
    assert got["step"] == want["step"] and got["token_id"] == want["token_id"]
    assert got["foil"] == want["foil"]
    worst = 0.0
    for name in ("clean_score", "corrupted_score"):
        assert got[name] == pytest.approx(want[name], abs=atol), name
        worst = max(worst, abs(got[name] - want[name]))
    for kind in SITES:
        have, expected = np.asarray(got[kind], np.float64), np.asarray(want[kind], np.float64)
        assert have.shape == expected.shape, kind
        np.testing.assert_allclose(have, expected, rtol=0, atol=atol, err_msg=kind)
        worst = max(worst, float(np.abs(have - expected).max()))
    return worst


def ours_knockout_as_recorded(got: dict) -> dict:
    """Ours' knockout result in the recording's terms (ids and log-probabilities)."""
    return {"log_prob": got["log_prob"], "log_prob_knocked": got["log_prob_knocked"],
            "top": [[i, float(np.log(p))] for _, i, p in got["top"]],
            "top_knocked": [[i, float(np.log(p))] for _, i, p in got["top_knocked"]],
            "output_ids": got["translation"]["token_ids"],
            "translation_knocked": got["translation_knocked"]["token_ids"]}


def assert_knockout_equal(got: dict, want: dict, atol: float = ATOL) -> float:
    for name in ("output_ids", "translation_knocked"):
        assert got[name] == want[name], name
    worst = 0.0
    for name in ("log_prob", "log_prob_knocked"):
        assert got[name] == pytest.approx(want[name], abs=atol), name
        worst = max(worst, abs(got[name] - want[name]))
    for name in ("top", "top_knocked"):
        assert [i for i, _ in got[name]] == [i for i, _ in want[name]], name
        have, expected = (np.array([v for _, v in got[name]]),
                          np.array([v for _, v in want[name]]))
        np.testing.assert_allclose(have, expected, rtol=0, atol=atol, err_msg=name)
        worst = max(worst, float(np.abs(have - expected).max()))
    return worst


def _case_id(case: dict) -> str:
    return json.dumps(case, separators=(",", ":"))


# ============================================================================= recorded (CI)
def test_recording_is_of_the_recipes_cases(recorded, marian):
    patch, knock = recorded["patch"], recorded["knockout"]
    assert [c["case"] for c in patch["cases"]] == recipe.PATCH_CASES
    assert [c["case"] for c in knock["cases"]] == recipe.KNOCKOUT_CASES
    assert {k: patch[k] for k in recipe.PATCH} == recipe.PATCH
    assert knock["source"] == recipe.KNOCKOUT_SOURCE
    # MarianTokenizer's ids (the source's, the target's text_target=) are ours
    ids = patch["ids"]
    assert ids["clean"] == marian.encode_source(recipe.PATCH["clean"])
    assert ids["corrupted"] == marian.encode_source(recipe.PATCH["corrupted"])
    assert ids["target"] == marian.encode_target(recipe.PATCH["target"])
    for case, got in zip(recipe.KNOCKOUT_CASES, knock["cases"]):
        assert got["source_ids"] == marian.encode_source(recipe.KNOCKOUT_SOURCE)
        if case["target"] is not None:
            assert got["output_ids"] == marian.encode_target(case["target"])
        else:  # transformers' greedy (pad banned) is ours
            assert got["output_ids"] == marian.translate_plain(recipe.KNOCKOUT_SOURCE).token_ids
        # knockout's default continuation length: the output's + 10 within the step budget
        assert got["max_steps"] == (case["max_steps"] or
                                    min(marian.step_budget(), len(got["output_ids"]) + 10))
    # the cases bite: the corruption moves the score, a knockout moves the step's
    for got in patch["cases"]:
        assert abs(got["clean_score"] - got["corrupted_score"]) > 0.3
    for got in knock["cases"]:
        assert got["log_prob_knocked"] != pytest.approx(got["log_prob"], abs=1e-3)
    assert any(got["translation_knocked"] != got["output_ids"][:len(got["translation_knocked"])]
               for got in knock["cases"])


@pytest.mark.parametrize("i", range(len(recipe.PATCH_CASES)),
                         ids=[_case_id(c) for c in recipe.PATCH_CASES])
def test_patching_equals_recorded_transformers(ours, recorded, i):
    assert_patch_equal(ours["patch"][i], recorded["patch"]["cases"][i])


@pytest.mark.parametrize("i", range(len(recipe.KNOCKOUT_CASES)),
                         ids=[_case_id(c) for c in recipe.KNOCKOUT_CASES])
def test_knockout_equals_recorded_transformers(ours, recorded, i):
    got = ours["knockout"][i]
    want = recorded["knockout"]["cases"][i]
    case = recipe.KNOCKOUT_CASES[i]
    assert got["layers"] == case["layers"] and got["source_positions"] == case["positions"]
    assert len(got["translation_knocked"]["token_ids"]) <= want["max_steps"]
    assert_knockout_equal(ours_knockout_as_recorded(got), want)


def test_a_row_with_every_key_blocked_is_zero_as_padding(ours, recorded):
    """Blocking every source position: ours zeroes the head's row (padding's rule: the weights
    times the mask), which transformers gives with the context zeroed too; an additive mask
    alone would leave the row uniform, a different number."""
    i = next(i for i, c in enumerate(recorded["knockout"]["cases"])
             if c["every_position_blocked"])
    got, want = ours["knockout"][i], recorded["knockout"]["cases"][i]
    assert got["log_prob_knocked"] == pytest.approx(want["log_prob_knocked"], abs=ATOL)
    assert abs(got["log_prob_knocked"] - want["additive_only"]["log_prob_knocked"]) > 1e-3


# ============================================================================= live
@pytest.fixture(scope="module")
def live():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return recipe.record(*recipe.load_transformers())


def test_live_transformers_equals_ours_and_the_recording(ours, recorded, live):
    """The recipe run now: ours equals it, and so does the recording."""
    assert live["patch"]["ids"] == recorded["patch"]["ids"]
    for i, want in enumerate(live["patch"]["cases"]):
        assert want["case"] == recipe.PATCH_CASES[i]
        assert_patch_equal(ours["patch"][i], want)
        assert_patch_equal(recorded["patch"]["cases"][i], want, LIVE_ATOL)
    for i, want in enumerate(live["knockout"]["cases"]):
        assert want["case"] == recipe.KNOCKOUT_CASES[i]
        assert_knockout_equal(ours_knockout_as_recorded(ours["knockout"][i]), want)
        assert_knockout_equal(recorded["knockout"]["cases"][i], want, LIVE_ATOL)
        if want["every_position_blocked"]:
            assert recorded["knockout"]["cases"][i]["additive_only"]["log_prob_knocked"] == \
                pytest.approx(want["additive_only"]["log_prob_knocked"], abs=LIVE_ATOL)
