"""Which piece of the text each token id stands for, for the tokenization page."""

from __future__ import annotations


def text_pieces(tok, ids, text: str | None) -> list[str]:
    """The piece of each id: cut from `text` where the ids encode it (so preprocessing such as
    lowercasing shows), else the vocabulary's piece (special ids, or `text` None: model output)."""
    cut = iter(tok.pieces(text)) if text is not None else iter(())
    specials = (tok.start_id, tok.end_id, tok.pad_id)
    return [tok.id_to_piece(i) if i in specials or text is None else next(cut) for i in ids]
