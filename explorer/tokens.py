"""Which piece of the text each token id stands for (the tokenization page), and tokens
simplified for a view: special tokens hidden, pieces merged into words by each side's tokenizer."""

from __future__ import annotations

from transformer.analysis.flow import SPECIAL_TOKENS, has_word_boundaries, simplify_tokens


def text_pieces(tok, ids, text: str | None) -> list[str]:
    """The piece of each id: cut from `text` where the ids encode it (so preprocessing such as
    lowercasing shows), else the vocabulary's piece (special ids, or `text` None: model output)."""
    cut = iter(tok.pieces(text)) if text is not None else iter(())
    specials = (tok.start_id, tok.end_id, tok.pad_id)
    return [tok.id_to_piece(i) if i in specials or text is None else next(cut) for i in ids]


def special_pieces(*tokenizers) -> tuple[str, ...]:
    """The special pieces to hide: transformer.analysis.flow' usual ones and each tokenizer's own
    pad, unk, start and end pieces (a word-level vocabulary names them "[START]", ...)."""
    found = list(SPECIAL_TOKENS)
    for tok in tokenizers:
        for i in (tok.pad_id, tok.unk_id, tok.start_id, tok.end_id):
            if i is not None and tok.id_to_piece(i) not in found:
                found.append(tok.id_to_piece(i))
    return tuple(found)


def simplify(weights, query_tokens, key_tokens, sides: tuple[str, str], tokenizers: dict, *,
             hide_special: bool, merge_words: bool, renormalise: bool = True):
    """transformer.analysis.flow.simplify_tokens with each side's tokenizer: words follow that
    tokenizer's word boundaries, and a side without any (its pieces make one word) keeps its
    pieces. sides: ("source" | "target") of the queries and of the keys; tokenizers: {side:
    tokenizer}. Returns (weights, query labels, key labels, note): note is a sentence naming the
    sides kept as pieces, or None."""
    special = special_pieces(*tokenizers.values())
    merge, kept = [], []
    for side, tokens in zip(sides, (query_tokens, key_tokens)):
        splits = has_word_boundaries(tokenizers[side], tokens, special)
        merge.append(merge_words and splits)
        if merge_words and not splits and side not in kept:
            kept.append(side)
    weights, rows, cols = simplify_tokens(
        weights, query_tokens, key_tokens, hide_special=hide_special, merge_words=tuple(merge),
        renormalise=renormalise, special=special, query_tokenizer=tokenizers[sides[0]],
        key_tokenizer=tokenizers[sides[1]])
    note = None
    if kept:
        note = (f"The {' and the '.join(kept)} side{'s have' if len(kept) > 1 else ' has'} no "
                "word boundaries (all its pieces make one word, as the tokenizer marks word "
                "starts), so its pieces are kept.")
    return weights, rows, cols, note
