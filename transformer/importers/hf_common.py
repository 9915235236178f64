"""The steps every Hugging Face encoder-decoder family here shares (BART, mBART, T5, Pegasus,
M2M100 / NLLB), so that a family's module holds only what makes it differ: its FolderSpec, its
config.json allow-list and mapping, and its weight names.

    read_folder       the folder's files (hf_folder.gather), a sentence naming every missing one,
                      config.json parsed, the files' names, sizes and SHA-256 for the provenance;
                      the weights found, not yet read (ModelFiles.read_weights reads them once
                      the mapped config passed every check: hf_weights)
    tokenizer_family  which tokenizer tokenizer_config.json names (its tokenizer_class)
    tokenizers        the (source, target) pair of the folder's tokenizer files
    check_tokenizers  the tokenizer and config.json agree on the vocabulary and the special ids;
                      an embedding with more rows than the tokenizer has entries (Google's T5:
                      32,128 for 32,100; NLLB-200: 256,206 for 256,204) pads the tokenizers to it
    build_config      the TransformerConfig, or a sentence saying why it cannot be built
    checkpoint_data   the CheckpointData of a mapped model, with its provenance

A family's importer reads the folder (read_folder), maps config.json, reads the weights
(ModelFiles.read_weights: model.safetensors, shards or tf_model.h5, any stored precision),
builds the tokenizers and checks them against the config, builds the config, maps the weights
and hands everything to checkpoint_data, which checks the tokenizers against the model once
more (checkpoint.format.check_consistent).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from transformer.checkpoint.format import (
    CheckpointData,
    CheckpointError,
    check_config,
    check_consistent,
)
from transformer.checkpoint.metadata import clean_metadata
from transformer.core import limits
from transformer.importers.hf_folder import FolderSpec, gather, parse_json
from transformer.importers.hf_weights import (
    SAFETENSORS,
    WEIGHT_FILE_BYTES,
    StoredWeights,
    files_digest,
    found,
    read_weights,
    settled,
)
from transformer.model.config import TransformerConfig

__all__ = ["REQUIRED_FILES", "WEIGHT_FILE_BYTES", "ModelFiles", "build_config",
           "check_tokenizers", "checkpoint_data", "read_folder", "tokenizer_family", "tokenizers"]

REQUIRED_FILES = ("config.json", "model.safetensors")  # every family's, besides its tokenizer
# (model.safetensors, or the shards its index names, or tf_model.h5: hf_weights, which holds
# WEIGHT_FILE_BYTES, their caps as given files)


@dataclass
class ModelFiles:
    """A Hugging Face model's files, read and checked (the config not yet mapped)."""
    label: str
    hf_config: dict
    weights: dict[str, np.ndarray]  # by Hugging Face's names, in their stored precision
    tokenizer_files: dict[str, bytes]
    generation_config: bytes | None  # generation_config.json, when given
    files: list[dict]
    stored: StoredWeights | None = None  # the weights found, read by read_weights

    @property
    def budgets(self) -> limits.Budgets:
        return self.stored.budgets if self.stored is not None else limits.UPLOAD

    def read_weights(self, c: dict) -> None:
        """The weights into self.weights, once config.json's mapped fields `c` passed every
        config check for who gave the model (format.check_config: layers, vocabulary,
        positions, heads, and for a named model the memory the load will take): nothing of a
        weight file is read before."""
        check_config(build_config(c, self.label), self.budgets)
        self.weights, entries = read_weights(self.stored)
        self.files = sorted(self.files + entries, key=lambda entry: entry["name"])


def read_folder(source, spec: FolderSpec, tokenizer_files: tuple[str, ...],
                tokenizer_sets: tuple[tuple[str, ...], ...], what: str,
                budgets: limits.Budgets = limits.UPLOAD) -> ModelFiles:
    """A model's files from a folder path, a .zip (path or bytes) or {file name: bytes}:
    config.json, its weights (found, not read: ModelFiles.read_weights), and one of
    tokenizer_sets (each a set of file names that makes a tokenizer); a sentence names every
    missing or malformed file. what: "mBART". budgets: who gave it (limits.UPLOAD: a
    stranger's files; limits.named_budgets(): a model the person running the server named)."""
    raw, label = gather(source, spec)
    stored = found(raw, label, what, budgets)
    missing = [n for n in REQUIRED_FILES
               if n not in raw and not (n == SAFETENSORS and stored.files)]
    if not any(all(raw.get(n) for n in names_) for names_ in tokenizer_sets):
        missing.append(" (or ".join(" and ".join(s) for s in tokenizer_sets)
                       + ")" * (len(tokenizer_sets) - 1))
    if missing:
        raise CheckpointError(f"The {what} model in {label} is missing {', '.join(missing)}; "
                              f"download them from the model's page.{_other_family(raw, tokenizer_sets)}")
    hf_config = parse_json(raw["config.json"], "config.json", label)
    return ModelFiles(label, hf_config, {}, {n: raw[n] for n in tokenizer_files if raw.get(n)},
                      raw.get("generation_config.json") or None,
                      [{"name": name, "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest()}
                       for name, data in sorted(raw.items())
                       if name in spec.file_bytes and name not in stored.files],
                      stored)


# Tokenizer files only some families' folders hold, by the families that hold them.
FAMILY_TOKENIZER_FILES = {"source.spm": "Marian", "target.spm": "Marian",
                          "spiece.model": "T5 or Pegasus",
                          "sentencepiece.bpe.model": "mBART, M2M100 or NLLB",
                          "merges.txt": "BART"}


def _other_family(raw: dict, tokenizer_sets) -> str:
    """A sentence when the files hold tokenizer files of another family than the one
    config.json's model_type names (a Marian folder whose config.json says "bart"), else ""."""
    others = [n for n in FAMILY_TOKENIZER_FILES
              if n in raw and not any(n in names for names in tokenizer_sets)]
    if not others:
        return ""
    return (f" The files hold {' and '.join(others)}, which a "
            f"{FAMILY_TOKENIZER_FILES[others[0]]} model has: is config.json's model_type the "
            f"model's?")


def tokenizers(files: dict[str, bytes], family: str, label: str):
    """(source, target) tokenizers of the folder's tokenizer files (transformer.tokenizers.
    hf_pair: tokenizer_config.json's languages and options), as family reads them."""
    from transformer.tokenizers.base import TokenizerError
    from transformer.tokenizers.hf_pair import tokenizer_pair

    try:
        return tokenizer_pair(files, family)
    except TokenizerError as err:
        raise CheckpointError(f"A tokenizer file in {label} is invalid: {err}.") from None


def tokenizer_family(files: dict[str, bytes], allowed: tuple[str, ...], default: str,
                     label: str, what: str) -> str:
    """The tokenizer family tokenizer_config.json names (its tokenizer_class), default when it
    names none or is not given; a sentence when it names another family's tokenizer."""
    from transformer.tokenizers.base import TokenizerError
    from transformer.tokenizers.hf_files import read_tokenizer_config

    if "tokenizer_config.json" not in files:
        return default
    try:
        family = read_tokenizer_config(files["tokenizer_config.json"])["family"]
    except TokenizerError as err:
        raise CheckpointError(f"A tokenizer file in {label} is invalid: {err}.") from None
    if family is None:
        return default
    if family not in allowed:
        raise CheckpointError(f"tokenizer_config.json in {label} names a {family} tokenizer; "
                              f"{what} reads {' or '.join(allowed)} tokenizers.")
    return family


def check_tokenizers(source_tok, target_tok, config: dict, label: str) -> None:
    """The tokenizers and config.json agree on the vocabulary and the special ids. An embedding
    with more rows than the tokenizer has entries (vocab_size above them: Google's T5 pads
    32,100 entries to 32,128 rows, NLLB-200 256,204 to 256,206) pads both tokenizers to it
    (pad_vocabulary: the rows between are unused ids); fewer rows is a sentence."""
    from transformer.tokenizers.base import TokenizerError

    vocab = config["src_vocab_size"]
    if source_tok.vocab_size > vocab:  # only added special tokens past the rows may be cut
        try:
            for tok in (source_tok, target_tok):
                tok.pad_vocabulary(vocab)
        except TokenizerError:
            raise CheckpointError(
                f"The tokenizer in {label} has {source_tok.vocab_size} pieces, but config.json "
                f"gives vocab_size {vocab}; they must be the same model's.") from None
    if vocab > source_tok.vocab_size:
        try:
            for tok in (source_tok, target_tok):
                tok.pad_vocabulary(vocab)
        except TokenizerError as err:
            raise CheckpointError(f"The tokenizer in {label} cannot serve config.json's "
                                  f"vocab_size {vocab}: {err}.") from None
    for what, tok_id, config_name, config_id in (
            ("<pad>", source_tok.pad_id, "pad_token_id", config["pad_id"]),
            ("</s>", source_tok.end_id, "eos_token_id", config["end_id"])):
        if tok_id != config_id:
            raise CheckpointError(
                f"The tokenizer in {label} gives {what} the id {tok_id}, but config.json "
                f"gives {config_name} {config_id}; they must be the same model's.")


def build_config(c: dict, label: str) -> TransformerConfig:
    """The TransformerConfig of the mapped fields, or a sentence saying why it cannot be built."""
    try:
        return TransformerConfig(**c)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"The model that config.json in {label} describes cannot be "
                              f"built here: {err}.") from None


def checkpoint_data(files: ModelFiles, config: TransformerConfig, weights: dict, source_tok,
                    target_tok, *, recipe: str, architecture: str, default_name: str,
                    name: str | None, command: str | None) -> CheckpointData:
    """The CheckpointData of a mapped model, with its provenance."""
    check_consistent(config, source_tok, target_tok)
    hf_name = files.hf_config.get("_name_or_path")
    hf_name = hf_name.strip()[:80] if isinstance(hf_name, str) and hf_name.strip() else ""
    metadata = {
        "name": name or hf_name.rsplit("/", 1)[-1] or default_name,
        "recipe": recipe,
        "source": {
            "recipe": recipe, "format": f"Hugging Face {architecture} (config.json, "
                                        "model.safetensors, tokenizer files)",
            "model": hf_name, "from": files.label,
            "transformers_version": str(files.hf_config.get("transformers_version", ""))[:40],
            "command": command or "",
        },
    }
    return with_provenance(CheckpointData(config, weights, source_tok, target_tok,
                                          generation_config=files.generation_config,
                                          budgets=files.budgets), files, metadata)


def with_provenance(data: CheckpointData, files, metadata: dict) -> CheckpointData:
    """data with its metadata (`metadata`, the files read added to its "source") and content
    hash, once the weight files' hashes are known: they are computed in a thread while the load
    goes on (hf_weights), so this waits for them only when data.settle() is called
    (Checkpoint.open calls it after the model is built: a 2 GB file's hash took 0.8 s more than
    the reading before it). Until then data.metadata holds everything but the files. files: a
    ModelFiles (or marian.MarianFiles), whose entries may hold the hashes' futures."""
    data.metadata = metadata

    def finish() -> None:
        files.files = settled(files.files)
        data.metadata, data.metadata_warnings = clean_metadata(
            {**metadata, "source": {**metadata["source"], "files": files.files}})
        data.content_hash = files_digest(files.files)

    data.pending = finish
    return data


