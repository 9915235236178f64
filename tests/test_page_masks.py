"""pages/4_Masks.py through AppTest: the batch's padding masks are those of its padded ids, and
the masked softmax redone in NumPy equals the model's attention row for each kind."""

import json
import re

import numpy as np
import pytest
from conftest import open_page, plotly_array, set_widget

from explorer import state

PAGE = "pages/4_Masks.py"
OTHERS = ["5 Mar 2021", "Wednesday, September 22, 1999"]  # the page's default batch


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


@pytest.fixture(scope="module")
def rows(ckpt):
    """The batch's unpadded ids, computed here: sources, and <s> + each translation."""
    sources = [state.DEFAULT_SOURCE, *OTHERS]
    cfg, tok = ckpt.config, ckpt.target_tokenizer
    return {"source": [ckpt.encode_source(s) for s in sources],
            "target": [[cfg.start_id] + tok.encode(ckpt.translate(s).text, max_len=cfg.max_len - 1)
                       for s in sources]}


def blocked_keys(at) -> tuple[int, int]:
    """(blocked, keys) from the success line under the masked row."""
    (line,) = [s.value for s in at.success]
    assert line.startswith("softmax(masked scores) computed here in NumPy equals")
    blocked, keys = re.search(r"blocked keys: (\d+) of (\d+)", line).groups()
    return int(blocked), int(keys)


def test_padding_masks_are_the_batchs(app, rows):
    at = open_page(app, PAGE)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    for side, chart in zip(("source", "target"), charts[:2]):
        width = max(map(len, rows[side]))
        expected = [[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows[side]]
        np.testing.assert_array_equal(plotly_array(chart["data"][0]["z"]), expected)


def test_masked_row_equals_the_models_for_every_kind(app, rows):
    at = open_page(app, PAGE)
    n_source, n_target = len(rows["source"][0]), len(rows["target"][0])
    width_source, width_target = max(map(len, rows["source"])), max(map(len, rows["target"]))
    assert blocked_keys(at) == (width_source - n_source, width_source)  # encoder: padding
    assert width_source > n_source  # a longer sentence in the batch pads row 0
    set_widget(at, "radio", "mask_kind", "Decoder self-attention")
    set_widget(at, "selectbox", "mask_query", 2)
    # Query 2 sees target positions 0..2 (look-ahead), none of them padding.
    assert n_target > 3
    assert blocked_keys(at) == (width_target - 3, width_target)
    set_widget(at, "radio", "mask_kind", "Cross-attention")
    assert blocked_keys(at) == (width_source - n_source, width_source)
    title = json.loads(at.get("plotly_chart")[-1].proto.spec)["layout"]["title"]["text"]
    assert title.startswith("Cross-attention, layer 0, head 0, query 2")
