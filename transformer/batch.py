"""The attention of many sentences at once, for corpus-level statistics.

The sources are tokenized and padded into batches by tf.data; per batch: greedy translation of
every source (greedy_decode_batch, no attention kept), then ONE padded teacher-forced forward pass, split back into one dict per sentence and
trimmed of its padding. Each dict holds what Checkpoint.attention(source) returns (without
details): padding never changes a real row, because padded keys are masked and padded rows are cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from .decoding import greedy_decode_batch, log_softmax
from .masks import decoder_mask, padding_mask

__all__ = ["attention_batch"]


def attention_batch(ckpt, sources: Sequence[str], *, batch_size: int = 32,
                    on_progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Checkpoint.attention(source) of every source (the model's own greedy translation as the
    target), computed batch_size sentences at a time. on_progress(done, total) is called after
    each batch with the number of sentences done so far."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    source_ids = [ckpt.encode_source(str(s)) for s in sources]
    if not source_ids:
        return []
    pad_id = ckpt.config.pad_id
    batches = tf.data.Dataset.from_generator(
        lambda: iter(source_ids), output_signature=tf.TensorSpec([None], tf.int32),
    ).padded_batch(batch_size, padding_values=pad_id)
    results: list[dict] = []
    for src in batches.as_numpy_iterator():  # (B, N) padded
        results.extend(_one_batch(ckpt, source_ids[len(results):len(results) + len(src)], src))
        if on_progress is not None:
            on_progress(len(results), len(source_ids))
    return results


def _one_batch(ckpt, source_ids: list[list[int]], src: np.ndarray) -> list[dict]:
    config = ckpt.config
    decodings = greedy_decode_batch(ckpt.model, src, max_len=config.max_len, capture=False)
    output_ids = [d.token_ids for d in decodings]
    target_ids = [[config.start_id] + ids[:-1] for ids in output_ids]  # teacher forcing
    tgt = _pad(target_ids, config.pad_id)
    out = ckpt.model((src, tgt), return_attention=True)
    log_probs = log_softmax(out["logits"].numpy())  # (B, T, V)
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
