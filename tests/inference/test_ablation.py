"""transformer.inference.ablation on the bundled model: silencing nothing changes nothing, silencing every
cross-attention head breaks the translation, per-head importance equals a recomputation."""

import numpy as np
import pytest

from transformer import DEFAULT_CHECKPOINT, TransformerConfig, load_checkpoint
from transformer.core.kinds import head_masks
from transformer.inference.ablation import (
    ablate,
    all_heads,
    head_importance,
    output_ids_for,
    output_log_probs,
)

SOURCE = "Friday, March 5, 2021"


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def importance(ckpt):
    progress = []
    entries = head_importance(ckpt, SOURCE, on_progress=lambda done, total:
                              progress.append((done, total)))
    return entries, progress


def config(**kwargs):
    return TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=8, num_heads=2,
                             dff=16, num_encoder_layers=3, num_decoder_layers=1, **kwargs)


def test_head_mask_for_shapes_and_values():
    masks = head_masks(config(), [("encoder", 2, 1), ("cross", 0, 0)])
    assert {k: v.shape for k, v in masks.items()} == {
        "encoder": (3, 2), "decoder": (1, 2), "cross": (1, 2)}
    assert all(m.dtype == np.float32 for m in masks.values())
    expected_encoder = np.ones((3, 2), np.float32)
    expected_encoder[2, 1] = 0
    np.testing.assert_array_equal(masks["encoder"], expected_encoder)
    np.testing.assert_array_equal(masks["decoder"], np.ones((1, 2)))
    np.testing.assert_array_equal(masks["cross"], [[0, 1]])
    assert all((m == 1).all() for m in head_masks(config(), []).values())


@pytest.mark.parametrize("head, message", [
    (("encoder", 3, 0), "encoder layer 3 is out of range: the model has 3 encoder layers"),
    (("decoder", 1, 0), "decoder layer 1 is out of range: the model has 1 decoder layers"),
    (("cross", 0, 2), "head 2 is out of range: the model has 2 heads"),
    (("cross", 0, -1), "head -1 is out of range"),
    (("self", 0, 0), "attention kind must be one of"),
    (("cross", 0), "must be (kind, layer, head)"),
])
def test_head_mask_for_rejects_heads_the_model_lacks(head, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        head_masks(config(), [head])


def test_all_heads_lists_every_head():
    heads = all_heads(config())
    assert len(heads) == (3 + 1 + 1) * 2
    assert heads[0] == ("encoder", 0, 0) and heads[-1] == ("cross", 0, 1)
    assert all_heads(config(), kinds=("decoder",)) == [("decoder", 0, 0), ("decoder", 0, 1)]


def test_silencing_no_head_changes_nothing(ckpt):
    result = ablate(ckpt, SOURCE, [])
    assert result["text"] == result["original_text"] == "2021-03-05"
    assert result["changed"] is False
    assert result["delta_log_prob"] == 0.0
    np.testing.assert_array_equal(result["token_log_probs"], result["original_token_log_probs"])


def test_silencing_no_head_decodes_and_scores_once(ckpt, monkeypatch):
    """Nothing silenced is the model itself: the original translation and one teacher-forced
    pass are the answer (a 305-token translation of an opus-mt-sized model takes ~5 s to
    decode again)."""
    from transformer.inference import ablation

    calls = {"decode": 0, "score": 0}
    decode, score = type(ckpt).translate_plain, ablation.output_log_probs

    def counted_decode(*args, **kwargs):
        calls["decode"] += 1
        return decode(*args, **kwargs)

    def counted_score(*args, **kwargs):
        calls["score"] += 1
        return score(*args, **kwargs)

    monkeypatch.setattr(type(ckpt), "translate_plain", counted_decode)
    monkeypatch.setattr(ablation, "output_log_probs", counted_score)
    original = ckpt.translate(SOURCE)
    result = ablate(ckpt, SOURCE, [], original=original)
    assert calls == {"decode": 0, "score": 1}
    assert result["token_ids"] == list(original.token_ids) and result["delta_log_prob"] == 0.0
    ablate(ckpt, SOURCE, [("cross", 0, 0)], original=original)
    assert calls == {"decode": 1, "score": 3}


def test_output_log_probs_equal_checkpoint_attention(ckpt):
    maps = ckpt.attention(SOURCE)
    log_probs = output_log_probs(ckpt, maps["source_ids"], maps["output_ids"])
    np.testing.assert_allclose(log_probs, maps["log_probs"], rtol=0, atol=1e-5)


def test_silencing_every_cross_head_changes_the_translation(ckpt):
    cross = [("cross", layer, head) for layer in range(ckpt.config.num_decoder_layers)
             for head in range(ckpt.config.num_heads)]
    result = ablate(ckpt, SOURCE, cross)
    assert result["original_text"] == "2021-03-05"
    assert result["text"] != result["original_text"] and result["changed"]
    assert result["delta_log_prob"] < -1.0  # the original output became far less likely
    # The same number through OpenedModel.attention, which re-tokenizes the original text.
    mask = head_masks(ckpt.config, cross)
    expected = (ckpt.attention(SOURCE, "2021-03-05", head_mask=mask)["log_probs"].sum()
                - ckpt.attention(SOURCE, "2021-03-05")["log_probs"].sum())
    assert result["delta_log_prob"] == pytest.approx(expected, abs=1e-4)
    # The ablated translation (from the loop that keeps no maps) is translate's with the mask.
    full = ckpt.translate(SOURCE, head_mask=mask)
    assert result["token_ids"] == full.token_ids and result["text"] == full.text
    assert result["tokens"] == full.tokens


def test_a_given_original_is_not_decoded_again(ckpt, monkeypatch):
    original = ckpt.translate(SOURCE)
    monkeypatch.setattr(type(ckpt), "translate", lambda *a, **k: pytest.fail("decoded again"))
    result = ablate(ckpt, SOURCE, [("cross", 0, 0)], original=original)
    assert result["original_ids"] == original.token_ids


def test_a_typed_target_is_scored_instead(ckpt):
    ids = output_ids_for(ckpt, "1999-12-31")
    assert ids[-1] == ckpt.config.end_id
    result = ablate(ckpt, SOURCE, [("cross", 1, 0)], target_ids=ids)
    assert len(result["token_log_probs"]) == len(ids)
    assert "".join(result["scored_tokens"]).replace("▁", "").startswith("1999-12-31")


def test_head_importance_one_entry_per_head(ckpt, importance):
    entries, progress = importance
    heads = all_heads(ckpt.config)
    assert [(e["kind"], e["layer"], e["head"]) for e in entries] == heads
    assert progress == [(i, len(heads)) for i in range(1, len(heads) + 1)]
    assert all(np.isfinite(e["delta_log_prob"]) for e in entries)
    assert any(e["delta_log_prob"] != 0 for e in entries)


@pytest.mark.parametrize("head", [("cross", 1, 2), ("encoder", 0, 3)])
def test_head_importance_equals_an_independent_recomputation(ckpt, importance, head):
    entries, _ = importance
    entry = next(e for e in entries if (e["kind"], e["layer"], e["head"]) == head)
    # Independently: a hand-built mask and OpenedModel.attention's teacher-forced log-probs.
    kind, layer, index = head
    layers = ckpt.config.num_encoder_layers if kind == "encoder" else \
        ckpt.config.num_decoder_layers
    mask = np.ones((layers, ckpt.config.num_heads), np.float32)
    mask[layer, index] = 0
    original = ckpt.translate(SOURCE).text
    expected = (ckpt.attention(SOURCE, original, head_mask={kind: mask})["log_probs"].sum()
                - ckpt.attention(SOURCE, original)["log_probs"].sum())
    assert entry["delta_log_prob"] == pytest.approx(float(expected), abs=1e-4)


def test_empty_source_does_not_crash(ckpt):
    result = ablate(ckpt, "", [("encoder", 0, 0)])
    assert isinstance(result["text"], str)
    assert np.isfinite(result["delta_log_prob"])
