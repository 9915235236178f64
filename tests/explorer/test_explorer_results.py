"""explorer.results: each helper takes a checkpoint, keys its cache by the checkpoint's content
(not the object), and returns what the checkpoint computes itself."""

import numpy as np
import pytest

from explorer import results
from transformer import OpenedModel, load_checkpoint
from transformer.core.kinds import KIND_NAMES, head_masks


@pytest.fixture(scope="module")
def ckpt(tiny_checkpoint_bytes):
    return load_checkpoint(tiny_checkpoint_bytes)


@pytest.fixture
def calls(monkeypatch):
    """Every OpenedModel.attention and OpenedModel.translate call (the class attributes, so any
    checkpoint object counts), each delegated to the original."""
    counted = {"attention": [], "translate": []}
    for name in counted:
        original = getattr(OpenedModel, name)

        def counting(self, *args, _name=name, _original=original, **kwargs):
            counted[_name].append((args, kwargs))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(OpenedModel, name, counting)
    return counted


def test_attention_is_cached_by_content_and_inputs(ckpt, tiny_checkpoint_bytes, calls):
    source = "17 May 1931"  # used by no other test: nothing cached yet
    expected = ckpt.attention(source)
    calls["attention"].clear()
    maps = results.attention(ckpt, source)
    for name in KIND_NAMES:
        np.testing.assert_array_equal(maps[name], expected[name])
    assert len(calls["attention"]) == 1
    same_bytes = load_checkpoint(tiny_checkpoint_bytes)  # another object, the same content
    assert results.attention(same_bytes, source)["source_tokens"] == expected["source_tokens"]
    assert len(calls["attention"]) == 1
    results.attention(ckpt, source, "1931-05-17")  # a typed target: another result
    assert len(calls["attention"]) == 2
    assert "encoder_q" in results.attention(ckpt, source, details=True)
    assert len(calls["attention"]) == 3


def test_decode_silences_the_labelled_heads_in_any_order(ckpt, calls):
    source = "18 May 1932"
    silenced = ("cross L0 H1", "decoder L0 H0")
    expected = ckpt.translate(source, max_len=12,
                              head_mask=head_masks(ckpt.config, silenced))
    calls["translate"].clear()
    shown = results.decode(ckpt, source, 12, True, 1, silenced=silenced)
    assert shown.token_ids == expected.token_ids
    np.testing.assert_allclose(shown.cross_attention(), expected.cross_attention(), atol=1e-6)
    assert results.decode(ckpt, source, 12, True, 1, silenced=silenced[::-1]) is not None
    assert len(calls["translate"]) == 1  # the same heads in another order: the same result
    plain = results.decode(ckpt, source, 12, True, 1)
    assert calls["translate"][-1][1]["head_mask"] is None  # nothing silenced: no mask at all
    assert plain.token_ids == results.translation(ckpt, source).token_ids[:len(plain.token_ids)]


def test_statistics_and_similarity_of_one_sentence_or_a_batch(ckpt):
    from transformer.analysis.head_stats import batch_statistics, head_similarity_matrix
    from transformer.inference.batch import attention_batch

    sentences = ["19 May 1933", "may 20th, 1934"]
    one = [ckpt.attention(sentences[0], "1933-05-19")]
    stats = results.statistics(ckpt, sentences[:1], "1933-05-19")
    for name in KIND_NAMES:
        for stat, values in batch_statistics(one, name).items():
            np.testing.assert_allclose(stats[name][stat], values, atol=1e-6, err_msg=stat)
    batch = attention_batch(ckpt, sentences)
    stats = results.statistics(ckpt, sentences, batched=True)
    np.testing.assert_allclose(stats["cross"]["entropy"],
                               batch_statistics(batch, "cross")["entropy"], atol=1e-6)
    np.testing.assert_allclose(results.similarity(ckpt, sentences, "decoder", batched=True),
                               head_similarity_matrix(batch, "decoder"), atol=1e-6)


def test_ablation_takes_head_labels(ckpt):
    from transformer.inference.ablation import ablate

    source = "21 May 1935"
    expected = ablate(ckpt, source, [("cross", 0, 1)])
    shown = results.ablation(ckpt, source, None, ["cross L0 H1"])
    assert shown["silenced"] == expected["silenced"]
    assert shown["token_ids"] == expected["token_ids"]
    assert shown["delta_log_prob"] == pytest.approx(expected["delta_log_prob"], abs=1e-6)


def test_mask_batch_pads_both_sides_and_runs_the_model(ckpt):
    sources = ["22 May 1936", "Friday, the 22nd of May, 1936"]
    translations = [results.translation(ckpt, s).text for s in sources]
    batch = results.mask_batch(ckpt, sources, translations)
    rows = [ckpt.encode_source(s) for s in sources]
    width = max(map(len, rows))
    assert batch["source_ids"].shape == (2, width)
    np.testing.assert_array_equal(batch["padding"][:, 0, 0],
                                  [[1] * len(r) + [0] * (width - len(r)) for r in rows])
    heads, short = ckpt.config.num_heads, len(rows[0])
    assert short < width  # row 0 is padded: its padded keys get weight 0
    alone = ckpt.attention(sources[0], translations[0], details=True)  # padding changes no
    for kind, layer in (("encoder", ckpt.config.num_encoder_layers - 1), ("cross", 0)):  # number
        row = results.masked_row(ckpt, batch, kind, layer)  # row 0's, in the batch's widths
        queries = width if kind == "encoder" else batch["target_ids"].shape[1]
        assert row["attention"].shape == row["scores"].shape == (heads, queries, width)
        assert (row["attention"][:, :, short:] == 0).all()
        q = alone[kind].shape[2]
        np.testing.assert_allclose(row["attention"][:, :q, :short], alone[kind][layer],
                                   atol=1e-5)
        np.testing.assert_allclose(row["scores"][:, :q, :short],
                                   alone[f"{kind}_scores"][layer], atol=1e-4)
    eager = ckpt.model((batch["source_ids"], batch["target_ids"]), return_attention=True)
    np.testing.assert_array_equal(batch["padding"], eager["source_mask"])
    np.testing.assert_array_equal(batch["decoder"], eager["target_mask"])


def test_one_translation_for_the_sidebar_every_page_and_the_maps(ckpt, calls, monkeypatch):
    """Issue 24: the sidebar said 401 tokens while the Decoding page said 383 for the same
    translation: each decoded again under the time budget. Now the sidebar's translation, the
    Decoding page's default settings, the maps of the translation and ablation's scored ids
    all come from one decode."""
    decoded_again = []
    monkeypatch.setattr(OpenedModel, "_translation_ids",
                        lambda self, *a, **k: decoded_again.append(a) or [])
    source = "19 May 1933"  # used by no other test: nothing cached yet
    shown = results.translation(ckpt, source)
    page = results.decode(ckpt, source, ckpt.config.max_len, True, 1)  # the page's defaults
    beyond = results.decode(ckpt, source, 10**6)  # cut to the step budget, as translate cuts it
    maps = results.attention(ckpt, source)
    scored = results.ablation(ckpt, source, None, ["cross L0 H1"])
    assert len(calls["translate"]) == 1  # the shared translation (the ablated one: translate_plain)
    assert not decoded_again
    assert page.token_ids == beyond.token_ids == shown.token_ids
    assert maps["output_tokens"] == shown.tokens
    assert scored["scored_tokens"] == shown.tokens
