"""views/Contributions.py ("Contributions") through AppTest: every number it draws equals
OpenedModel.contributions / attention computed here, independently of the app's caches."""

import json

import numpy as np
import pytest
from conftest import open_page, plotly_array

from explorer import state

PAGE = "views/Contributions.py"


def _array(value):
    """A Plotly JSON array (a list, or a typed array) as floats, any shape."""
    return plotly_array(value) if isinstance(value, dict) else np.asarray(value, dtype=float)


def charts(at) -> dict:
    """{chart key suffix: Plotly figure dict}."""
    found = {}
    for chart in at.get("plotly_chart"):
        key = chart.proto.id.rpartition("-")[2]
        found[key] = json.loads(chart.proto.spec)
    return found


def chart(at, key: str) -> dict:
    matches = [spec for name, spec in charts(at).items() if name.endswith(key)]
    assert len(matches) == 1, (key, list(charts(at)))
    return matches[0]


@pytest.fixture(scope="module")
def bundled():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def expected(bundled):
    ids = bundled.translate(state.DEFAULT_SOURCE).token_ids
    return {"ids": ids,
            "alti": bundled.contributions(state.DEFAULT_SOURCE, method="alti", output_ids=ids),
            "attention": bundled.attention(state.DEFAULT_SOURCE, output_ids=ids)}


@pytest.fixture
def page(app):
    return open_page(app, PAGE)


def test_alti_share_maps_and_bars_are_the_models(page, bundled, expected):
    from transformer.analysis.flow import attention_rollout, source_to_target_flow

    alti, attention = expected["alti"], expected["attention"]
    share = chart(page, "contrib_share")
    assert [trace["name"] for trace in share["data"]] == ["ALTI+"]
    np.testing.assert_allclose(_array(share["data"][0]["y"]), alti["source_share"], atol=1e-6)
    np.testing.assert_allclose(_array(chart(page, "contrib_source_method")["data"][0]["z"]),
                               alti["source"], atol=1e-6)
    np.testing.assert_allclose(_array(chart(page, "contrib_target_method")["data"][0]["z"]),
                               alti["target"], atol=1e-6)
    last = len(attention["cross"]) - 1  # the page opens on the last decoder layer
    np.testing.assert_allclose(_array(chart(page, "contrib_source_raw")["data"][0]["z"]),
                               attention["cross"][last].mean(0), atol=1e-6)
    np.testing.assert_allclose(_array(chart(page, "contrib_source_rollout")["data"][0]["z"]),
                               source_to_target_flow(attention["encoder"], attention["cross"],
                                                     layer=last), atol=1e-6)
    np.testing.assert_allclose(_array(chart(page, "contrib_target_rollout")["data"][0]["z"]),
                               attention_rollout(attention["decoder"])[last], atol=1e-6)
    bars = chart(page, "contrib_bars")  # step 0: the source, then the start token alone
    np.testing.assert_allclose(_array(bars["data"][0]["y"]), alti["source"][0], atol=1e-6)
    np.testing.assert_allclose(_array(bars["data"][1]["y"]), alti["target"][0, :1], atol=1e-6)
    # the layer-by-layer grids are drawn once their expander is opened (issue 40: the page's
    # largest figures)
    assert not [c for c in page.get("plotly_chart") if "contrib_layers" in c.proto.id]
    page.session_state["contrib_layers_open"] = True
    page.run()
    layers = chart(page, "contrib_layers_Cross")
    np.testing.assert_allclose(np.stack([_array(t["z"]) for t in layers["data"]]),
                               alti["cross_layers"], atol=1e-6)
    assert not page.error

    page.selectbox(key="contrib_layer").set_value(0).run()
    page.select_slider(key="contrib_step").set_value(3).run()
    assert not page.exception, page.exception
    np.testing.assert_allclose(_array(chart(page, "contrib_source_raw")["data"][0]["z"]),
                               attention["cross"][0].mean(0), atol=1e-6)
    bars = chart(page, "contrib_bars")
    np.testing.assert_allclose(_array(bars["data"][1]["y"]), alti["target"][3, :4], atol=1e-6)


@pytest.mark.parametrize("label, method, steps", [
    ("Saliency", "saliency", None),
    ("Input × gradient", "input_x_gradient", None),
    ("Integrated gradients", "integrated_gradients", 8),
    ("ALTI-Logit", "alti_logit", None),
])
def test_gradient_methods_are_drawn_beside_alti(page, bundled, expected, label, method, steps):
    page.radio(key="contrib_method").set_value(label).run()
    if steps is not None:
        page.toggle(key="contrib_steps_auto").set_value(False).run()
        page.number_input(key="contrib_steps").set_value(steps).run()
    assert not page.exception, page.exception
    options = {} if steps is None else {"steps": steps}
    result = bundled.contributions(state.DEFAULT_SOURCE, method=method,
                                   output_ids=expected["ids"], **options)
    np.testing.assert_allclose(_array(chart(page, "contrib_source_method")["data"][0]["z"]),
                               result["source"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(_array(chart(page, "contrib_target_method")["data"][0]["z"]),
                               result["target"], rtol=1e-4, atol=1e-6)
    share = chart(page, "contrib_share")
    assert [trace["name"] for trace in share["data"]] == [
        "ALTI+", f"{label} (share of |attribution|)"]
    src = np.abs(result["source"]).sum(1)
    np.testing.assert_allclose(_array(share["data"][1]["y"]),
                               src / (src + np.abs(result["target"]).sum(1)), rtol=1e-4)
    signed = method in ("integrated_gradients", "alti_logit")
    trace = chart(page, "contrib_source_method")["data"][0]
    assert (trace.get("zmid") == 0.0) is signed
    if steps is not None:
        assert any(f"with {steps} steps" in c.value for c in page.caption)


def test_integrated_gradients_take_the_steps_their_answer_needs_by_default(page, bundled,
                                                                           expected):
    """Issue 38: at the old default of 32 steps the default sentence's attributions summed to
    within 4.7 of a change of 5.07 (mostly error). By default the steps now double until every
    row's gap is within 5% of its change; the caption says how many it took and after which."""
    from transformer.inference.gradients import AUTO_STEPS, is_complete

    page.radio(key="contrib_method").set_value("Integrated gradients").run()
    assert not page.exception, page.exception
    assert page.toggle(key="contrib_steps_auto").value is True
    result = bundled.contributions(state.DEFAULT_SOURCE, method="integrated_gradients",
                                   output_ids=expected["ids"])
    assert result["steps_tried"][0] == AUTO_STEPS[0] and len(result["steps_tried"]) > 1
    assert result["complete"] and is_complete(result)
    gaps = np.abs(result["completeness_gap"])
    change = np.abs(result["log_probs"] - result["baseline_log_probs"])
    assert (gaps <= 0.05 * change + 0.01).all()
    np.testing.assert_allclose(_array(chart(page, "contrib_source_method")["data"][0]["z"]),
                               result["source"], rtol=1e-4, atol=1e-6)
    [caption] = [c.value for c in page.caption if c.value.startswith("Completeness")]
    assert f"with {result['steps']} steps (after {AUTO_STEPS[0]}" in caption


def test_a_typed_target_is_attributed(app, bundled):
    app.session_state[state.TARGET_MODE] = state.TARGET_TYPED
    app.session_state[state.TARGET] = "1999-12-31"
    app.session_state[state.TARGET_STARTED] = True
    open_page(app, PAGE)
    result = bundled.contributions(state.DEFAULT_SOURCE, "1999-12-31", method="alti")
    np.testing.assert_allclose(_array(chart(app, "contrib_source_method")["data"][0]["z"]),
                               result["source"], atol=1e-6)


def _in_columns(at, key: str) -> bool:
    """Whether the chart whose key ends with `key` sits in a column block."""
    def walk(node, in_column):
        for child in getattr(node, "children", {}).values():
            kind = getattr(child, "type", None)
            proto = getattr(child, "proto", None)
            if getattr(proto, "id", "").endswith(key):
                return in_column
            found = walk(child, in_column or kind == "column")
            if found is not None:
                return found
        return None
    return walk(at._tree, False)


def test_a_long_sentences_maps_are_stacked_not_squeezed(app):
    """Issue 38: with a 64-token source the three maps side by side left the source ~110 px
    and its labels smeared; beyond SIDE_BY_SIDE_TOKENS tokens each map takes the page's width."""
    import re

    from conftest import ROOT

    side_by_side = int(re.search(r"^SIDE_BY_SIDE_TOKENS = (\d+)", (ROOT / PAGE).read_text(),
                                 re.M)[1])
    open_page(app, PAGE)
    assert _in_columns(app, "-contrib_source_method") is True  # a short sentence: side by side
    long = ", ".join(["Friday, March 5, 2021"] * 6)
    app.text_input(key=state.SOURCE).set_value(long).run()
    assert not app.exception, app.exception
    n = len(chart(app, "contrib_source_method")["data"][0]["z"][0])
    assert n > side_by_side
    assert _in_columns(app, "-contrib_source_method") is False


def test_a_contrast_with_each_steps_runner_up_and_with_a_foil_picked_or_typed(page, bundled,
                                                                            expected):
    """Issue 41, item 1: a gradient method explains log p(token) - log p(foil): every step
    against its runner-up (the model's most probable other token), and one step against a foil
    picked from its top alternatives or typed; each drawn number is
    OpenedModel.contributions(foil=...) computed here."""
    from explorer import show

    ids = expected["ids"]
    lens = bundled.layer_predictions(state.DEFAULT_SOURCE, output_ids=ids)
    runner_up = show.runner_ups(lens["top_ids"][-1], ids)
    page.radio(key="contrib_method").set_value("Saliency").run()
    page.radio(key="contrib_contrast").set_value(show.RUNNER_UP).run()
    assert not page.exception, page.exception
    result = bundled.contributions(state.DEFAULT_SOURCE, method="saliency", output_ids=ids,
                                   foil=runner_up)
    assert (result["scores"] > 0).all()  # the output token beats its runner-up everywhere
    np.testing.assert_allclose(_array(chart(page, "contrib_source_method")["data"][0]["z"]),
                               result["source"], rtol=1e-4, atol=1e-6)
    plain = bundled.contributions(state.DEFAULT_SOURCE, method="saliency", output_ids=ids)
    assert not np.allclose(result["source"], plain["source"], rtol=1e-3)  # a real difference
    assert any("rather than the runner-up" in c.value or "over" in c.value for c in page.caption)

    # one step against a foil picked from its alternatives: the steps up to it are attributed
    t = 3
    page.select_slider(key="contrib_step").set_value(t).run()
    options = page.selectbox(key="contrib_foil").options
    assert len(options) == 1 + sum(int(i) != ids[t] for i in lens["top_ids"][-1][t])
    foil = int(lens["top_ids"][-1][t][-1]) if int(lens["top_ids"][-1][t][-1]) != ids[t] else \
        int(lens["top_ids"][-1][t][-2])
    page.selectbox(key="contrib_foil").set_value(foil).run()
    assert not page.exception, page.exception
    step = bundled.contributions(state.DEFAULT_SOURCE, method="saliency", output_ids=ids[:t + 1],
                                 foil=[None] * t + [foil])
    bars = chart(page, "contrib_bars")
    np.testing.assert_allclose(_array(bars["data"][0]["y"]), step["source"][t], rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(_array(bars["data"][1]["y"]), step["target"][t, :t + 1],
                               rtol=1e-4, atol=1e-6)
    assert "rather than" in bars["layout"]["title"]["text"]
    assert any(f"{step['scores'][t]:.3f}" in c.value for c in page.caption)

    # a typed foil wins over the pick (its piece after the bare word-start mark "▁" the
    # tokenizer puts first); the step's own token is refused with a word
    other = next(int(i) for i in range(bundled.config.tgt_vocab_size)
                 if int(i) not in (foil, ids[t]) and bundled.target_tokenizer.decode([int(i)])
                 .strip().isdigit())
    page.text_input(key="contrib_foil_typed").set_value(
        bundled.target_tokenizer.decode([other]).strip()).run()
    assert not page.exception, page.exception
    step = bundled.contributions(state.DEFAULT_SOURCE, method="saliency", output_ids=ids[:t + 1],
                                 foil=[None] * t + [other])
    np.testing.assert_allclose(_array(chart(page, "contrib_bars")["data"][0]["y"]),
                               step["source"][t], rtol=1e-4, atol=1e-6)
    own = bundled.target_tokenizer.decode([ids[t]])
    page.text_input(key="contrib_foil_typed").set_value(own).run()
    assert not page.exception, page.exception
    assert any("is the step's own token" in w.value for w in page.warning)


def test_value_zeroing_is_drawn_layer_by_layer_beside_the_attention_weights(page, bundled,
                                                                          expected):
    """Issue 41, item 3: off until asked for; then each kind's value-zeroing maps (rows
    normalised) equal OpenedModel.contributions("value_zeroing") computed here, beside the same
    layers' head-mean attention weights."""
    assert not [c for c in page.get("plotly_chart") if c.proto.id.endswith("contrib_vz_maps")]
    page.toggle(key="contrib_vz_on").set_value(True).run()
    assert not page.exception, page.exception
    mixing = bundled.contributions(state.DEFAULT_SOURCE, method="value_zeroing",
                                   output_ids=expected["ids"])
    attention = expected["attention"]
    for label, kind in (("Encoder self-attention", "encoder"), ("Cross-attention", "cross"),
                        ("Decoder self-attention", "decoder")):
        page.radio(key="contrib_vz_kind").set_value(label).run()
        assert not page.exception, page.exception
        maps = chart(page, "contrib_vz_maps")["data"]
        assert len(maps) == len(mixing[kind])
        for i, trace in enumerate(maps):
            np.testing.assert_allclose(_array(trace["z"]), mixing[f"{kind}_normalized"][i],
                                       atol=1e-5)
        weights = chart(page, "contrib_vz_attention")["data"]
        np.testing.assert_allclose(_array(weights[0]["z"]), attention[kind][0].mean(0),
                                   atol=1e-6)
