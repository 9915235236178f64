"""Which piece of the text each token id stands for (the tokenization page), what a tokenizer is
and what it does before splitting, in words derived from the tokenizer itself, pieces as the
pages show them (a byte-level BPE's decoded: transformer.tokenizers.display), and tokens
simplified for a view: special tokens hidden, pieces merged into words by each side's tokenizer."""

from __future__ import annotations

from transformer.analysis.flow import SPECIAL_TOKENS, has_word_boundaries, simplify_tokens
from transformer.analysis.head_stats import SINK_TOKENS
from transformer.tokenizers.display import is_byte_level, shown_pieces
from transformer.tokenizers.word import STANDARDIZATIONS

MAP_TOKENS = {"source_tokens": "source", "target_tokens": "target", "output_tokens": "target"}


def special_ids(tok) -> tuple[int, ...]:
    """The ids a tokenizer adds around text or pads with, never cut from it: its start, end and
    pad ids, and a Hugging Face tokenizer's prefix_ids and suffix_ids (a language code, <s>)."""
    found = [tok.start_id, tok.end_id, tok.pad_id,
             *getattr(tok, "prefix_ids", ()), *getattr(tok, "suffix_ids", ())]
    return tuple(dict.fromkeys(i for i in found if i is not None))


def frame_ids(tok, start: bool, end: bool) -> tuple[list[int], list[int]]:
    """(before, after): the ids the tokenizer puts before and after a side's pieces when that
    side has a start and an end (a Hugging Face tokenizer's own prefix_ids and suffix_ids:
    BART's <s> and </s>, mBART's </s> + language code; else its start_id and end_id)."""
    before = list(getattr(tok, "prefix_ids", [tok.start_id])) if start else []
    after = list(getattr(tok, "suffix_ids", [tok.end_id])) if end else []
    return [i for i in before if i is not None], [i for i in after if i is not None]


def text_pieces(tok, ids, text: str | None) -> list[str]:
    """The piece of each id: cut from `text` where the ids encode it (so preprocessing such as
    lowercasing shows), else the vocabulary's piece (special ids, or `text` None: model output)."""
    cut = iter(tok.pieces(text)) if text is not None else iter(())
    specials = special_ids(tok)
    return [tok.id_to_piece(i) if i in specials or text is None else next(cut) for i in ids]


def preprocessing_note(tok, side: str) -> tuple[str, bool]:
    """What the `side` tokenizer does to the text before splitting it, as a sentence, from its
    own settings, and whether it changes the text."""
    why = ""
    if tok.kind == "word":  # Keras TextVectorization's standardize
        steps = ["lowercases ASCII letters"] if tok.lowercase else []
        steps += ["removes punctuation"] if STANDARDIZATIONS[tok.standardize][1] else []
        why = f"Keras TextVectorization's standardize={tok.standardize!r}"
    elif tok.kind == "wordpiece":
        steps = ["case-folds the text and strips accents"] if tok.lowercase else []
        why = "tensorflow_text BertTokenizer's lower_case=True"
    else:
        steps = [s for s, on in (("lowercases the text", tok.lowercase),
                                 ("turns every digit into 0", tok.digits_to_zero)) if on]
        if tok.kind == "bpemb":
            why = "as BPEmb's pretrained models expect"
        elif tok.kind == "trained":
            why = ("BPEmb's preprocessing, an option recorded when this SentencePiece model was "
                   "trained on the model's training data")
    if not steps:
        return f"The {side} tokenizer splits text as typed (no lowercasing, digits kept).", False
    return (f"Before splitting, the {side} tokenizer {' and '.join(steps)}"
            + (f" ({why})." if why else "."), True)


def framing(tok, start: bool, end: bool) -> str:
    """The ids a side's text becomes, from the tokenizer's own specials: "`<s>` + pieces +
    `</s>`" (start, end: whether that side is framed by the tokenizer's start and end ids)."""
    before, after = frame_ids(tok, start, end)
    return " + ".join([f"`{tok.id_to_piece(i)}`" for i in before] + ["pieces"]
                      + [f"`{tok.id_to_piece(i)}`" for i in after])


def source_framing(tok, config) -> str:
    """What the encoder reads, as a sentence from the config's source framing and the source
    tokenizer's own specials: "The encoder reads pieces + `</s>` (no start token on this
    side)." (Marian), "... pieces, padded with `[PAD]` to 10 ids (no start or end token ...)"."""
    text = framing(tok, config.source_start, config.source_end)
    if config.pad_source_to:
        text += f", padded with `{tok.id_to_piece(tok.pad_id)}` to {config.pad_source_to} ids"
    missing = [name for name, on in (("start", config.source_start), ("end", config.source_end))
               if not on]
    if missing:
        text += f" (no {' or '.join(missing)} token on this side)"
    return f"The encoder reads {text}."


def decoder_start(tok, config) -> str:
    """The token the decoder starts from, as the model's config has it: "`<s>` (id 2)", or
    "`<pad>` (id 58100, the padding token: this model has no start token of its own)"."""
    text = f"`{tok.id_to_piece(config.start_id)}` (id {config.start_id}"
    if config.start_id == config.pad_id:
        return text + ", the padding token: this model has no start token of its own)"
    return text + ")"


def same_vocabulary(a, b) -> bool:
    """Whether two checkpoints read and write the same pieces: each side's tokenizer the same
    (its spec and its model bytes), so one text gives both the same tokens."""
    return all(x.spec() == y.spec() and x.model_bytes == y.model_bytes
               for x, y in ((a.source_tokenizer, b.source_tokenizer),
                            (a.target_tokenizer, b.target_tokenizer)))


def sinks_sentence(tokenizers, counted=SINK_TOKENS) -> str:
    """What the attention-sink statistic counts for this model, from its tokenizers' own
    special pieces (start, end, pad, language codes: special_ids): the statistic counts the
    pieces named `counted` (transformer.analysis.head_stats.SINK_TOKENS); the model's others
    are said not to be counted."""
    own = list(dict.fromkeys(tok.id_to_piece(i) for tok in tokenizers for i in special_ids(tok)))
    hit = [p for p in own if p in counted]
    missed = [p for p in own if p not in counted]
    sentence = "**Attention sinks**: the weight on "
    if hit:
        sentence += f"this model's special tokens {_listed(hit)}"
        if missed:
            sentence += (f"; its {_listed(missed)} {'is' if len(missed) == 1 else 'are'} not "
                         f"counted (the statistic counts {_listed(counted)} by name)")
        return sentence + "."
    return (sentence + f"{_listed(counted)}, which this model does not use: its special tokens "
            f"{_listed(missed) if missed else '(none)'} are not counted, so the statistic is 0.")


def _listed(pieces) -> str:
    """`a`, `b` and `c` (an empty piece, a word-level vocabulary's padding: "the empty piece")."""
    quoted = [f"`{p}`" if p else "the empty piece" for p in pieces]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def special_pieces(*tokenizers) -> tuple[str, ...]:
    """The special pieces to hide: transformer.analysis.flow' usual ones and each tokenizer's own
    pad, unk, start and end pieces (a word-level vocabulary names them "[START]", ...)."""
    found = list(SPECIAL_TOKENS)
    for tok in tokenizers:
        for i in (tok.unk_id, *special_ids(tok)):
            if i is not None and tok.id_to_piece(i) not in found:
                found.append(tok.id_to_piece(i))
    return tuple(found)


def shown(tok, pieces) -> list[str]:
    """A side's pieces as the pages show them (transformer.tokenizers.display.shown_pieces): a
    byte-level BPE's decoded ("Ġworld" as "▁world", "Ã©" as "é"), its special pieces and every
    other tokenizer's pieces as they are."""
    return shown_pieces(tok, pieces, keep=special_pieces(tok) if is_byte_level(tok) else ())


def shown_maps(maps: dict, ckpt) -> dict:
    """OpenedModel.attention's maps (of `ckpt`) with their token lists (source_tokens,
    target_tokens, output_tokens) as the pages show them (shown), each by its side's tokenizer.
    The arrays are the same objects; an export of the maps (NPZ) keeps the vocabulary's pieces."""
    tokenizers = {"source": ckpt.source_tokenizer, "target": ckpt.target_tokenizer}
    return {**maps, **{key: shown(tokenizers[side], maps[key])
                       for key, side in MAP_TOKENS.items() if key in maps}}


def simplify(weights, query_tokens, key_tokens, sides: tuple[str, str], tokenizers: dict, *,
             hide_special: bool, merge_words: bool, renormalise: bool = True):
    """transformer.analysis.flow.simplify_tokens with each side's tokenizer: words follow that
    tokenizer's word boundaries, and a side without any (its pieces make one word) keeps its
    pieces. sides: ("source" | "target") of the queries and of the keys; tokenizers: {side:
    tokenizer}; the tokens are the tokenizers' own pieces (not shown's). Returns (weights, query
    labels, key labels, note): the labels as the pages show them (shown: words merged from a
    byte-level BPE's pieces are decoded whole, "日本" from its bytes); note is a sentence naming
    the sides kept as pieces, or None."""
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
    rows, cols = shown(tokenizers[sides[0]], rows), shown(tokenizers[sides[1]], cols)
    note = None
    if kept:
        note = (f"The {' and the '.join(kept)} side{'s have' if len(kept) > 1 else ' has'} no "
                "word boundaries (all its pieces make one word, as the tokenizer marks word "
                "starts), so its pieces are kept.")
    return weights, rows, cols, note
