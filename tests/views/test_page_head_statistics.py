"""views/Head_Statistics.py ("Head statistics") through AppTest.

The numbers shown are checked against transformer.analysis.head_stats applied to attention computed here,
independently of the app (its own checkpoint object, no Streamlit cache)."""

import base64
import json

import numpy as np
import pytest
from conftest import open_page, uploader

from explorer import state
from transformer.analysis.head_stats import (
    KINDS,
    STATISTICS,
    batch_statistics,
    cluster_order,
    head_similarity_matrix,
)

PAGE = "views/Head_Statistics.py"
CHARTS = ("stats_heatmap", "stats_similarity")


def _array(value):
    """A Plotly JSON array: a list, or {"dtype", "bdata", "shape"} (Plotly >= 6 typed arrays)."""
    if isinstance(value, dict):
        data = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(s) for s in str(value.get("shape", len(data))).split(",")]
        return data.reshape(shape)
    return np.asarray(value, dtype=float)


def charts(at) -> dict:
    """{chart key: Plotly figure dict} of the page's charts."""
    return {key: json.loads(chart.proto.spec) for chart in at.get("plotly_chart")
            for key in CHARTS if chart.proto.id.endswith(key)}


def stats_table(at):
    """The statistics table (the dataframe with a "kind" column) as a pandas DataFrame."""
    tables = [d.value for d in at.dataframe if "kind" in d.value.columns]
    assert len(tables) == 1, [list(d.value.columns) for d in at.dataframe]
    return tables[0]


def sentences_shown(at) -> list[str]:
    return [list(d.value["source"]) for d in at.dataframe if "source" in d.value.columns][0]


def assert_table_equals(table, stats_by_kind):
    for kind in KINDS:
        rows = table[table["kind"] == kind].sort_values(["layer", "head"])
        for name in STATISTICS:
            if name not in stats_by_kind[kind]:
                assert rows[name].isna().all(), (kind, name)
                continue
            np.testing.assert_allclose(rows[name].to_numpy(dtype=float),
                                       stats_by_kind[kind][name].ravel(), atol=1e-5,
                                       err_msg=f"{kind} {name}")


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def expected(ckpt):
    """The default sentence's attention, computed here (not through the app's cache)."""
    return ckpt.attention(state.DEFAULT_SOURCE)


@pytest.fixture
def page(app):
    return open_page(app, PAGE)


@pytest.fixture
def calls(monkeypatch):
    """Counts of OpenedModel.attention and transformer.inference.batch.attention_batch calls (the module
    attribute the page calls)."""
    import transformer.inference.batch
    from transformer.inference.session import OpenedModel

    counts = {"attention": 0, "attention_batch": 0}
    attention, attention_batch = OpenedModel.attention, transformer.inference.batch.attention_batch

    def counted_attention(self, *args, **kwargs):
        counts["attention"] += 1
        return attention(self, *args, **kwargs)

    def counted_batch(*args, **kwargs):
        counts["attention_batch"] += 1
        return attention_batch(*args, **kwargs)

    monkeypatch.setattr(OpenedModel, "attention", counted_attention)
    monkeypatch.setattr(transformer.inference.batch, "attention_batch", counted_batch)
    return counts


def test_page_shows_the_true_statistics_of_the_current_sentence(page, expected):
    assert page.radio(key="stats_source").value == "current"
    assert sentences_shown(page) == [state.DEFAULT_SOURCE]
    stats = {kind: batch_statistics([expected], kind) for kind in KINDS}
    table = stats_table(page)
    assert len(table) == 3 * 2 * 4  # kinds x layers x heads
    assert_table_equals(table, stats)
    shown = charts(page)
    assert set(shown) == set(CHARTS)
    np.testing.assert_allclose(_array(shown["stats_heatmap"]["data"][0]["z"]),
                               stats["encoder"]["entropy"], atol=1e-5)
    matrix = head_similarity_matrix([expected], "encoder")
    order = cluster_order(matrix)
    np.testing.assert_allclose(_array(shown["stats_similarity"]["data"][0]["z"]),
                               matrix[np.ix_(order, order)], atol=1e-5)
    assert len(page.get("download_button")) == 2  # CSV of the table + NPZ
    # Issue 38: the table's export buttons point to no figure's camera (a table has none)
    assert not [c for c in page.caption if c.value.startswith("PNG: the camera button")]


def test_held_out_set_is_computed_in_batches(page, ckpt):
    from transformer.inference.batch import attention_batch
    from transformer.training.data import date_pairs

    page.radio(key="stats_source").set_value("held_out").run()
    assert not page.exception, page.exception
    assert page.number_input(key="stats_n").value == 64
    page.number_input(key="stats_n").set_value(8).run()
    assert not page.exception, page.exception
    sources = [s for s, _ in date_pairs(8, seed=0, split="test")]
    assert sentences_shown(page) == sources
    assert not page.get("progress")  # the bar is gone once the batch is done
    maps = attention_batch(ckpt, sources)
    assert_table_equals(stats_table(page), {kind: batch_statistics(maps, kind) for kind in KINDS})
    shown = charts(page)
    assert set(shown) == set(CHARTS)
    assert shown["stats_heatmap"]["data"][0]["hovertemplate"].startswith("%{y}, %{x}: %{z:.3f}")


def test_changing_statistic_or_kind_reslices_without_rerunning_the_model(page, calls):
    page.radio(key="stats_source").set_value("pasted").run()
    lines = "May 1, 1901\nmay 2nd, 1902"  # not in the cache yet: computed once here
    page.text_area(key="stats_lines").set_value(lines).run()
    assert not page.exception, page.exception
    assert calls["attention_batch"] == 1
    before, counted = charts(page), dict(calls)
    for key, value in [("stats_stat", "diagonal"), ("stats_kind", "Cross-attention"),
                       ("stats_stat", "alignment"), ("stats_kind", "Decoder self-attention")]:
        widget = page.selectbox if key == "stats_stat" else page.radio
        widget(key=key).set_value(value).run()
        assert not page.exception, page.exception
        assert calls == counted, key
    assert page.info and "cross-attention only" in page.info[0].value  # alignment of decoder
    page.radio(key="stats_kind").set_value("Cross-attention").run()
    after = charts(page)
    assert before["stats_heatmap"] != after["stats_heatmap"]
    assert before["stats_similarity"] != after["stats_similarity"]
    page.text_area(key="stats_lines").set_value(lines).run()
    page.radio(key="stats_source").set_value("current").run()
    page.radio(key="stats_source").set_value("pasted").run()
    assert calls == counted  # the same sentences again: from the cache


def test_pasted_lines_blank_lines_and_empty_paste(page):
    page.radio(key="stats_source").set_value("pasted").run()
    assert not page.exception, page.exception
    assert page.info and not charts(page)  # nothing pasted yet (Alignment quality has its own)
    page.text_area(key="stats_lines").set_value("\n\n  5 march 2021 \n\n\nMarch 7, 1999\n").run()
    assert not page.exception, page.exception
    assert sentences_shown(page) == ["5 march 2021", "March 7, 1999"]
    assert set(charts(page)) == set(CHARTS)
    page.text_area(key="stats_lines").set_value(" \n\n \t\n").run()
    assert not page.exception, page.exception
    assert page.info and not [d for d in page.dataframe if "kind" in d.value.columns]
    page.text_area(key="stats_lines").set_value("March " * 10_000 + "5, 2021\n1 May 1999").run()
    assert not page.exception, page.exception  # huge: cut to max_chars, then to max_len
    assert len(sentences_shown(page)) == 1  # the second line was past max_chars
    assert set(charts(page)) == set(CHARTS)


def test_too_many_lines_are_capped(page, monkeypatch, expected):
    import transformer.inference.batch

    progress = []

    def stand_in(ckpt, sources, *, on_progress, **kwargs):  # fast: the maps of one sentence
        on_progress(len(sources), len(sources))
        progress.append(len(sources))
        return [expected] * len(sources)

    monkeypatch.setattr(transformer.inference.batch, "attention_batch", stand_in)
    page.radio(key="stats_source").set_value("pasted").run()
    page.text_area(key="stats_lines").set_value("\n".join(f"{d} may 1990" for d in range(600))
                                                ).run()
    assert not page.exception, page.exception
    assert page.warning and "first 512 of 600" in page.warning[0].value
    assert len(sentences_shown(page)) == 512 and progress == [512]


def test_switching_model_keeps_the_page_working(page, tiny_checkpoint_bytes):
    page.radio(key="stats_source").set_value("held_out").run()
    page.number_input(key="stats_n").set_value(3).run()
    uploader(page).upload("tiny.ckpt", tiny_checkpoint_bytes).run()
    assert not page.exception, page.exception
    assert len(stats_table(page)) == 3 * 1 * 2  # the tiny model: 1 layer, 2 heads per kind


def test_a_short_intro_a_collapsible_glossary_and_empty_missing_cells(shared_app):
    at = shared_app.page(PAGE)
    intro = at.markdown[0].value
    assert len(intro) < 160 and "entropy" not in intro.lower()  # one short sentence
    (glossary,) = [e for e in at.expander if e.label == "What the statistics mean"]
    assert "**Entropy** (nats)" in glossary.markdown[0].value
    assert "argmax alignment" in glossary.markdown[0].value
    (table,) = [d for d in at.dataframe if "kind" in d.value.columns]
    assert table.value["alignment"].isna().any()  # outside cross-attention
    assert table.proto.HasField("placeholder") and table.proto.placeholder == ""
