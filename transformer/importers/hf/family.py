"""A Hugging Face family as one record (Family), and the steps every family's model goes through
(Family.read, .data, .convert), so that a family's module holds only what makes it differ: its
tokenizer files, its config.json allow-list and mapping, and its weight table.

    Family.read       the folder's files (folder.gather) and an error naming every missing one
                      (read_folder), config.json mapped (Family.config), the tokenizer family
                      chosen (tokenizer_config.json's tokenizer_class), then the weights read
                      once the mapped config passed every check (ModelFiles.read_weights:
                      model.safetensors, shards or tf_model.h5, any stored precision)
    Family.data       the tokenizers built and checked against config.json (check_tokenizers:
                      an embedding with more rows than the tokenizer has entries, Google's T5
                      32,128 for 32,100 or NLLB-200 256,206 for 256,204, pads the tokenizers to
                      it), what config.json cannot tell settled (Family.settle), the config
                      built, the weights mapped (Family.weights), the provenance
                      (checkpoint_data, which checks the tokenizers against the model once
                      more: checkpoint.format.check_consistent)
    Family.convert    the OpenedModel (inference.session.OpenedModel.open)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np

from transformer.checkpoint.format import (
    CheckpointData,
    CheckpointError,
    check_config,
    check_consistent,
    data_bytes,
)
from transformer.checkpoint.metadata import clean_metadata
from transformer.core import limits
from transformer.importers.hf.folder import FolderSpec, gather, parse_json
from transformer.importers.hf.weight_files import (
    PICKLE_FILES,
    SAFETENSORS,
    WEIGHT_FILE_BYTES,
    StoredWeights,
    files_digest,
    found,
    read_weights,
    settled,
)
from transformer.importers.recipe import Recipe
from transformer.inference.session import OpenedModel
from transformer.model.config import TransformerConfig

__all__ = ["Family", "REQUIRED_FILES", "WEIGHT_FILE_BYTES", "ModelFiles", "build_config",
           "check_tokenizers", "checkpoint_data", "read_folder", "tokenizer_family", "tokenizers"]

REQUIRED_FILES = ("config.json", "model.safetensors")  # every family's, besides its tokenizer
# (model.safetensors, or the shards its index names, or tf_model.h5: weight_files, which holds
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
                budgets: limits.Budgets = limits.UPLOAD, refused: Mapping[str, str] | None = None
                ) -> ModelFiles:
    """A model's files from a folder path, a .zip (path or bytes) or {file name: bytes}:
    config.json, its weights (found, not read: ModelFiles.read_weights), and one of
    tokenizer_sets (each a set of file names that makes a tokenizer); an error names every
    missing or malformed file. what: "mBART". budgets: who gave it (limits.UPLOAD: a
    stranger's files; limits.named_budgets(): a model the person running the server named)."""
    raw, label = gather(source, spec)
    stored = found(raw, label, what, budgets)
    missing = [n for n in REQUIRED_FILES
               if n not in raw and not (n == SAFETENSORS and stored.files)]
    sets = " (or ".join(" and ".join(s) for s in tokenizer_sets) + ")" * (len(tokenizer_sets) - 1)
    if not any(all(raw.get(n) for n in names_) for names_ in tokenizer_sets):
        # one way to make the tokenizer: the files of it that are missing; several: the ways
        missing += ([n for n in tokenizer_sets[0] if not raw.get(n)] if len(tokenizer_sets) == 1
                    else [sets])
    if missing:
        raise CheckpointError(f"The {what} model in {label} is missing {_join(missing)}; a {what} "
                              f"model holds {', '.join(REQUIRED_FILES)} and {sets} (download "
                              f"them from the model's page).{_other_family(raw, tokenizer_sets)}")
    for name, why in (refused or {}).items():
        if name in raw:
            raise CheckpointError(f"The {what} model in {label} has a {name}: {why}.")
    hf_config = parse_json(raw["config.json"], "config.json", label)
    return ModelFiles(label, hf_config, {}, {n: raw[n] for n in tokenizer_files if raw.get(n)},
                      raw.get("generation_config.json") or None,
                      [{"name": name, "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest()}
                       for name, data in sorted(raw.items())
                       if name in spec.file_bytes and name not in stored.files],
                      stored)


DECLARED: list = []  # every Family made, as its module ran (the registry, hf.FAMILIES, is these)
SHARED_FILES = frozenset({"tokenizer.json", "vocab.json"})  # many families' tokenizers' files


def family_files() -> dict[str, list[str]]:
    """The tokenizer files only some families' folders hold (SHARED_FILES aside) -> those
    families, in words: what tells one family's files from another's."""
    holders: dict[str, list[str]] = {}
    for family in DECLARED:
        for name in dict.fromkeys(n for names in family.tokenizer_sets for n in names):
            if name not in SHARED_FILES:
                holders.setdefault(name, []).append(family.words)
    return holders


def _other_family(raw: dict, tokenizer_sets) -> str:
    """An error's last sentence when the files hold tokenizer files of another family than the
    one config.json's model_type names (a Marian folder whose config.json says "bart"), else
    ""."""
    mine = {n for names in tokenizer_sets for n in names}
    holders = family_files()
    others = [n for n in holders if n in raw and n not in mine]
    if not others:
        return ""
    words = holders[others[0]]
    words = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
    return (f" The files hold {' and '.join(others)}, which a {words} model has: is "
            f"config.json's model_type the model's?")


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
    names none or is not given; an error when it names another family's tokenizer."""
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


def check_tokenizers(source_tok, target_tok, config: dict, label: str,
                     names: tuple[str, ...] = ()) -> None:
    """The tokenizers and config.json agree on the vocabulary and the special ids. An embedding
    with more rows than the tokenizer has entries (vocab_size above them: Google's T5 pads
    32,100 entries to 32,128 rows, NLLB-200 256,204 to 256,206) pads both tokenizers to it
    (pad_vocabulary: the rows between are unused ids); fewer rows is an error."""
    from transformer.tokenizers.base import TokenizerError

    vocab = config["src_vocab_size"]
    if vocab != source_tok.vocab_size and not hasattr(source_tok, "pad_vocabulary"):
        made_of = f" ({_join(list(names))})" if names else ""
        raise CheckpointError(
            f"The tokenizer in {label}{made_of} has {source_tok.vocab_size} pieces, but "
            f"config.json gives vocab_size {vocab}; they must be the same model's.")
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
    """The TransformerConfig of the mapped fields, or an error saying why it cannot be built."""
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
        "name": name or short_name(hf_name) or short_name(files.label) or default_name,
        "recipe": recipe,
        "source": {
            "recipe": recipe, "format": f"Hugging Face {architecture} (config.json, "
                                        "model.safetensors, tokenizer files)",
            "model": hf_name, "from": files.label,
            "transformers_version": str(files.hf_config.get("transformers_version", ""))[:40],
            "command": command or "", **languages(files.tokenizer_files),
        },
    }
    return with_provenance(CheckpointData(config, weights, source_tok, target_tok,
                                          generation_config=files.generation_config,
                                          budgets=files.budgets), files, metadata)


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def short_name(text: str | None) -> str | None:
    """'Helsinki-NLP/opus-mt-en-fr' -> 'opus-mt-en-fr'; "the folder 'x'" -> 'x'; None for a
    label that names no file ("the given files")."""
    if not text:
        return None
    text = text.strip().strip("'\"")
    if text.startswith(("the folder ", "the archive ")):
        text = text.split(" ", 2)[2].strip("'\"")
        text = text[:-4] if text.lower().endswith(".zip") else text
    elif text.startswith("the "):
        return None
    return PurePosixPath(text.replace("\\", "/")).name[:80] or None


def languages(tokenizer_files: dict) -> dict:
    """The language names tokenizer_config.json gives as source_lang and target_lang (Marian's;
    description only: never refused)."""
    data = tokenizer_files.get("tokenizer_config.json")
    if not data:
        return {}
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: value[k][:40] for k in ("source_lang", "target_lang") if isinstance(value.get(k), str)}


def with_provenance(data: CheckpointData, files, metadata: dict) -> CheckpointData:
    """data with its metadata (`metadata`, the files read added to its "source") and content
    hash, once the weight files' hashes are known: they are computed in a thread while the load
    goes on (weight_files), so this waits for them only when data.settle() is called
    (OpenedModel.open calls it after the model is built: a 2 GB file's hash took 0.8 s more than
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




# ------------------------------------------------------------------ a family, as data
@dataclass(frozen=True, eq=False)  # one record per family: compared by identity
class Family:
    """One Hugging Face family: what its folder holds, how its config.json and weights map onto
    ours, and which tokenizers read it. The registry (transformer.importers.hf.FAMILIES) holds
    one per family; read, data and convert run the steps every family shares."""
    recipe: Recipe  # the app's and the metadata's name and words for it
    model_types: tuple[str, ...]  # config.json's model_type values routed here
    architecture: str  # transformers' class, for the provenance: "BartForConditionalGeneration"
    tokenizer_files: tuple[str, ...]  # the tokenizer's files read of a folder
    tokenizer_sets: tuple[tuple[str, ...], ...]  # each a set of those that makes a tokenizer
    tokenizer_families: tuple[str, ...]  # transformer.tokenizers' families it reads, default first
    config: Callable[[dict, str], dict]  # (config.json, label) -> TransformerConfig fields
    weights: Callable[[dict, dict, str], dict]  # (their weights, fields, label) -> ours
    what: str = ""  # in sentences ("M2M100 or NLLB"); recipe.label when ""
    refused_model_types: tuple[str, ...] = ()  # routed here only to be refused by name
    pick_tokenizer: Callable[[dict, str], str] | None = None  # (files, label) -> its family,
    # where the files decide it (M2M100's or NLLB's); tokenizer_config.json's class otherwise
    settle: Callable[[dict, "ModelFiles", object], None] | None = None  # (fields, files,
    # target tokenizer): the fields config.json cannot tell (mBART's start, T5's tied output)
    tokenizer_options: bool = True  # tokenizer_config.json's options read (T5's: not)
    model_names: Mapping[str, str] = field(default_factory=dict)  # tokenizer family -> the
    # name of a model whose config.json names none ("NLLB model"); "<label> model" otherwise
    make_tokenizers: Callable | None = None  # (files, tokenizer family, label) -> (source,
    # target), for a tokenizer kind of its own (Marian's); transformer.tokenizers.hf_pair else
    refused_files: Mapping[str, str] = field(default_factory=dict)  # a file whose presence
    # says the model is not one read here -> why (Marian's target_vocab.json)
    required_files: tuple[str, ...] = REQUIRED_FILES  # besides its tokenizer's: any one of them
    # among uploaded files makes them a Hugging Face model's
    position_offset: int = 0  # rows of its learned position table before position 0 (BART's
    # 2: transformers reads row position + 2), never read, left out on import

    def __post_init__(self) -> None:
        DECLARED.append(self)

    def __repr__(self) -> str:
        return f"Family({self.recipe.name!r})"

    @property
    def words(self) -> str:
        return self.what or self.recipe.label

    @property
    def folder(self) -> FolderSpec:
        """The files read of a folder, each with its cap; a pickle is named, never read."""
        return FolderSpec({
            "config.json": limits.MAX_JSON_BYTES,
            "generation_config.json": limits.MAX_JSON_BYTES,
            **WEIGHT_FILE_BYTES,
            **{name: limits.MAX_JSON_BYTES if name.endswith("_config.json")
               else limits.MAX_TOKENIZER_BYTES for name in self.tokenizer_files},
        }, PICKLE_FILES + tuple(self.refused_files), f"the {self.words} model")

    @property
    def folder_files(self) -> tuple[str, ...]:
        return tuple(self.folder.file_bytes)

    def read(self, source, budgets: limits.Budgets = limits.UPLOAD
             ) -> tuple[ModelFiles, dict, str]:
        """(the files, read and checked; config.json's mapped fields; the tokenizer family),
        the weights read last, once the config passed every check."""
        files = read_folder(source, self.folder, self.tokenizer_files, self.tokenizer_sets,
                            self.words, budgets=budgets, refused=self.refused_files)
        c = self.config(files.hf_config, files.label)
        if self.pick_tokenizer is not None:
            family = self.pick_tokenizer(files.tokenizer_files, files.label)
        elif self.make_tokenizers is not None:
            family = self.tokenizer_families[0]
        else:
            family = tokenizer_family(files.tokenizer_files, self.tokenizer_families,
                                      self.tokenizer_families[0], files.label, self.words)
        files.read_weights(c)
        return files, c, family

    def data(self, source, *, name: str | None = None, command: str | None = None,
             budgets: limits.Budgets = limits.UPLOAD) -> CheckpointData:
        """The model's files (folder path, .zip path or bytes, or {file name: bytes}) mapped
        onto our config, weights and tokenizers: what OpenedModel.open builds the model from.
        Nothing is built here, and no file of ours is written."""
        files, c, family = self.read(source, budgets)
        given = files.tokenizer_files if self.tokenizer_options else {
            n: data for n, data in files.tokenizer_files.items() if n != "tokenizer_config.json"}
        source_tok, target_tok = (self.make_tokenizers or tokenizers)(given, family, files.label)
        check_tokenizers(source_tok, target_tok, c, files.label,
                         tuple(n for n in given if n != "tokenizer_config.json"))
        if self.settle is not None:
            self.settle(c, files, target_tok)
        config = build_config(c, files.label)
        weights = self.weights(files.weights, c, files.label)
        files.weights = {}  # the mapped arrays are ours now; free the originals
        return checkpoint_data(files, config, weights, source_tok, target_tok,
                               recipe=self.recipe.name, architecture=self.architecture,
                               default_name=self.model_names.get(
                                   family, f"{self.recipe.label} model"),
                               name=name, command=command)

    def convert(self, source, *, name: str | None = None, command: str | None = None,
                budgets: limits.Budgets = limits.UPLOAD):
        """The model's files -> an OpenedModel: mapped on load, the weights copied once
        (into the model), checked as any checkpoint is (OpenedModel.open)."""
        data = self.data(source, name=name, command=command, budgets=budgets)
        return OpenedModel.open(data, f"the weights mapped from {data.metadata['source']['from']}")

    def checkpoint_bytes(self, source, *, name: str | None = None,
                         command: str | None = None) -> bytes:
        """The export: the model as our one-file checkpoint (bytes), written from the mapped
        weights as they are (no model is built; opening the file checks it as any other)."""
        return data_bytes(self.data(source, name=name, command=command))
