"""The source and target tokenizers of a Hugging Face model folder, from its files.

:func:`tokenizer_pair` is what an importer calls with the folder's files (name -> bytes): it
reads tokenizer_config.json (hf_files.read_tokenizer_config) for the family, the languages and
the options, and builds one tokenizer per side: huggingface.HFTokenizer for a family of
hf_families.FAMILIES, the tokenizer kind of its own for the others (SEPARATE_KINDS). Arguments given override
what tokenizer_config.json says; the target language defaults to the source's (as transformers'
tokenizers do when no tgt_lang is set). The files are read, checked and probed once, for the
source: the target is the source's other_side (the same pieces, its own side and language).
"""

from __future__ import annotations

from transformer.tokenizers.base import Tokenizer, TokenizerError
from transformer.tokenizers.hf_families import FAMILIES
from transformer.tokenizers.hf_files import read_tokenizer_config
from transformer.tokenizers.huggingface import HFTokenizer
from transformer.tokenizers.m2m100_pieces import M2M100Tokenizer

__all__ = ["tokenizer_pair", "TOKENIZER_FILES"]

# CLASS_FAMILY's families that are a tokenizer kind of their own: family (its kind) -> class
SEPARATE_KINDS = {kind.kind: kind for kind in (M2M100Tokenizer,)}

# the files of a folder the tokenizers read (the others are the importer's)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer_config.json")


def tokenizer_pair(files: dict, family: str | None = None, src_lang: str | None = None,
                   tgt_lang: str | None = None) -> tuple[Tokenizer, Tokenizer]:
    """(source tokenizer, target tokenizer) of the folder's ``files`` (see the module)."""
    if not isinstance(files, dict):
        raise TokenizerError(f"files: expected a dict of file name -> bytes, got "
                             f"{type(files).__name__}")
    config = (read_tokenizer_config(files["tokenizer_config.json"])
              if "tokenizer_config.json" in files else
              read_tokenizer_config(b"{}"))
    family = family or config["family"]
    if family is None:
        titles = [f.title for f in FAMILIES.values()] + [k.title for k in SEPARATE_KINDS.values()]
        raise TokenizerError("tokenizer_config.json: its tokenizer_class names no tokenizer that "
                             f"opens here ({', '.join(titles)})")
    src = src_lang or config["src_lang"]
    tgt = tgt_lang or config["tgt_lang"] or src
    given = {k: v for k, v in files.items() if k in TOKENIZER_FILES[:-1]}
    if family in SEPARATE_KINDS:
        kind = SEPARATE_KINDS[family]
        options = {k: config[k] for k in kind.CONFIG_OPTIONS if config[k] is not None}
        source = kind.from_files(given, "source", src, **options)
        return source, source.other_side("target", tgt)  # one reading of the files for both
    if family not in FAMILIES:
        raise TokenizerError(f"family: must be one of {tuple(FAMILIES) + tuple(SEPARATE_KINDS)}, "
                             f"got {str(family)[:40]!r}")
    options = dict(config["options"])
    if config["extra_ids"] is not None:
        options["extra_ids"] = config["extra_ids"]
    source = HFTokenizer.from_files(family, given, "source", src, **options)
    return source, source.other_side("target", tgt)  # one reading of the files for both
