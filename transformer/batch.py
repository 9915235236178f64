"""The attention of many sentences at once, for corpus-level statistics.

Per batch: greedy translation of every source (greedy_decode_batch, no attention kept), then ONE
padded teacher-forced forward pass over the batch, split back into one dict per sentence and
trimmed of its padding. Each dict holds what Checkpoint.attention(source) returns (without
details): padding never changes a real row, because padded keys are masked and padded rows are cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .decoding import greedy_decode_batch
from .masks import decoder_mask, padding_mask

__all__ = ["attention_batch"]


def attention_batch(ckpt, sources: Sequence[str], *, batch_size: int = 32,
                    on_progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Checkpoint.attention(source) of every source (the model's own greedy translation as the
    target), computed batch_size sentences at a time. on_progress(done, total) is called after
    each batch with the number of sentences done so far."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    sources = [str(s) for s in sources]
    results: list[dict] = []
    for start in range(0, len(sources), batch_size):
        results.extend(_one_batch(ckpt, sources[start:start + batch_size]))
        if on_progress is not None:
            on_progress(len(results), len(sources))
    return results


def _one_batch(ckpt, sources: list[str]) -> list[dict]:
    config = ckpt.config
    source_ids = [ckpt.encode_source(s) for s in sources]
    decodings = greedy_decode_batch(ckpt.model, source_ids, max_len=config.max_len, capture=False)
    output_ids = [d.token_ids for d in decodings]
    target_ids = [[config.start_id] + ids[:-1] for ids in output_ids]  # teacher forcing
    src, tgt = _pad(source_ids, config.pad_id), _pad(target_ids, config.pad_id)
    out = ckpt.model((src, tgt), return_attention=True)
    logits = out["logits"].numpy().astype(np.float64)  # (B, T, V)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    encoder = out["encoder_attention"].numpy()  # (L_enc, B, H, N, N)
    decoder = out["decoder_attention"].numpy()  # (L_dec, B, H, T, T)
    cross = out["cross_attention"].numpy()  # (L_dec, B, H, T, N)
    key_mask = np.asarray(padding_mask(src, config.pad_id))[:, 0, 0] > 0  # (B, N)
    self_mask = np.asarray(decoder_mask(tgt, config.pad_id))[:, 0] > 0  # (B, T, T)
    results = []
    for b, (s_ids, t_ids, o_ids) in enumerate(zip(source_ids, target_ids, output_ids)):
        n, t = len(s_ids), len(t_ids)
        results.append({
            "encoder": encoder[:, b, :, :n, :n].copy(),
            "decoder": decoder[:, b, :, :t, :t].copy(),
            "cross": cross[:, b, :, :t, :n].copy(),
            "encoder_mask": np.broadcast_to(key_mask[b, :n], (n, n)).copy(),
            "decoder_mask": self_mask[b, :t, :t].copy(),
            "cross_mask": np.broadcast_to(key_mask[b, :n], (t, n)).copy(),
            "source_tokens": ckpt.source_tokenizer.ids_to_pieces(s_ids),
            "target_tokens": ckpt.target_tokenizer.ids_to_pieces(t_ids),
            "output_tokens": ckpt.target_tokenizer.ids_to_pieces(o_ids),
            "source_ids": np.asarray(s_ids, np.int32),
            "target_ids": np.asarray(t_ids, np.int32),
            "output_ids": np.asarray(o_ids, np.int32),
            "log_probs": log_probs[b, np.arange(t), o_ids].astype(np.float32),
        })
    return results


def _pad(sequences: list[list[int]], pad_id: int) -> np.ndarray:
    """(B, longest) int32, each row padded on the right with pad_id."""
    out = np.full((len(sequences), max(len(s) for s in sequences)), pad_id, np.int32)
    for i, ids in enumerate(sequences):
        out[i, :len(ids)] = ids
    return out
