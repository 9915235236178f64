"""Prepare a model's compiled functions before anyone waits on them.

Every page's computation runs in a compiled function shared by all models of one architecture
(transformer.inference.compiled.shared_function): the greedy decode loop with and without its
attention rows, the teacher-forced forward pass plain, with one layer's Q/K/V, with V alone (the
attention views' weight × value norm), with V and the layer inputs (ALTI+) and with the top-k of
each row, the beam search, the gradient pass and DecoderLens, and for a model with a generation
config its search (transformer.inference.search_transformers). Each is traced on its first call
(about 1.5 s for an opus-mt-sized model on 2 cores) and set up on its first run (without Grappler's
rewrites: compiled.unrewritten). `prepare` pays both on a one-token input, so a later call only
computes; the app runs it in the background once a model is open
(explorer.warm). Functions already prepared for the architecture cost nothing.
"""

from __future__ import annotations

import time
from dataclasses import replace

from transformer.inference.decoded import TOP_K
from transformer.inference.decoder_lens import lens_pass
from transformer.inference.forward import forward
from transformer.inference.gradients import prepare_pass
from transformer.inference.search_ours import beam_search, greedy_decode_batch
from transformer.inference.search_transformers import generate

__all__ = ["KINDS", "prepare"]

# The compiled functions the pages call, in the order a user usually meets them.
KINDS = ("greedy", "forward", "forward_top", "forward_details_layer", "greedy_no_capture",
         "forward_values", "forward_values_hidden", "beam", "gradients", "decoder_lens")


def prepare(model, kinds=KINDS, generation=None) -> dict[str, float]:
    """Trace and run once each compiled function in `kinds` for this model's architecture, on
    one token; {kind: seconds it took} (about 0 for one prepared before). generation: the
    model's GenerationSettings (OpenedModel.generation), whose search (transformers' greedy or
    beam loop: "generate") the translation runs first, before the rest."""
    c = model.config
    if generation is not None:
        kinds = ("generate",) + tuple(kinds)
    token = 1 if c.pad_id == 0 else 0  # any id but padding: one real source token
    source, target, output = [[token]], [[c.start_id]], [[c.end_id]]
    calls = {
        "generate": lambda: generate(model, source[0], replace(generation, max_length=2)),
        "greedy": lambda: greedy_decode_batch(model, source, max_len=1),
        "greedy_no_capture": lambda: greedy_decode_batch(model, source, max_len=1, capture=False),
        "forward": lambda: forward(model, source, target, output),
        "forward_top": lambda: forward(model, source, target, output, top_k=TOP_K),
        # The arithmetic of one head, the Masks page's row and T5's position bias: the
        # details of the layer picked
        "forward_details_layer": lambda: forward(model, source, target, output, details=True,
                                                 detail_of=("encoder", 0)),
        # Not in KINDS (no page asks for every layer's details): OpenedModel.attention(
        # details=True).
        "forward_details": lambda: forward(model, source, target, output, details=True),
        # The attention views' "Weight × value norm" (OpenedModel.contributions' value norms)
        "forward_values": lambda: forward(model, source, target, output, values=True),
        # The Contributions page's ALTI+ (V and each stack's layer inputs)
        "forward_values_hidden": lambda: forward(model, source, target, output, values=True,
                                                 hidden_states=True),
        # The Decoding page's beam search (its Beam width option: 7 s to trace on a first use
        # before, issue 38) and the gradients of Contributions and Decoding
        "beam": lambda: beam_search(model, source[0], beam_width=2, max_len=1),
        "gradients": lambda: prepare_pass(model),
        # The Interventions page's DecoderLens (on by default there)
        "decoder_lens": lambda: lens_pass(model, source[0], output[0], max_steps=1),
        # Not in KINDS (the Decoding page's logit lens, off until asked for):
        # OpenedModel.layer_predictions.
        "forward_hidden": lambda: forward(model, source, target, output, hidden_states=True),
    }
    seconds = {}
    for kind in kinds:
        started = time.perf_counter()
        calls[kind]()
        seconds[kind] = time.perf_counter() - started
    return seconds
