"""DecoderLens (issue 41, item 6): OpenedModel.decoder_lens.

Oracles written here: each encoder layer's output computed layer by layer from the embedded
source (the stack's closing norm applied in a pre-LN model), the decoder run on it alone
(unbatched) for the teacher-forced log-probabilities and for a greedy decode one step at a time;
the last layer's row is the model itself (translate_plain's ids, attention's log-probabilities).
On the bundled model, a pre-LN one and the Marian fixture."""


import numpy as np
import pytest
import tensorflow as tf

SOURCE = "5 March 2021"


CASES = {"bundled": SOURCE, "pre_ln": SOURCE, "marian": "the old man walks to the station"}


def _layer_outputs(ckpt, source_ids):
    """Encoder layer k's output for k = 0 .. L, as the decoder would read it, layer by layer."""
    model = ckpt.model
    ids = tf.constant([source_ids])
    mask = model.source_mask(ids)
    x = model.source_embedding(ids)
    outputs = [x]
    for layer in model.encoder_layers:
        x = layer(x, attention_mask=mask)["output"]
        outputs.append(x)
    if ckpt.config.norm_first:
        outputs = [model.encoder_norm(o) for o in outputs]
    return outputs, mask


def _greedy(ckpt, memory, mask, steps):
    """Greedy, one step at a time, as the model's greedy never emitting padding or <start>."""
    c = ckpt.config
    ids = [c.start_id]
    for _ in range(steps):
        logits = ckpt.model.decode(tf.constant([ids]), memory, mask)["logits"][0, -1].numpy()
        logits[[c.pad_id] + ([c.start_id] if c.start_id != c.end_id else [])] = -np.inf
        ids.append(int(np.argmax(logits)))
        if ids[-1] == c.end_id:
            break
    return ids[1:]


@pytest.mark.parametrize("which", list(CASES))
def test_every_layer_as_memory_equals_the_decoder_run_on_it_alone(which, request):
    ckpt = request.getfixturevalue(which)
    source = CASES[which]
    lens = ckpt.decoder_lens(source, max_steps=12)
    source_ids = ckpt.encode_source(source)
    out = ckpt.translate_plain(source).token_ids
    layers = ckpt.config.num_encoder_layers + 1
    assert lens["layers"] == list(range(layers))
    assert lens["log_probs"].shape == (layers, len(out))
    assert lens["output_tokens"] == ckpt.target_tokenizer.ids_to_pieces(out)
    memories, mask = _layer_outputs(ckpt, source_ids)
    target = tf.constant([[ckpt.config.start_id] + out[:-1]])
    for k, memory in enumerate(memories):
        logits = ckpt.model.decode(target, memory, mask)["logits"][0].numpy()
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                    keepdims=True)) - logits.max(-1, keepdims=True)
        np.testing.assert_allclose(lens["log_probs"][k], log_probs[np.arange(len(out)), out],
                                   atol=2e-4, err_msg=f"{which}: layer {k}")
        assert lens["translations"][k]["token_ids"] == _greedy(ckpt, memory, mask, 12), k
    # the last layer is the model itself
    model_ids = out[:12]
    assert lens["translations"][-1]["token_ids"] == model_ids
    maps = ckpt.attention(source, output_ids=out)
    np.testing.assert_allclose(lens["log_probs"][-1], maps["log_probs"], atol=2e-4)
    assert lens["translations"][-1]["text"] == ckpt.target_tokenizer.decode(model_ids)


def test_a_typed_target_is_scored_and_progress_is_reported(bundled):
    calls = []
    lens = bundled.decoder_lens(SOURCE, "2021-03-05", max_steps=4,
                                on_progress=lambda d, t: calls.append((d, t)))
    assert lens["output_tokens"] == bundled.target_tokenizer.ids_to_pieces(
        bundled.encode_target("2021-03-05"))
    assert calls[-1] == (4, 4) and all(t == 4 for _, t in calls)
    assert all(len(t["token_ids"]) <= 4 for t in lens["translations"])
    assert {t["stopped_by"] for t in lens["translations"]} <= {"end", "length"}


def test_one_trace_per_architecture(bundled):
    """Compiled once (no Python loop per step): other sources, targets and step budgets reuse
    the trace."""
    from transformer.inference.decoder_lens import compiled_lens

    bundled.decoder_lens(SOURCE, max_steps=6)
    function = compiled_lens(bundled.model)
    assert function.tracing_count() == 1
    bundled.decoder_lens("June 30, 1999", "1999-06-30", max_steps=3)
    bundled.decoder_lens("tuesday 4 july 1776", max_steps=20)
    assert function.tracing_count() == 1
