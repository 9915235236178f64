"""The attention maps of a sentence, built in one place.

`attention_maps` runs ONE padded teacher-forced pass over any number of sentences (the compiled
pass of transformer.inference.forward, shared by every model of the architecture) and splits it
back into one dict per sentence, trimmed of its padding (padding never changes a real row:
padded keys are masked and padded rows are cut). `OpenedModel.attention` (one sentence) and
`attention_batch` (a corpus) both use it, so every page sees the same keys:

    "encoder" (L_enc, H, N, N), "decoder" (L_dec, H, T, T), "cross" (L_dec, H, T, N)  float32
    "encoder_mask" (N, N), "decoder_mask" (T, T), "cross_mask" (T, N)   bool, True = may attend
    "source_tokens" (N), "target_tokens" (T: the decoder's inputs, <s> first),
    "output_tokens" (T: the token each row predicts, </s> last)
    "source_ids", "target_ids", "output_ids"  int32
    "log_probs" (T): the log-probability the model gives each output token
    with details, per kind: "<kind>_q", "<kind>_k", "<kind>_v" (L, H, len, head_dim) and
    "<kind>_scores" (L, H, q_len, k_len): QK^T / sqrt(head_dim) (T5: unscaled, its position
    bias added) before masking; for T5 also "encoder_position_bias" (H, N, N) and
    "decoder_position_bias" (H, T, T), the relative position bias every layer of the stack
    adds to its self-attention scores. With details of one layer (detail_of=(kind, layer)):
    that kind's four alone, each (1, H, ...), and "detail_of" (kind, layer).
    with values (and not details): "<kind>_v" alone (transformer.inference.contributions);
    with hidden_states: "encoder_hidden_states" (L_enc + 1, N, d_model) and
    "decoder_hidden_states" (L_dec + 1, T, d_model) (transformer.inference.alti_inputs).

A sentence whose pass computed NaN or infinity gets no maps: a NumericalError
(transformer.inference.numerics) names the layer and position where it first appears.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer.core.kinds import KINDS
from transformer.core.masking import pad_ids
from transformer.inference.forward import eager_forward, forward
from transformer.inference.numerics import check_forward
from transformer.inference.outputs import AttentionMaps

__all__ = ["attention_maps", "scored_ids"]


def attention_maps(ckpt, source_ids: Sequence[Sequence[int]],
                   output_ids: Sequence[Sequence[int]], head_mask=None,
                   details: bool = False, compiled: bool = True,
                   values: bool = False, hidden_states: bool = False,
                   detail_of: tuple[str, int] | None = None) -> list[dict]:
    """The maps (see the module docstring) of each (source ids, output ids) pair, teacher
    forced: the decoder is fed <s> + output_ids[:-1] and scored on output_ids.
    compiled=False runs the eager reference (transformer.inference.forward.eager_forward)
    instead of the shared compiled pass: the same numbers. values=True: V alone of the
    details, from a pass that hands out nothing else. hidden_states=True: also
    "encoder_hidden_states" (L_enc + 1, N, d_model) and "decoder_hidden_states"
    (L_dec + 1, T, d_model), each stack's embedded input then each layer's output (a pre-LN
    stack's last one after its closing norm). detail_of=(kind, layer) with details: that
    layer's details alone (transformer.inference.forward.forward)."""
    config, model = ckpt.config, ckpt.model
    target_ids = [[config.start_id] + list(ids[:-1]) for ids in output_ids]  # shifted right
    src, tgt = pad_ids(source_ids, config.pad_id), pad_ids(target_ids, config.pad_id)
    scored = pad_ids(output_ids, config.pad_id)  # (B, T)
    run = forward if compiled else eager_forward
    out = run(model, src, tgt, scored, head_mask, details=details, values=values,
              hidden_states=hidden_states, detail_of=detail_of)
    key_mask = out["source_mask"][:, 0, 0] > 0  # (B, N)
    self_mask = out["target_mask"][:, 0] > 0  # (B, T, T)
    results = []
    for b, (s_ids, t_ids, o_ids) in enumerate(zip(source_ids, target_ids, output_ids)):
        n, t = len(s_ids), len(t_ids)
        check_forward(out, b, n, t, detail_of)  # NumericalError rather than maps of NaN
        sides = {"source": n, "target": t}
        maps = {}
        for name, kind in KINDS.items():
            q, k = sides[kind.query_side], sides[kind.key_side]
            maps[name] = out[f"{name}_attention"][:, b, :, :q, :k].copy()  # (L, H, q, k)
        maps.update({
            "encoder_mask": np.broadcast_to(key_mask[b, :n], (n, n)).copy(),
            "decoder_mask": self_mask[b, :t, :t].copy(),
            "cross_mask": np.broadcast_to(key_mask[b, :n], (t, n)).copy(),
            "source_tokens": ckpt.source_tokenizer.ids_to_pieces(s_ids),
            "target_tokens": ckpt.target_tokenizer.ids_to_pieces(t_ids),
            "output_tokens": ckpt.target_tokenizer.ids_to_pieces(o_ids),
            "source_ids": np.asarray(s_ids, np.int32),
            "target_ids": np.asarray(t_ids, np.int32),
            "output_ids": np.asarray(o_ids, np.int32),
            "log_probs": out["log_probs"][b, :t].astype(np.float32),
        })
        if hidden_states:
            maps["encoder_hidden_states"] = out["encoder_hidden_states"][:, b, :n].copy()
            maps["decoder_hidden_states"] = out["decoder_hidden_states"][:, b, :t].copy()
        if values and not details:
            for name, kind in KINDS.items():
                maps[f"{name}_v"] = out[f"{name}_v"][:, b, :, :sides[kind.key_side]].copy()
        if details:
            for name, kind in KINDS.items():
                if f"{name}_q" not in out:  # detail_of: another kind's
                    continue
                q, k = sides[kind.query_side], sides[kind.key_side]
                maps[f"{name}_q"] = out[f"{name}_q"][:, b, :, :q].copy()  # (L, H, q, head_dim)
                maps[f"{name}_k"] = out[f"{name}_k"][:, b, :, :k].copy()
                maps[f"{name}_v"] = out[f"{name}_v"][:, b, :, :k].copy()
                maps[f"{name}_scores"] = out[f"{name}_scores"][:, b, :, :q, :k].copy()
            for stack, length in (("encoder", n), ("decoder", t)):
                if f"{stack}_position_bias" in out:  # (1, H, len, len): one for the batch
                    maps[f"{stack}_position_bias"] = \
                        out[f"{stack}_position_bias"][0, :, :length, :length].copy()
            if detail_of is not None:
                maps["detail_of"] = (detail_of[0], int(detail_of[1]))
        results.append(AttentionMaps(maps))
    return results


def scored_ids(ckpt, source: str, target: str | None = None, output_ids=None,
               head_mask=None) -> list[int]:
    """The output ids a teacher-forced pass scores, as OpenedModel.attention picks them: the
    typed target's (cut to target_len), else output_ids when given, else the model's greedy
    translation (with head_mask)."""
    if target is not None:
        return ckpt.encode_target(target)
    if output_ids is not None:
        return [int(i) for i in output_ids]
    return ckpt._translation_ids(source, head_mask)
