"""Results as types (issue 39, item 3): what OpenedModel.attention, .contributions and
.layer_predictions return is a dict whose keys are attributes too, of a kind that declares the
keys every result of it holds, and survives pickling (st.cache_data keeps results pickled)."""

import pickle

import numpy as np
import pytest

from transformer import (
    DEFAULT_CHECKPOINT,
    AttentionMaps,
    ContextMixing,
    LayerPredictions,
    TokenContributions,
    load_checkpoint,
)
from transformer.inference.contributions import METHODS

SOURCE = "Friday, March 5, 2021"


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_each_result_is_its_kind_and_a_dict(bundled):
    maps = bundled.attention(SOURCE)
    assert type(maps) is AttentionMaps and isinstance(maps, dict)
    assert maps.cross is maps["cross"] and maps.cross.ndim == 4  # (L, H, T, N)
    assert set(AttentionMaps.FIELDS) <= set(maps) and "cross" in dir(maps)
    assert type(bundled.contributions(SOURCE, method="value_norm")) is AttentionMaps
    alti = bundled.contributions(SOURCE, method="alti")
    assert type(alti) is TokenContributions and alti.source_share.shape == (len(alti.output_tokens),)
    lens = bundled.layer_predictions(SOURCE)
    assert type(lens) is LayerPredictions and lens.top_probs.shape[:2] == lens.chosen_probs.shape


def test_every_method_says_the_kind_it_returns():
    assert {name: method.output for name, method in METHODS.items()} == {
        "value_norm": AttentionMaps, "alti": TokenContributions, "saliency": TokenContributions,
        "input_x_gradient": TokenContributions, "integrated_gradients": TokenContributions,
        "value_zeroing": ContextMixing, "alti_logit": TokenContributions}


def test_a_result_lacking_a_declared_key_is_refused_and_a_missing_attribute_is_one():
    with pytest.raises(KeyError, match="a TokenContributions lacks target"):
        TokenContributions(source_tokens=[], target_tokens=[], output_tokens=[],
                           source=np.zeros((1, 1)))
    result = TokenContributions(source_tokens=[], target_tokens=[], output_tokens=[],
                                source=np.zeros((1, 1)), target=np.zeros((1, 1)))
    with pytest.raises(AttributeError, match="TokenContributions has no 'source_share'"):
        _ = result.source_share
    assert not hasattr(result, "source_share")


def test_a_result_survives_pickling_as_its_kind(bundled):
    maps = bundled.attention(SOURCE)
    again = pickle.loads(pickle.dumps(maps))
    assert type(again) is AttentionMaps and again.keys() == maps.keys()
    np.testing.assert_array_equal(again.cross, maps.cross)
