"""transformer.inference.numerics: NaN or infinity met while computing for a user is a sentence
naming the layer and the step (or source position), raised instead of arrays of NaN.

Files cannot load such a model any more (transformer.model.bounds refuses them), so the hostile
weights are written into an opened model's variables here: one token's embedding row at 1e30,
the issue's hostile file."""

import numpy as np
import pytest

from transformer import DEFAULT_CHECKPOINT, load_checkpoint
from transformer.inference.ablation import ablate, output_log_probs
from transformer.inference.numerics import NumericalError, check_forward, check_step
from transformer.inference.teacher_forcing import teacher_forced

SOURCE = "Friday, March 5, 2021"
TARGET = "2021-03-05"


def with_row(ckpt, side: str, token: int, value: float = 1e30):
    """ckpt with row `token` of its `side` token embedding set to value (in the variables)."""
    layer = getattr(ckpt.model, f"{side}_token_embedding")
    table = layer.embeddings.numpy()
    table[token] = value
    layer.embeddings.assign(table)
    return ckpt


@pytest.fixture(scope="module")
def hostile_source():
    """The bundled model with the source row of the sentence's 4th id (position 3) at 1e30."""
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    return with_row(ckpt, "source", ckpt.encode_source(SOURCE)[3])


@pytest.fixture(scope="module")
def hostile_start():
    """The bundled model with the target start token's row at 1e30: the decoder's first input."""
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    return with_row(ckpt, "target", ckpt.config.start_id)


def says(call, *fragments) -> str:
    with pytest.raises(NumericalError) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert message.startswith("The model computed ") and message.endswith(
        "; nothing is drawn from it.")
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


ENCODER_3 = "in encoder layer 0's self-attention at source position 3"


@pytest.mark.parametrize("options", [
    {}, {"use_cache": False}, {"beam_width": 3}, {"beam_width": 3, "use_cache": False},
], ids=["greedy", "naive", "beam", "beam_naive"])
def test_a_translation_says_where_the_encoder_computed_nan(hostile_source, options):
    says(lambda: hostile_source.translate(SOURCE, **options), ENCODER_3)


def test_a_translation_without_its_maps_says_it_too(hostile_source):
    says(lambda: hostile_source.translate_plain(SOURCE), ENCODER_3)


def test_maps_teacher_forcing_and_ablation_say_it(hostile_source):
    says(lambda: hostile_source.attention(SOURCE, TARGET), "NaN", ENCODER_3)
    says(lambda: hostile_source.attention(SOURCE, TARGET, details=True), "NaN", ENCODER_3)
    says(lambda: hostile_source.attention(SOURCE, output_ids=[5, 6, 2]), ENCODER_3)
    says(lambda: teacher_forced(hostile_source, SOURCE, TARGET), ENCODER_3)
    ids = hostile_source.encode_source(SOURCE)
    says(lambda: output_log_probs(hostile_source, ids, [5, 6, 2]), ENCODER_3)
    says(lambda: ablate(hostile_source, SOURCE, [("cross", 0, 0)], target_ids=[5, 6, 2]),
         ENCODER_3)


def test_a_sentence_without_the_hostile_token_is_untouched(hostile_source):
    """Only inputs that meet the huge row compute NaN: the others translate as before."""
    reference = load_checkpoint(DEFAULT_CHECKPOINT)
    sentence = "5 july 1987"
    assert hostile_source.encode_source(SOURCE)[3] not in hostile_source.encode_source(sentence)
    assert hostile_source.translate(sentence).text == reference.translate(sentence).text
    maps = hostile_source.attention(sentence)
    assert all(np.isfinite(maps[kind]).all() for kind in ("encoder", "decoder", "cross"))


@pytest.mark.parametrize("options", [{}, {"use_cache": False}, {"beam_width": 2}],
                         ids=["greedy", "naive", "beam"])
def test_decoding_names_the_decoder_layer_and_step(hostile_start, options):
    says(lambda: hostile_start.translate(SOURCE, **options),
         "in decoder layer 0's self-attention at step 0")
    says(lambda: hostile_start.translate_plain(SOURCE),
         "in decoder layer 0's self-attention at step 0")


def test_teacher_forcing_names_the_step_that_reads_the_hostile_token():
    """Output token 2 is the decoder's input at step 3: its self-attention row there is the
    first to overflow (earlier rows never see it: the look-ahead mask)."""
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    output_ids = ckpt.encode_target(TARGET)
    with_row(ckpt, "target", output_ids[2])
    says(lambda: teacher_forced(ckpt, SOURCE, TARGET),
         "NaN in decoder layer 0's self-attention at step 3")
    says(lambda: ckpt.attention(SOURCE, TARGET), "decoder layer 0's self-attention at step 3")


def test_the_checks_name_the_first_layer_and_position_in_computation_order():
    maps = {"encoder_attention": np.zeros((2, 1, 2, 4, 4)),
            "decoder_attention": np.zeros((2, 1, 2, 3, 3)),
            "cross_attention": np.zeros((2, 1, 2, 3, 4)), "log_probs": np.zeros((1, 3))}
    check_forward(maps)  # all finite: nothing to say
    maps["log_probs"][0, 2] = -np.inf
    says(lambda: check_forward(maps), "an infinity in the log-probabilities at step 2")
    maps["cross_attention"][1, 0, 1, 1, 0] = np.nan
    says(lambda: check_forward(maps), "NaN in decoder layer 1's cross-attention at step 1")
    maps["decoder_attention"][1, 0, 0, 2, 1] = np.nan  # layer 1's self-attention comes first
    says(lambda: check_forward(maps), "decoder layer 1's self-attention at step 2")
    # positions that are not drawn (padding beyond the sentence's length) are not judged
    check_forward({"encoder_attention": np.where(np.arange(4) < 3, 0.0, np.nan)[None, None,
                                                                                None, None]},
                  n=3)
    check_step(4, -0.5, [-0.5, -2.0], np.zeros((2, 2, 5)), np.zeros((2, 2, 7)))
    cross = np.zeros((2, 2, 7))
    cross[1, 0, 3] = np.nan
    says(lambda: check_step(4, -0.5, [-0.5, -2.0], np.zeros((2, 2, 5)), cross),
         "NaN in decoder layer 1's cross-attention at step 4")
    says(lambda: check_step(6, np.nan, [-0.5]), "NaN in the log-probabilities at step 6")
