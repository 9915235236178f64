"""The attention of many sentences at once, for corpus-level statistics.

The sources are tokenized and padded into batches by tf.data; per batch: greedy translation of
every source (greedy_decode_batch, no attention kept, at most the step budget), then ONE padded
teacher-forced forward pass (transformer.inference.maps.attention_maps), split back into one dict per
sentence: each holds what OpenedModel.attention(source) returns (without details). A batch holds
no more sentences than the maps of one pass may take (limits.MAX_MAPS_BYTES), however long they
are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from transformer.core import limits
from transformer.inference.maps import attention_maps
from transformer.inference.search_ours import greedy_decode_batch

__all__ = ["attention_batch"]


def attention_batch(ckpt, sources: Sequence[str], *, batch_size: int = 32,
                    on_progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """OpenedModel.attention(source) of every source (the model's own greedy translation as the
    target), computed batch_size sentences at a time (fewer when the maps of that many would not
    fit the model's maps budget). on_progress(done, total) is called after each batch with the
    number of sentences done so far."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    source_ids = [ckpt.encode_source(str(s)) for s in sources]
    if not source_ids:
        return []
    batch_size = min(batch_size, _rows_within_budget(ckpt, max(map(len, source_ids))))
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


def _rows_within_budget(ckpt, longest_source: int) -> int:
    """How many sentences one padded pass may hold: their maps, with sources of longest_source
    ids and translations as long as the step budget, at their peak (limits.maps_copies) fit
    the model's maps budget (ckpt.budgets.maps_bytes); at least one."""
    longest = max(longest_source, ckpt.step_budget())
    one = limits.maps_copies() * limits.maps_bytes(ckpt.config, longest)
    return max(1, int(ckpt.budgets.maps_bytes // one))


def _one_batch(ckpt, source_ids: list[list[int]], src: np.ndarray) -> list[dict]:
    decodings = greedy_decode_batch(ckpt.model, src, max_len=ckpt.step_budget(), capture=False)
    return attention_maps(ckpt, source_ids, [d.token_ids for d in decodings])
