"""What the Masks page says of the rows of its batch, from the model's own config and
tokenizers (issue 24, item 5): which special tokens frame a source, which token starts the
decoder's input (Marian has no <s>: it starts with its pad token, and ends sources with </s>
only; BART frames a source with <s> and </s> and starts the decoder with </s>), and what pads
each side. No special token is named that the model does not have."""

from __future__ import annotations

from .tokens import frame_ids
from .widgets import quoted


def _piece(tokenizer, token_id: int) -> str:
    return f"{quoted(tokenizer.id_to_piece(token_id))} (id {token_id})"


def sides_caption(ckpt, source_len: int, target_len: int, typed: bool = False) -> str:
    """One caption for the batch's two sides: how ckpt.encode_source frames a source, what the
    decoder is fed (the start token + the translation without its end token; row 0's typed
    target instead, when `typed`), what pads them."""
    cfg, src, tgt = ckpt.config, ckpt.source_tokenizer, ckpt.target_tokenizer
    before, after = frame_ids(src, cfg.source_start, cfg.source_end)  # the tokenizer's own
    frame = [" + ".join(_piece(src, i) for i in before) + " first" if before else "",
             " + ".join(_piece(src, i) for i in after) + " last" if after else ""]
    frame = " and ".join(f for f in frame if f) or "no special token"
    fixed = " (the model's fixed source length)" if cfg.pad_source_to else ""
    start = _piece(tgt, cfg.start_id)
    if cfg.start_id == cfg.pad_id:
        start += ", the pad id: this model has no separate start token"
    typed_row0 = " (row 0: your typed target, as every page feeds it)" if typed else ""
    return (f"Source side: `ckpt.encode_source`, the sentence's pieces with {frame}, padded to "
            f"N = {source_len}{fixed} with {_piece(src, cfg.pad_id)}. Target side: what the "
            f"decoder is fed: the start token {start}, then the model's translation{typed_row0} "
            f"without its end token {_piece(tgt, cfg.end_id)}, padded to T = {target_len} with "
            f"{_piece(tgt, cfg.pad_id)}.")


def cut_rows_caption(rows: list[int], steps: int) -> str:
    """Which other rows' translations stopped before their end token (they are decoded for
    their padding only, at most `steps` tokens each)."""
    listed = (str(rows[0]) if len(rows) == 1 else
              ", ".join(map(str, rows[:-1])) + f" and {rows[-1]}")
    return (f"Row{'s' * (len(rows) > 1)} {listed}: the translation is cut at {steps} tokens "
            f"without its end token (the other rows are here for their padding, so each is "
            f"decoded for at most {steps} tokens; the sidebar's row 0 is the whole translation).")
