"""Attention knockout (issue 41, item 5): OpenedModel.knockout.

Oracle written here: the model re-run with a hook on the chosen decoder layers' cross-attention
(its call wrapped so that the mask it is given blocks the chosen heads' edges from the step's
query to the chosen source positions), the step's log-probabilities from that pass; the
continuation greedy from the knocked step's argmax, one step at a time. On the bundled model,
a pre-LN one and the Marian fixture."""


import numpy as np
import pytest
import tensorflow as tf

SOURCE = "5 March 2021"


CASES = {"bundled": SOURCE, "pre_ln": SOURCE, "marian": "the old man walks to the station"}


def _hooked_log_probs(ckpt, source_ids, prefix, step, layers, heads, positions):
    """log p at the last position of `prefix` with the chosen edges blocked by a hook."""
    model = ckpt.model
    originals = {}
    for layer in layers:
        attention = model.decoder_layers[layer].cross_attention
        original = attention.call

        def hooked(query, value=None, attention_mask=None, original=original, **kwargs):
            shape = (1, ckpt.config.num_heads, query.shape[1], value.shape[1])
            block = np.ones(shape, np.float32)
            for h in heads:
                block[0, h, step, positions] = 0.0
            return original(query, value, attention_mask=attention_mask * block, **kwargs)

        originals[layer] = attention
        attention.call = hooked
    try:
        enc = model.encode(tf.constant([source_ids]))
        logits = model.decode(tf.constant([prefix]), enc["memory"], enc["mask"])["logits"]
    finally:
        for attention in originals.values():
            del attention.call
    return tf.nn.log_softmax(logits[0, -1]).numpy()


@pytest.mark.parametrize("which", list(CASES))
def test_the_knocked_step_equals_the_model_rerun_with_a_hook(which, request):
    ckpt = request.getfixturevalue(which)
    source = CASES[which]
    source_ids = ckpt.encode_source(source)
    out = ckpt.translate_plain(source).token_ids
    step = min(2, len(out) - 1)
    layers = list(range(ckpt.config.num_decoder_layers))
    heads = [0, 1]
    positions = list(range(len(source_ids)))  # every source token: the strongest knockout
    got = ckpt.knockout(source, step=step, layers=layers, heads=heads,
                        source_positions=positions)
    prefix = [ckpt.config.start_id] + out[:step]
    expected = _hooked_log_probs(ckpt, source_ids, prefix, step, layers, heads, positions)
    assert got["log_prob_knocked"] == pytest.approx(float(expected[out[step]]), abs=1e-4)
    best = np.argsort(-expected, kind="stable")[:5]
    assert [i for _, i, _ in got["top_knocked"]] == [int(i) for i in best]
    maps = ckpt.attention(source, output_ids=out)
    assert got["log_prob"] == pytest.approx(float(maps["log_probs"][step]), abs=1e-4)
    assert got["translation"]["token_ids"] == out
    # the continuation: the knocked step's argmax, then greedy without the knockout, never
    # padding or <start> (as the model's greedy)
    c = ckpt.config
    never = [c.pad_id] + ([c.start_id] if c.start_id != c.end_id else [])

    def pick(log_probs):
        log_probs = np.array(log_probs)
        log_probs[never] = -np.inf
        return int(np.argmax(log_probs))

    ids = out[:step] + [pick(expected)]
    enc = ckpt.model.encode(tf.constant([source_ids]))
    while ids[-1] != c.end_id and len(ids) < min(ckpt.step_budget(), len(out) + 10):
        logits = ckpt.model.decode(tf.constant([[c.start_id] + ids]), enc["memory"],
                                   enc["mask"])["logits"][0, -1]
        ids.append(pick(logits.numpy()))
    assert got["translation_knocked"]["token_ids"] == ids


def test_one_edge_moves_less_than_all_and_bad_choices_are_refused(bundled):
    out = bundled.translate_plain(SOURCE).token_ids
    n = len(bundled.encode_source(SOURCE))
    every = bundled.knockout(SOURCE, step=1, layers=[0, 1], source_positions=range(n))
    one = bundled.knockout(SOURCE, step=1, layers=[1], heads=[2], source_positions=[0])
    assert abs(one["log_prob_knocked"] - one["log_prob"]) <= abs(
        every["log_prob_knocked"] - every["log_prob"])
    # the trained model reads the date from the source: without it, the step's token drops
    assert every["log_prob_knocked"] < every["log_prob"] - 0.5
    for bad, match in (({"step": len(out)}, "step must be"),
                       ({"layers": [5]}, "decoder layers must be 0 to 1"),
                       ({"heads": [9]}, "heads must be 0 to 3"),
                       ({"source_positions": []}, "pick at least one source position")):
        options = {"step": 1, "layers": [0], "source_positions": [0], **bad}
        with pytest.raises(ValueError, match=match):
            bundled.knockout(SOURCE, **options)
