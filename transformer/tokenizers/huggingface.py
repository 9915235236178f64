"""Tokenizers of the Hugging Face families BART, mBART (cc25), mBART-50, T5 (v1.0, v1.1,
flan-T5, mT5), Pegasus and NLLB-200: the ``tokenizers`` library running the family's pipeline
(hf_backend) over the vocabulary of the files the family ships (hf_files checks them first).

Files, per family (``tokenizer.json`` is used whenever it is given, as transformers does):

===========  =========================================  ===================================
family       files                                      kind ``huggingface``, ``family``
===========  =========================================  ===================================
BART         tokenizer.json, or vocab.json + merges.txt  ``bart``
mBART cc25   tokenizer.json, or sentencepiece.bpe.model  ``mbart``
mBART-50     tokenizer.json, or sentencepiece.bpe.model  ``mbart50``
T5 / mT5     tokenizer.json, or spiece.model             ``t5``
Pegasus      tokenizer.json, or spiece.model             ``pegasus``
NLLB-200     tokenizer.json                              ``nllb``
===========  =========================================  ===================================

(M2M100 is :class:`transformer.tokenizers.m2m100_pieces.M2M100Tokenizer`.)

One object per side ("source" or "target") and language. ``encode(text, add_start=True,
add_end=True)`` gives exactly the ids transformers' tokenizer gives, ``tok(text)["input_ids"]`` on
the source side and ``tok(text_target=text)["input_ids"]`` on the target side (LAYOUTS):

==========  ===============================  ===============================
family      source                           target
==========  ===============================  ===============================
bart        ``<s>`` X ``</s>``                ``<s>`` X ``</s>``
mbart       X ``</s>`` src_lang               X ``</s>`` tgt_lang
mbart50     src_lang X ``</s>``               tgt_lang X ``</s>``
t5          X ``</s>``                        X ``</s>``
pegasus     X ``</s>``                        X ``</s>``
nllb        src_lang X ``</s>``               tgt_lang X ``</s>``
nllb legacy X ``</s>`` src_lang               X ``</s>`` tgt_lang
==========  ===============================  ===============================

``add_start`` adds the side's prefix (nothing where there is none), ``add_end`` its suffix;
``start_id`` is the prefix's id (None where there is none) and ``end_id`` the ``</s>`` id.
``prefix_ids``/``suffix_ids`` are the two lists; ``bos_id``, ``eos_id``, ``pad_id``, ``unk_id``
the named specials' ids (``bos_id`` None for T5 and Pegasus, which have no ``<s>``);
``language_ids`` maps every language code of the vocabulary to its id (the forced first
token of mBART-50, NLLB and M2M100 translations is ``language_ids[tgt_lang]``). The id a
decoder starts from is the model config's business (BART, mBART-50, NLLB: ``</s>``; T5, Pegasus:
``<pad>``; mBART cc25: the target language code), not this tokenizer's.

A model's embedding may have more rows than the tokenizer has entries (Google's T5 and flan-T5:
32,128 rows for 32,100 pieces and extra ids; NLLB-200: 256,206 for 256,204): the importer gives
the model's size (``padded_vocab_size``, or :meth:`HFTokenizer.pad_vocabulary`). ``vocab_size``
is then the model's rows and ``own_vocab_size`` the tokenizer's entries (transformers'
``len(tokenizer)``); the ids between are named ``[unused N]`` (base.UNUSED_NAME), no text gives
them, and ``decode`` skips them, as transformers' decode does (it has no piece for them). The spec
records the padded size (``padded_vocab_size``, left out when there is no padding).

``decode`` gives ``tok.decode(ids, skip_special_tokens=True)`` (it stops at the first
``</s>``, drops every special token; ``clean_up_tokenization_spaces`` as transformers applies it,
never to a BPE model). ``model_bytes`` is the built pipeline's tokenizer.json; loading it checks
it as any other tokenizer.json. The importers read tokenizer_config.json with
hf_files.read_tokenizer_config (family, languages, OPTIONS, T5's extra_ids).

Where this differs from transformers 5.23 (tests/tokenizers/test_hf_live.py checks the rest):

* ``decode`` stops at the first ``</s>`` (as every tokenizer here does); transformers decodes on;
* NLLB is built from its tokenizer.json only (NllbTokenizer can also make a BPE of
  sentencepiece.bpe.model, with merges of its own generation; hub models ship tokenizer.json);
  it gets every NLLB-200 language code it lacks as a special token, as NllbTokenizer does without
  a tokenizer_config.json (with one that lists other extra tokens, transformers adds fewer: the
  ids of the codes the file holds are the same, the vocabulary size may differ);
* a tokenizer.json whose ``truncation`` or ``padding`` is set is refused (transformers would
  truncate or pad with it); a ``Precompiled`` normalizer with null rules is read as no rules
  (transformers fails on it).
"""

from __future__ import annotations

import copy
import functools
import operator

from transformer.core.text import BYTE_LEVEL_START, WORD_START, clean_text
from transformer.tokenizers.base import (
    UNUSED_NAME,
    Tokenizer,
    TokenizerError,
    check_matches,
    check_padded_vocab_size,
    check_spec_ids,
    check_text,
    gc_paused,
    is_int,
    library_panics,
)
from transformer.tokenizers.hf_backend import FAMILIES, build_backend, vocab_from_sentencepiece
from transformer.tokenizers.hf_families import TokenizerFamily
from transformer.tokenizers.hf_files import (
    TokenizerJson,
    read_merges_txt,
    read_sentencepiece,
    read_tokenizer_json,
)
from transformer.tokenizers.spm_vocab import parse_vocab_json

__all__ = ["HFTokenizer", "SIDES", "OPTIONS"]

SIDES = ("source", "target")
# options (all bool, default False): tokenizer_config.json's values, read by the importer
OPTIONS = ("add_prefix_space", "legacy_behaviour", "clean_up_tokenization_spaces")


def _clean_up(text: str) -> str:
    """transformers' clean_up_tokenization."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m").replace(" 's", "'s")
            .replace(" 've", "'ve").replace(" 're", "'re"))


# Special tokens a model may lack a row for (a model fine-tuned from one that had it: bart-large-cnn
# keeps BART's tokenizer with <mask> but has one row fewer): cut by pad_vocabulary.
CUTTABLE = frozenset({"<mask>"})


class HFTokenizer(Tokenizer):
    """One side of a BART / mBART / mBART-50 / T5 / Pegasus / NLLB tokenizer (see the module)."""

    kind = "huggingface"
    prefix_start = True

    @property
    def word_mark(self) -> tuple[str, str]:
        """A byte-level BPE marks a space before a piece with "Ġ" (BYTE_LEVEL_START), the
        SentencePiece families with "▁"."""
        byte_level = FAMILIES[self.family].pre_tokenizer == "byte_level"
        return (BYTE_LEVEL_START if byte_level else WORD_START), "start"

    def described(self) -> tuple[str, str]:
        fam = FAMILIES[self.family]
        if fam.pre_tokenizer == "byte_level":
            return ("Byte-level BPE", f"{fam.title}'s tokenizer: byte-level BPE (tokenizer.json, "
                                      f"or {' + '.join(fam.files)}) as transformers runs it. Its "
                                      "pieces are bytes written as characters (a space as Ġ, é "
                                      "as Ã©); the pages show the text they stand for, ▁ for a "
                                      "space before a piece as SentencePiece writes it, and "
                                      "<0xE6> for a byte of a character split across pieces.")
        return ("SentencePiece", f"The {self.family} tokenizer of transformers: a SentencePiece "
                                 "vocabulary, run by the tokenizers library.")
    SPEC_FIELDS = ("kind", "family", "side", "language", "options", "pad_id", "unk_id",
                   "start_id", "end_id", "vocab_size")
    OPTIONAL_SPEC_FIELDS = ("padded_vocab_size",)  # given when the model has unused rows

    def __init__(self, family: str, data: TokenizerJson, side: str, language: str | None = None,
                 *, name: str = "tokenizer.json", options: dict | None = None,
                 padded_vocab_size: int | None = None):
        if family not in FAMILIES:
            raise TokenizerError(f"family: must be one of {tuple(FAMILIES)}, got {family!r}")
        self.family = family
        self.options = _check_options(options)
        with gc_paused():  # the vocabulary's hundreds of thousands of strings (base.gc_paused)
            self._build(data, side, language, name)
        if padded_vocab_size is not None:
            self.pad_vocabulary(padded_vocab_size)
        self.probe(f"the {side} {family} tokenizer ({name})")

    def _build(self, data: TokenizerJson, side: str, language: str | None, name: str) -> None:
        """The pipeline (hf_backend), its pieces by id (checked 0 .. n-1, one each), the named
        specials' ids, the language codes' and the side's layout."""
        family = self.family
        fam = FAMILIES[family]
        with library_panics(name):
            self.backend, vocab = build_backend(fam, data, name=name,
                                                add_prefix_space=self.options["add_prefix_space"])
        # the library's get_vocab(with_added_tokens=True): its model's vocabulary, each added
        # token's text at its id over it
        added = self.backend.get_added_tokens_decoder()
        vocab.update((token.content, i) for i, token in added.items())
        self.vocab_size = self.backend.get_vocab_size(with_added_tokens=True)
        self.own_vocab_size = self.vocab_size  # the tokenizer's entries (len(tokenizer))
        if len(vocab) != self.vocab_size or (vocab and max(vocab.values()) != self.vocab_size - 1):
            raise TokenizerError(f"{name}: the ids of its pieces are not 0 .. n-1, one each")
        pieces, ids = list(vocab), list(vocab.values())
        if ids == list(range(len(ids))):  # in id order already, as a file lists them
            self.pieces_by_id = pieces
        else:
            self.pieces_by_id = [""] * self.vocab_size
            for piece, i in vocab.items():
                self.pieces_by_id[i] = piece
        special_ids = {}
        for role, text in fam.specials:
            special_ids[role] = vocab.get(text)
        for role in ("eos", "pad", "unk"):
            if special_ids.get(role) is None:
                text = dict(fam.specials)[role]
                raise TokenizerError(f"{name}: has no {text} (a {family} vocabulary has one)")
        self.bos_id = special_ids.get("bos")
        self.eos_id, self.pad_id, self.unk_id = (special_ids["eos"], special_ids["pad"],
                                                 special_ids["unk"])
        self.language_ids = {c: vocab[c] for c in fam.language_codes if c in vocab}
        self._take_side(side, language)
        self._special_ids = {t.content for t in added.values() if t.special}

    @functools.cached_property
    def model_bytes(self) -> bytes:
        """The built pipeline's tokenizer.json, made when first asked for (a checkpoint's save;
        NLLB-200's took 0.13 s of every open)."""
        return self.backend.to_str().encode("utf-8")

    def _take_side(self, side: str, language: str | None) -> None:
        """This tokenizer's side and language (checked against the vocabulary's codes), and the
        ids it puts around a text."""
        if side not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {side!r}")
        fam = FAMILIES[self.family]
        if fam.language_codes:
            language = fam.default_source_language if language is None else language
            if not isinstance(language, str) or language not in self.language_ids:
                known = ", ".join(list(self.language_ids)[:8]) or "none"
                raise TokenizerError(f"language: {str(language)[:40]!r} is not a language code "
                                     f"of this {self.family} vocabulary (it has: {known})")
        elif language is not None:
            raise TokenizerError(f"language: a {self.family} tokenizer has no language codes, "
                                 f"got {str(language)[:40]!r}")
        self.side, self.language = side, language
        self.prefix_ids, self.suffix_ids = self._layout()
        self.start_id = self.prefix_ids[0] if self.prefix_ids else None
        self.end_id = self.eos_id
        self._cache: tuple[str, object] | None = None

    def other_side(self, side: str, language: str | None = None) -> "HFTokenizer":
        """The tokenizer of the pair's other side: this one's pipeline and vocabulary (the
        same files make both sides; NLLB's 256,206 pieces took 1 s a side to build and probe),
        with its own side, language and layout, whose texts are probed (every id's piece and
        decoding are the shared pipeline's, probed once)."""
        other = copy.copy(self)
        other._take_side(side, language)
        other.probe(f"the {side} {self.family} tokenizer", every_id=False)
        return other

    def pad_vocabulary(self, size: int) -> None:
        """Serve a model whose embedding has ``size`` rows, at least the tokenizer's entries:
        ids from ``own_vocab_size`` to ``size`` are unused (named UNUSED_NAME, never encoded,
        skipped by decode); ``vocab_size`` becomes ``size``. Fewer rows than entries only when
        every id from ``size`` on is a special token in CUTTABLE (bart-large-cnn's <mask>, id
        50,264, past its 50,264 rows): those ids are cut, and a text that names one gets <unk>
        (transformers would index past the embedding). A TokenizerError for any other size
        below the entries, or one above limits.MAX_VOCAB."""
        if is_int(size) and 0 < size < self.own_vocab_size:
            masks = {i for i, t in self.backend.get_added_tokens_decoder().items()
                     if t.special and t.content in CUTTABLE}
            beyond = [i for i in range(size, self.own_vocab_size) if i not in masks]
            if not beyond and self.unk_id < size and max(self.pad_id, self.eos_id) < size:
                self.pieces_by_id = self.pieces_by_id[:size]
                self.vocab_size = size
                return
        size = check_padded_vocab_size(size, self.own_vocab_size)
        self.pieces_by_id = self.pieces_by_id[:self.own_vocab_size] + [
            UNUSED_NAME.format(i) for i in range(self.own_vocab_size, size)]
        self.vocab_size = size

    def _layout(self) -> tuple[list[int], list[int]]:
        """(prefix ids, suffix ids): the family's roles around a text (its legacy layout with
        the legacy_behaviour option, where it has one)."""
        fam: TokenizerFamily = FAMILIES[self.family]
        prefix, suffix = fam.prefix, fam.suffix
        if self.options["legacy_behaviour"] and fam.legacy_suffix is not None:
            prefix, suffix = fam.legacy_prefix, fam.legacy_suffix
        ids = {"bos": self.bos_id, "eos": self.eos_id,
               "lang": self.language_ids.get(self.language) if self.language is not None else None}
        if "bos" in prefix + suffix and self.bos_id is None:
            raise TokenizerError(f"a {fam.title} vocabulary must hold <s>")
        return [ids[role] for role in prefix], [ids[role] for role in suffix]

    # ----------------------------------------------------------------- building

    @classmethod
    def from_files(cls, family: str, files: dict, side: str, language: str | None = None,
                   *, padded_vocab_size: int | None = None, **options) -> "HFTokenizer":
        """The tokenizer of ``family`` from its files (name -> bytes, the names of its record's
        files, or "tokenizer.json", which wins when given). ``options``: OPTIONS (T5's ``extra_ids``
        is taken from the vocabulary of a tokenizer.json, 100 for a spiece.model);
        ``padded_vocab_size``: the model's rows, when it has more than the tokenizer's entries
        (pad_vocabulary)."""
        if family not in FAMILIES:
            raise TokenizerError(f"family: must be one of {tuple(FAMILIES)}, got {family!r}")
        if not isinstance(files, dict):
            raise TokenizerError(f"files: expected a dict of file name -> bytes, got "
                                 f"{type(files).__name__}")
        extra_ids = options.pop("extra_ids", 100)
        if not isinstance(extra_ids, int) or isinstance(extra_ids, bool) or not 0 <= extra_ids <= 1000:
            raise TokenizerError(f"extra_ids: expected an int in [0, 1000], got {extra_ids!r}")
        # One pause of the garbage collector for reading the files, building the pipeline and
        # probing it (base.gc_paused), the file's values freed inside it: the collection after
        # it finds little new to walk.
        with gc_paused():
            data, name = cls._file_data(family, files, extra_ids)
            tok = cls(family, data, side, language, name=name, options=options,
                      padded_vocab_size=padded_vocab_size)
            del data
        return tok

    @staticmethod
    def _file_data(family: str, files: dict, extra_ids: int) -> tuple[TokenizerJson, str]:
        """(the vocabulary as data, the files' name for sentences) of a family's files."""
        if "tokenizer.json" in files:
            data = read_tokenizer_json(files["tokenizer.json"], "tokenizer.json")
            name = "tokenizer.json"
        else:
            needed = FAMILIES[family].files
            if not needed or any(f not in files for f in needed):
                want = " + ".join(needed) if needed else "nothing else"
                raise TokenizerError(f"a {family} tokenizer needs tokenizer.json (or {want}); "
                                     f"given {sorted(map(str, files))[:6]}")
            if FAMILIES[family].model_type == "BPE":  # vocab.json + merges.txt
                vocab = parse_vocab_json(files["vocab.json"], "vocab.json")
                merges = read_merges_txt(files["merges.txt"], vocab, "merges.txt")
                data = TokenizerJson("BPE", vocab, merges=merges)
                name = "vocab.json + merges.txt"
            else:
                name = needed[0]
                spm = read_sentencepiece(files[name], name)
                vocab = vocab_from_sentencepiece(FAMILIES[family], spm, extra_ids=extra_ids,
                                                 name=name)
                data = TokenizerJson("Unigram", vocab, charsmap=spm.charsmap or None,
                                     added_tokens=_spm_added_tokens(FAMILIES[family], spm,
                                                                    vocab))
        return data, name

    # ----------------------------------------------------------------- text -> ids

    def _encoding(self, text: str):
        text = check_text(text)
        cached = self._cache  # read once: another thread may replace it (the tuple is whole)
        if cached is not None and cached[0] == text:
            return cached[1]
        with library_panics(f"tokenizing a text with the {self.side} tokenizer"):
            enc = self.backend.encode(text, add_special_tokens=False)
        self._cache = (text, enc)
        return enc

    def _preprocess(self, text: str) -> str:
        """The text itself (the pipeline normalizes inside; spans index into the text)."""
        return check_text(text)

    def _pieces(self, text: str) -> list[str]:
        return list(self._encoding(text).tokens)

    def _piece_ids(self, text: str) -> list[int]:
        ids = list(self._encoding(text).ids)
        if self.vocab_size < self.own_vocab_size:  # a cut special token (pad_vocabulary): <unk>
            ids = [i if i < self.vocab_size else self.unk_id for i in ids]
        return ids

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        n = len(text)
        return [(min(max(b, 0), n), min(max(e, b, 0), n))
                for b, e in self._encoding(text).offsets]

    def encode(self, text: str, *, add_start: bool = False, add_end: bool = False,
               max_len: int | None = None) -> list[int]:
        """Ids of the text; ``add_start``/``add_end`` add the side's prefix/suffix (LAYOUTS in
        the module's docstring; both: transformers' ids); ``max_len`` truncates the pieces,
        keeping them."""
        prefix = self.prefix_ids if add_start else []
        suffix = self.suffix_ids if add_end else []
        ids = self._piece_ids(self._clean(text))
        if max_len is not None:
            max_len = operator.index(max_len)
            if max_len < len(prefix) + len(suffix):
                raise ValueError(f"max_len={max_len} leaves no room for the special ids")
            ids = ids[:max_len - len(prefix) - len(suffix)]
        return list(prefix) + ids + list(suffix)

    @staticmethod
    def _clean(text: str) -> str:
        return clean_text(text)[0]

    # ----------------------------------------------------------------- ids -> text

    def id_to_piece(self, i: int) -> str:
        return self.pieces_by_id[self._check_id(i)]

    def ids_to_pieces(self, ids) -> list[str]:
        pieces = self.pieces_by_id
        return [pieces[i] for i in self._checked_ids(ids)]

    def _decode_kept(self, ids: list[int]) -> str:
        """The backend's decode of the ids the tokenizer has (an unused id is skipped, as
        transformers' decode skips an id it has no piece for)."""
        own = self.own_vocab_size
        if ids and max(ids) >= own:
            ids = [i for i in ids if i < own]
        with library_panics(f"decoding ids with the {self.side} tokenizer"):
            text = self.backend.decode(ids, skip_special_tokens=True)
        if self.options["clean_up_tokenization_spaces"] and FAMILIES[self.family].model_type != "BPE":
            text = _clean_up(text)
        return text

    # ----------------------------------------------------------------- spec / loading

    def spec(self) -> dict:
        """What a checkpoint stores with model_bytes: ``vocab_size`` is the tokenizer's own
        entries, ``padded_vocab_size`` (only when larger) the model's rows."""
        spec = {"kind": self.kind, "family": self.family, "side": self.side,
                "language": self.language, "options": dict(self.options),
                "pad_id": self.pad_id, "unk_id": self.unk_id, "start_id": self.start_id,
                "end_id": self.end_id, "vocab_size": self.own_vocab_size}
        if self.vocab_size != self.own_vocab_size:  # more rows, or cut specials
            spec["padded_vocab_size"] = self.vocab_size
        return spec

    @classmethod
    def _from_valid_spec(cls, spec: dict, model_bytes: bytes) -> "HFTokenizer":
        if spec["family"] not in FAMILIES:
            raise TokenizerError(f"family: must be one of {tuple(FAMILIES)}, got "
                                 f"{str(spec['family'])[:40]!r}")
        if spec["side"] not in SIDES:
            raise TokenizerError(f"side: must be one of {SIDES}, got {str(spec['side'])[:40]!r}")
        if spec["language"] is not None and not isinstance(spec["language"], str):
            raise TokenizerError(f"language: expected a string or null, got "
                                 f"{type(spec['language']).__name__}")
        names = ("pad_id", "unk_id", "start_id", "end_id")
        check_spec_ids(spec, names, optional=("start_id",))
        padded = spec.get("padded_vocab_size")
        if padded is not None and not (is_int(padded) and padded < spec["vocab_size"]):
            check_padded_vocab_size(padded, spec["vocab_size"])  # fewer: pad_vocabulary checks
        with gc_paused():  # as from_files
            data = read_tokenizer_json(model_bytes, "model_bytes (tokenizer.json)")
            tok = cls(spec["family"], data, spec["side"], spec["language"],
                      name="model_bytes (tokenizer.json)", options=spec["options"],
                      padded_vocab_size=padded)
            del data
        check_matches(spec, tok.spec(), ("vocab_size",) + names, "tokenizer.json")
        return tok


def _spm_added_tokens(family: TokenizerFamily, spm, vocab: list) -> list[dict]:
    """The SentencePiece model's control (type 3: special) and user-defined (type 4: not special)
    pieces as added tokens, at their ids in the laid-out vocabulary, as transformers' extractor
    passes them on (where the record says so: PegasusTokenizer drops them; a piece the layout
    dropped is left out)."""
    if not family.sentencepiece_added_tokens:
        return []
    index = {piece: i for i, (piece, _) in enumerate(vocab)}
    return [{"id": index[p], "content": p, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": t == 3}
            for p, _, t in spm.pieces if t in (3, 4) and p in index and p]


def _check_options(options) -> dict:
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise TokenizerError(f"options: expected a dict, got {type(options).__name__}")
    unknown = sorted(set(map(str, options)) - set(OPTIONS))
    if unknown:
        raise TokenizerError(f"options: unknown option(s) {', '.join(map(repr, unknown[:5]))} "
                             f"(known: {', '.join(OPTIONS)})")
    out = {}
    for key in OPTIONS:
        value = options.get(key, False)
        if not isinstance(value, bool):
            raise TokenizerError(f"options: {key} must be true or false, got {value!r}"[:200])
        out[key] = value
    return out

