"""transformer.inference.teacher_forcing: a typed target stepped through from one teacher-forced pass
gives, step by step, what greedy decoding records, and the rows of OpenedModel.attention."""

import numpy as np
import pytest

from transformer.inference.teacher_forcing import teacher_forced

SOURCE = "Friday, March 5, 2021"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_forcing_the_models_own_translation_repeats_its_decode(ckpt):
    greedy = ckpt.translate(SOURCE)
    forced = teacher_forced(ckpt, SOURCE, greedy.text)
    assert forced.token_ids == greedy.token_ids and forced.tokens == greedy.tokens
    assert forced.text == greedy.text
    for ours, theirs in zip(forced.steps, greedy.steps):
        assert (ours.token, ours.token_id) == (theirs.token, theirs.token_id)
        assert ours.log_prob == pytest.approx(theirs.log_prob, abs=1e-4)
        assert [i for _, i, _ in ours.top_k] == [i for _, i, _ in theirs.top_k]
        np.testing.assert_allclose([p for *_, p in ours.top_k], [p for *_, p in theirs.top_k],
                                   atol=1e-5)
        np.testing.assert_allclose(ours.cross, theirs.cross, atol=1e-5)  # (L, H, N)
        np.testing.assert_allclose(ours.self, theirs.self, atol=1e-5)  # (L, H, t + 1)


def test_a_typed_target_matches_the_teacher_forced_maps(ckpt):
    forced = teacher_forced(ckpt, SOURCE, "1999-12-31")
    maps = ckpt.attention(SOURCE, "1999-12-31")
    assert forced.tokens == maps["output_tokens"] and forced.text == "1999-12-31"
    np.testing.assert_allclose(forced.cross_attention(), maps["cross"], atol=1e-5)
    np.testing.assert_allclose([s.log_prob for s in forced.steps], maps["log_probs"], atol=1e-4)
    last = forced.steps[-1]
    np.testing.assert_allclose(last.self, maps["decoder"][:, :, -1], atol=1e-5)
    assert forced.steps[1].token_id not in [i for _, i, _ in forced.steps[1].top_k][:1]  # forced


def test_an_empty_target_is_one_step_the_end_token(ckpt):
    forced = teacher_forced(ckpt, SOURCE, "")
    assert forced.tokens == ["</s>"] and len(forced.steps) == 1
    assert forced.steps[0].self.shape[-1] == 1
