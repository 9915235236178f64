"""The config.json of the checkpoints researchers use most, as the hub carries them (written by
transformers 4.x: config_hub.json) and as transformers 5.24 writes them on save_pretrained
(config_5_24.json): every one maps, both writings of one model give the same architecture
(5.24 drops the generation fields, renames torch_dtype, writes tie_word_embeddings true and T5's
scale_decoder_outputs), and the limits follow who gave the model: a stranger's upload keeps its
12 layers a stack and 16 in all, a named model opens all of them.

tests/fixtures/configs/<model>/: written with transformers 5.24 (bench/real_models.py --configs);
the hub's own config.json files were written out from their published values (this machine
cannot reach the hub)."""

import json
from pathlib import Path

import pytest

from transformer.checkpoint.format import CheckpointError, check_config
from transformer.core import limits
from transformer.importers import HF_FAMILIES
from transformer.model.config import TransformerConfig

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
MODELS = sorted(p.name for p in CONFIGS.iterdir())
# (encoder + decoder layers, d_model, heads) of each: what the config must say
SHAPES = {"t5-small": (6, 6, 512, 8), "t5-base": (12, 12, 768, 12),
          "flan-t5-base": (12, 12, 768, 12), "flan-t5-large": (24, 24, 1024, 16),
          "bart-large": (12, 12, 1024, 16), "bart-large-cnn": (12, 12, 1024, 16),
          "distilbart-cnn-12-6": (12, 6, 1024, 16), "mbart-large-50": (12, 12, 1024, 16),
          "nllb-200-distilled-600M": (12, 12, 1024, 16), "m2m100_418M": (12, 12, 1024, 16),
          "pegasus-xsum": (16, 16, 1024, 16), "opus-mt-en-de": (6, 6, 512, 8)}


def mapped(path: Path) -> dict:
    hf_config = json.loads(path.read_text())
    return HF_FAMILIES[hf_config["model_type"]].config(hf_config)


def test_every_model_is_here():
    assert set(MODELS) == set(SHAPES)


@pytest.mark.parametrize("model", MODELS)
def test_both_writings_map_to_the_same_model(model):
    hub, newest = mapped(CONFIGS / model / "config_hub.json"), \
        mapped(CONFIGS / model / "config_5_24.json")
    if model.startswith(("t5", "flan-t5")):  # T5's output tie follows the weights (tied_output)
        hub.pop("tie_output"), newest.pop("tie_output")
    assert hub == newest
    assert (hub["num_encoder_layers"], hub["num_decoder_layers"], hub["d_model"],
            hub["num_heads"]) == SHAPES[model]
    config = TransformerConfig(**{**hub, "tie_output": hub.get("tie_output", True)})
    check_config(config, limits.named_budgets(available=64 * 2**30))  # a named model opens
    big = hub["num_encoder_layers"] > limits.MAX_LAYERS or \
        hub["num_encoder_layers"] + hub["num_decoder_layers"] > limits.MAX_TOTAL_LAYERS
    if big:  # an upload keeps the upload's limits, refused from the config alone
        with pytest.raises(CheckpointError, match="the limit is"):
            check_config(config, limits.UPLOAD)


def test_t5_output_scaling_as_each_writing_says():
    for model, scaled in (("t5-base", True), ("flan-t5-base", False)):
        for name in ("config_hub.json", "config_5_24.json"):
            c = mapped(CONFIGS / model / name)
            assert (c["output_scale"] != 1.0) is scaled, (model, name)
