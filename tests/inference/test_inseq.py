"""Gradient attributions against inseq (issue 27, item 7; issue 41, item 8): saliency and input
x gradient of the Marian fixture equal inseq's, converted to our convention, of each output
token's log-probability and contrastive (inseq's "contrast_logits_diff" with each step's
runner-up as its foil: ours with foil=, log p(y_t) - log p(f_t), the same function); value
zeroing's normalised scores equal inseq's "value_zeroing" for every layer and attention kind.

tests/fixtures/make_inseq_attributions.py (run with a Python that has inseq; its docstring gives
inseq's conventions with their source locations and the conversion: saliency times Marian's
sqrt(d_model), since inseq differentiates the scaled embedding; input x gradient unchanged;
inseq's decoder-embedding double scaling patched away) recorded inseq 0.7.1's numbers in
tests/fixtures/marian/inseq_attributions.json.

- The recorded test always runs: OpenedModel.contributions on each recorded pair, with the same
  ids, equals the recording.
- The live test runs that script afresh where an inseq interpreter is at hand (the environment
  variable INSEQ_PYTHON naming a Python that imports inseq, or inseq in this one) and compares
  with its output:

      INSEQ_PYTHON=/work/inseq-venv/bin/python .venv/bin/python -m pytest -q \\
          tests/inference/test_inseq.py

Tolerance: 1e-4, relative and absolute (np.testing.assert_allclose(rtol=1e-4, atol=1e-4)): the
two float32 computations (TensorFlow, PyTorch) differ by up to 1e-4 in absolute value where
saliency reaches 40 (relative 2.5e-6); a wrong convention is off by a factor of 4 (the
embedding scale) or, unpatched, 0.2 in log-probability.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformer import load_checkpoint

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MARIAN = FIXTURES / "marian"
RECORDING = MARIAN / "inseq_attributions.json"
SCRIPT = FIXTURES / "make_inseq_attributions.py"
METHODS = ("saliency", "input_x_gradient")
RTOL = ATOL = 1e-4
ZEROING_COSINE_ERROR = 1e-6  # what float32's 1 - cos of nearly equal vectors may be off by


@pytest.fixture(scope="module")
def marian():
    return load_checkpoint(MARIAN)


def _inseq_python() -> str | None:
    """INSEQ_PYTHON when it imports inseq (an error when it is set and does not), else this
    interpreter where it has inseq, else None."""
    named = os.environ.get("INSEQ_PYTHON")
    if named:
        check = subprocess.run([named, "-c", "import inseq"], capture_output=True, text=True)
        if check.returncode != 0:
            pytest.fail(f"INSEQ_PYTHON={named} cannot import inseq: {check.stderr[-500:]}")
        return named
    if importlib.util.find_spec("inseq") is not None:
        return sys.executable
    return None


def _assert_equal_to(ckpt, recording: dict) -> None:
    """Our saliency and input x gradient on each of the recording's pairs equal its numbers (the
    ids first)."""
    assert recording["pairs"], "the recording holds no pair"
    assert recording["embed_scale"] == pytest.approx(np.sqrt(ckpt.config.d_model))
    for pair in recording["pairs"]:
        source, target = pair["source"], pair["target"]
        assert ckpt.encode_source(source) == pair["source_ids"], source
        output_ids = ckpt.encode_target(target)
        assert output_ids == pair["output_ids"], target
        assert [ckpt.config.start_id] + output_ids[:-1] == pair["decoder_input_ids"]
        t_len, n = len(output_ids), len(pair["source_ids"])
        for method in METHODS:
            ours = ckpt.contributions(source, target, method=method)
            theirs = pair[method]
            where = f"{method} on {source!r}"
            assert ours["source"].shape == (t_len, n), where
            assert ours["target"].shape == (t_len, t_len), where
            np.testing.assert_allclose(ours["log_probs"], pair["log_probs"], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{where}: log-probabilities")
            np.testing.assert_allclose(ours["log_probs"], theirs["log_probs"], rtol=RTOL,
                                       atol=ATOL, err_msg=f"{where}: inseq's log-probabilities")
            np.testing.assert_allclose(ours["source"], np.asarray(theirs["source"]), rtol=RTOL,
                                       atol=ATOL, err_msg=f"{where}: source")
            np.testing.assert_allclose(ours["target"], np.asarray(theirs["target"]), rtol=RTOL,
                                       atol=ATOL, err_msg=f"{where}: target prefix")
            assert np.min(theirs["source"]) >= 0 and np.max(theirs["source"]) > 0.1, where
        contrast = pair["contrast"]
        assert len(contrast["foil_ids"]) == t_len and all(
            f != y for f, y in zip(contrast["foil_ids"], output_ids))
        for method in METHODS:
            ours = ckpt.contributions(source, target, method=method, foil=contrast["foil_ids"])
            theirs, where = contrast[method], f"contrastive {method} on {source!r}"
            np.testing.assert_allclose(ours["scores"], contrast["scores"], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{where}: z(y) - z(foil)")
            np.testing.assert_allclose(ours["source"], np.asarray(theirs["source"]), rtol=RTOL,
                                       atol=ATOL, err_msg=f"{where}: source")
            np.testing.assert_allclose(ours["target"], np.asarray(theirs["target"]), rtol=RTOL,
                                       atol=ATOL, err_msg=f"{where}: target prefix")
            plain = pair[method]["source"]  # the contrast is another function than log p
            assert not np.allclose(theirs["source"], plain, rtol=1e-2), where
        zeroing = ckpt.contributions(source, target, method="value_zeroing")
        for kind, shape in (("encoder", (n, n)), ("decoder", (t_len, t_len)),
                            ("cross", (t_len, n))):
            theirs, where = np.asarray(pair["value_zeroing"][kind]), f"value zeroing, {kind}"
            assert theirs.shape == (ckpt.config.num_encoder_layers if kind == "encoder" else
                                    ckpt.config.num_decoder_layers, *shape), where
            # inseq takes 1 - cos in float32 (torch's CosineSimilarity), ours in float64: of
            # nearly equal vectors float32 keeps ~1e-7 of it, which a row whose distances
            # total 7e-4 turns into 2.5e-4 once normalised (the largest seen): each row's
            # tolerance is ATOL plus ZEROING_COSINE_ERROR over its sum
            slack = ATOL + ZEROING_COSINE_ERROR / np.maximum(zeroing[kind].sum(-1), 1e-12)
            assert (np.abs(zeroing[f"{kind}_normalized"] - theirs)
                    <= slack[..., None] + RTOL * np.abs(theirs)).all(), (
                f"{where} on {source!r}: largest difference "
                f"{np.abs(zeroing[f'{kind}_normalized'] - theirs).max():.2e}")
            assert theirs.max() > 0.2, where  # some token mixes something in


def test_ours_equal_the_recorded_inseq_attributions(marian):
    recording = json.loads(RECORDING.read_text())
    assert recording["inseq_version"] and recording["decoder_embed_scale_patched"] in (True, False)
    assert len(recording["pairs"]) >= 3
    _assert_equal_to(marian, recording)


def test_ours_equal_a_live_inseq_run(marian, tmp_path):
    python = _inseq_python()
    if python is None:
        pytest.skip("no inseq here: set INSEQ_PYTHON to a Python that imports inseq "
                    "(tests/fixtures/make_inseq_attributions.py says how to make one)")
    out = tmp_path / "inseq_attributions.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([python, str(SCRIPT), str(out)], capture_output=True, text=True,
                         timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    fresh = json.loads(out.read_text())
    _assert_equal_to(marian, fresh)
