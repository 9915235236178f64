"""A typed target stepped through as if decoded: the per-step view of teacher forcing.

One teacher-forced pass (the decoder fed <s> + the target, every position at once) gives, for
each position t, what greedy decoding records for a step: the forced token and its
log-probability, the TOP_K most probable next tokens, the cross-attention row over the source
and the self-attention row over the prefix. Row t of a teacher-forced pass equals step t of a
decode of the same prefix (tests/inference/test_decoding.py checks this for greedy decoding), so the
decoding page shows a forced target with the same figures as the model's own decode.
(It could live in transformer.inference.search_ours, next to greedy_decode.)
"""

from __future__ import annotations

import numpy as np

from transformer.inference.decoded import TOP_K, DecodeStep, Decoding
from transformer.inference.forward import forward
from transformer.inference.numerics import check_forward

__all__ = ["teacher_forced"]


def teacher_forced(ckpt, source: str, target: str, head_mask=None) -> Decoding:
    """`target` teacher-forced after `source` as a Decoding (token_ids: the target's ids and
    </s>, cut to the checkpoint's target_len as OpenedModel.attention cuts it; one DecodeStep per
    position) from ONE forward pass (the compiled one of transformer.inference.forward, which
    ranks the vocabulary on the device and returns only the TOP_K of each row). Each step's
    top_k ranks every token of the vocabulary, as greedy decoding's steps do; the forced token
    need not be among them."""
    config = ckpt.config
    tokenizer = ckpt.target_tokenizer
    output_ids = ckpt.encode_target(target)
    target_ids = [config.start_id] + output_ids[:-1]  # the decoder's inputs: shifted right
    out = forward(ckpt.model, [ckpt.encode_source(source)], [target_ids], [output_ids],
                  head_mask, top_k=TOP_K)
    check_forward(out)  # NumericalError naming the layer and step, never steps of NaN
    log_probs = out["log_probs"][0]  # (T,): each forced token's
    top, top_log_probs = out["top_ids"][0], out["top_log_probs"][0]  # (T, k), ties: lower id
    cross = out["cross_attention"][:, 0]  # (L, H, T, N)
    self_attention = out["decoder_attention"][:, 0]  # (L, H, T, T)
    ids = sorted(set(output_ids) | set(top.ravel().tolist()))
    name = dict(zip(ids, tokenizer.ids_to_pieces(ids)))
    steps = [DecodeStep(
        token=name[token_id], token_id=int(token_id), log_prob=float(log_probs[t]),
        top_k=[(name[int(i)], int(i), float(np.exp(lp)))
               for i, lp in zip(top[t], top_log_probs[t])],
        cross=cross[:, :, t].astype(np.float32),  # (L, H, N)
        self=self_attention[:, :, t, :t + 1].astype(np.float32))  # (L, H, t + 1)
        for t, token_id in enumerate(output_ids)]
    return Decoding(token_ids=list(output_ids), tokens=[name[i] for i in output_ids],
                    text=tokenizer.decode(output_ids), steps=steps)
