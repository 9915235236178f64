"""views/Compare_Heads.py through AppTest: it draws the model's true numbers (maps,
differences, the same head in two checkpoints and over training). Bad input:
tests/views/test_hardening.py."""

import json

import numpy as np
import pytest
from conftest import open_page as _page
from conftest import plotly_array as array
from conftest import set_widget as _set

from explorer import state

COMPARE = "views/Compare_Heads.py"


@pytest.fixture(scope="module")
def true_maps():
    """OpenedModel.attention of the default sentence by the final model, outside the app."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT).attention(state.DEFAULT_SOURCE)


@pytest.fixture(scope="module")
def epoch1():
    from transformer import load_checkpoint
    from transformer.inference.session import ASSETS

    return load_checkpoint(ASSETS / "dates.epoch01.ckpt")


def chart(at, key) -> dict:
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    assert len(found) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return json.loads(found[0].proto.spec)


def heatmaps(spec) -> list[np.ndarray]:
    return [array(t["z"]) for t in spec["data"] if t["type"] == "heatmap"]


def test_compare_page_renders_every_section(shared_app):
    at = shared_app.page(COMPARE)
    for key in ("cmp_side", "cmp_diff", "cmp_ckpt_side", "cmp_ckpt_diff", "cmp_train_map"):
        chart(at, key)
    assert at.multiselect(key="cmp_heads").value == ["cross L0 H0", "cross L0 H1"]
    # A: the active model; B: another of its vocabulary, the first checkpoint of its run
    assert at.selectbox(key="cmp_ckpt_a").value == "bundled:dates.ckpt"
    assert at.selectbox(key="cmp_ckpt_b").value == "bundled:dates.epoch01.ckpt"
    assert at.select_slider(key="cmp_epoch").options == [
        "epoch 1", "epoch 2", "epoch 4", "epoch 8", "final"]
    assert len(at.dataframe) == 1


def test_selected_heads_show_the_models_maps_and_difference(app, true_maps, monkeypatch):
    from transformer import OpenedModel
    from transformer.analysis.head_stats import cosine_similarity, head_divergence

    at = _page(app, COMPARE)
    calls = []  # picking heads re-slices cached maps: no model run
    original = OpenedModel.attention
    monkeypatch.setattr(OpenedModel, "attention",
                        lambda *a, **k: calls.append(a) or original(*a, **k))
    chosen = {"decoder L1 H2": true_maps["decoder"][1, 2], "decoder L0 H3":
              true_maps["decoder"][0, 3], "cross L1 H1": true_maps["cross"][1, 1]}
    _set(at, "multiselect", "cmp_heads", list(chosen))
    side = chart(at, "cmp_side")
    assert {t["coloraxis"] for t in side["data"]} == {"coloraxis"}
    for shown, expected in zip(heatmaps(side), chosen.values(), strict=True):
        np.testing.assert_allclose(shown, expected, rtol=0, atol=1e-6)
    a, b = true_maps["decoder"][1, 2], true_maps["decoder"][0, 3]
    diff = chart(at, "cmp_diff")
    np.testing.assert_allclose(heatmaps(diff)[0], a.astype(float) - b, rtol=0, atol=1e-6)
    assert diff["data"][0]["zmid"] == 0
    assert diff["layout"]["title"]["text"] == "decoder L1 H2 − decoder L0 H3"
    table = at.dataframe[0].value
    assert len(table) == 3  # every pair
    first = table.iloc[0]
    assert first.iloc[2] == pytest.approx(head_divergence(a, b), abs=1e-6)
    assert first.iloc[3] == pytest.approx(cosine_similarity(a, b), abs=1e-6)
    # Decoder (T, T) and cross (T, N) maps differ in shape: no similarity for that pair.
    assert table.iloc[1].isna().iloc[2:].all()
    assert calls == []


def test_two_checkpoints_and_training_slider_show_their_own_maps(app, true_maps, epoch1):
    at = _page(app, COMPARE)
    target = true_maps["output_tokens"]  # the epoch-1 model translates the default sentence alike
    early = epoch1.attention(state.DEFAULT_SOURCE, "2021-03-05")
    assert early["output_tokens"] == target
    _set(at, "selectbox", "cmp_ckpt_head", "cross L1 H1")
    a, b = heatmaps(chart(at, "cmp_ckpt_side"))
    np.testing.assert_allclose(a, true_maps["cross"][1, 1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(b, early["cross"][1, 1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(heatmaps(chart(at, "cmp_ckpt_diff"))[0],
                               true_maps["cross"][1, 1].astype(float) - early["cross"][1, 1],
                               rtol=0, atol=1e-6)

    _set(at, "selectbox", "cmp_train_head", "cross L1 H1")
    first = heatmaps(chart(at, "cmp_train_map"))[0]
    np.testing.assert_allclose(first, epoch1.attention(state.DEFAULT_SOURCE)["cross"][1, 1],
                               rtol=0, atol=1e-6)
    assert any("At **epoch 1** the model translates" in m.value for m in at.markdown)
    _set(at, "select_slider", "cmp_epoch", "final")
    last = heatmaps(chart(at, "cmp_train_map"))[0]
    assert not np.allclose(first, last)
    np.testing.assert_allclose(last, true_maps["cross"][1, 1], rtol=0, atol=1e-6)
    assert chart(at, "cmp_train_map")["layout"]["title"]["text"] == "cross L1 H1 at final"



def test_the_page_says_what_it_is_for_and_missing_cells_are_empty(app):
    at = _page(app, COMPARE)
    assert "one colour scale" in at.markdown[0].value  # the one-sentence intro under the title
    _set(at, "multiselect", "cmp_heads", ["decoder L1 H2", "cross L1 H1"])
    (table,) = at.dataframe
    assert table.value.iloc[0].isna().iloc[2:].all()  # no similarity: different shapes
    assert table.proto.HasField("placeholder") and table.proto.placeholder == ""  # shown empty
