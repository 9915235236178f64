"""The TF tutorial's Transformer trained on dates by the tutorial's own code
(tests/fixtures/make_tutorial_dates.py), converted: our greedy translation is the tutorial
Translator's, token for token and as text."""

import json
from pathlib import Path

import pytest

from transformer.importers.tf_tutorial import convert_tf_tutorial

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tutorial_dates"
RECORDED = json.loads((FIXTURE / "translations.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ckpt():
    return convert_tf_tutorial(FIXTURE / "model.weights.h5", FIXTURE / "source_vocab.txt",
                               FIXTURE / "target_vocab.txt")


def test_the_architecture_is_inferred_from_the_weights(ckpt):
    sizes = RECORDED["sizes"]
    c = ckpt.config
    assert (c.num_encoder_layers, c.num_decoder_layers) == (sizes["num_layers"],) * 2
    assert (c.d_model, c.num_heads, c.dff) == (sizes["d_model"], sizes["num_heads"], sizes["dff"])
    assert c.head_dim == sizes["d_model"]  # the tutorial's key_dim = d_model per head
    assert c.positional == "sinusoidal_concat" and c.scale_embeddings
    assert c.layer_norm_epsilon == pytest.approx(1e-3)
    assert ckpt.metadata["source"]["recipe"] == "tf-tutorial"


@pytest.mark.parametrize("record", RECORDED["translations"], ids=lambda r: r["source"])
def test_translation_equals_the_tutorials_translator(ckpt, record):
    result = ckpt.translate(record["source"])
    assert [ckpt.config.start_id] + result.token_ids == record["output_ids"]
    assert result.text == record["text"]
