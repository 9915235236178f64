"""Models uploaded as the files other programs wrote: what the files are, which recipe they are
for, and their conversion into our checkpoint, all in memory (nothing is written anywhere).

The sidebar's uploader takes a .ckpt (explorer.models loads it), or these:

    Keras seq2seq example   a weights file (.weights.h5, .keras, or a TF checkpoint's .index and
    (or the from-scratch    .data-00000-of-00001: ModelCheckpoint's folder may come whole) and two
    notebook)               vocabulary files (.txt)
    TF tutorial             the same files
    a Hugging Face model    the files its family reads (transformer.importers.hf.FAMILIES, by
                            config.json's model_type): Marian (opus-mt) config.json,
                            model.safetensors, source.spm, target.spm, vocab.json; BART
                            config.json, model.safetensors, tokenizer.json or vocab.json and
                            merges.txt; ...

either as several files at once or as one .zip holding them. The recipe is read from the files
(transformer.importers.detect_recipe); what they cannot tell is asked in a short form (Choices).
A Hugging Face family's recipe asks nothing (asks=False): its FOLDER_FILES are read, and the
model opens as it is, mapped on load.
No Streamlit here: explorer.models runs this in the sidebar.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from transformer.checkpoint import archive
from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import read_weights
from transformer.core import limits
from transformer.importers import HF_FILES, HF_MARKERS, RECIPES, hf_family, is_weights_file
from transformer.importers.hf import weight_files
from transformer.importers.hf.family import family_files
from transformer.importers.keras_seq2seq import FORM_LABELS, KERAS_FORMS, recipe_of_weights

RECIPE_LABELS = {name: recipe.label for name, recipe in RECIPES.items()}
WEIGHT_RECIPES = tuple(name for name, recipe in RECIPES.items() if recipe.asks)  # weights + vocab
VOCABULARY_SUFFIXES = ("", ".txt", ".vocab")  # a vocabulary file: one token per line
# Stems of other files: documents, and the text file "checkpoint" that TensorFlow writes beside a
# checkpoint (ModelCheckpoint's folder holds it with .index and .data-00000-of-00001).
NOT_VOCABULARIES = {"readme", "license", "licence", "notice", "copying", "checkpoint"}
# A Hugging Face model's files: any of these names among the uploaded files makes them one (the
# names each family requires; the registry's load_checkpoint opens them), and the family its
# config.json names reads its FOLDER_FILES of them (HF_FILES: every family's).
# Tokenizer files only some families' folders hold: another family's, seen beside a model's
FAMILY_TOKENIZER_FILES = frozenset(family_files())
MAX_ZIP_MEMBERS = 256
# Words in a vocabulary file's name that tell its side (the Keras example's eng/spa, the
# tutorial's pt/en); anything else keeps the order of the names, and the user may swap.
SOURCE_WORDS = {"source", "src", "input", "inputs", "inp", "encoder", "eng", "pt"}
TARGET_WORDS = {"target", "tgt", "output", "outputs", "decoder", "spa", "en", "fra", "fr"}


@dataclass
class Upload:
    """The uploaded files after unpacking a .zip, and what they were found to be."""
    files: dict[str, bytes]  # file name -> bytes: only the files the recipe reads
    label: str  # how sentences name them: "the files a, b and c" or "the archive 'x.zip'"
    recipe: str | None  # detected; None when the weight names show neither recipe
    form: str | None = None  # a form of transformer.importers.keras_seq2seq.KERAS_FORMS (keras-seq2seq)
    weights: list[str] = field(default_factory=list)  # the weights file(s)
    vocabularies: tuple[str, ...] = ()  # (source, target) as guessed from the names
    ignored: list[str] = field(default_factory=list)  # files no recipe reads
    digest: str = ""  # sha256 over the sorted (name, sha256 of bytes) of `files`
    archive_name: str | None = None  # the .zip's name when the files came in one

    @property
    def handwritten(self) -> bool:
        """A keras-seq2seq form with the hand-written attention (q_linear, ...)."""
        return self.form in KERAS_FORMS and KERAS_FORMS[self.form][1] == "handwritten"

    @property
    def needs_heads(self) -> bool:
        """The weights do not tell the number of heads (the hand-written attention), or the
        recipe is unknown."""
        return self.handwritten or self.recipe is None

    @property
    def asks(self) -> bool:
        """Whether the form has anything to ask (a Hugging Face model's files tell everything)."""
        return not opens_as_is(self.recipe)


def opens_as_is(recipe: str | None) -> bool:
    """Whether a recipe's files tell everything (a Hugging Face family, asks=False): no form,
    no conversion, the model opens from its own files, mapped on load."""
    return recipe in RECIPES and not RECIPES[recipe].asks


@dataclass(frozen=True)
class Choices:
    """What the form adds to the files."""
    recipe: str
    num_heads: int | None = None
    source_vocab: str | None = None
    target_vocab: str | None = None


def read_upload(named: dict[str, bytes]) -> Upload:
    """What the files are: {file name: bytes} as uploaded (one .zip, or several files; never a
    .ckpt, which explorer.models loads itself). Raises CheckpointErrors."""
    if not named:
        raise CheckpointError("No file was uploaded.")
    zips = [n for n in named if n.lower().endswith(".zip")]
    archive_name = None
    if zips:
        if len(named) > 1:
            raise CheckpointError(
                f"Give either one .zip or the model's files, not both ({zips[0]!r} came with "
                f"{_join(sorted(n for n in named if n != zips[0]))}).")
        archive_name = zips[0]
        named = unzip(named[archive_name], f"the archive {archive_name!r}")
    label = (f"the archive {archive_name!r}" if archive_name else
             f"the file{'s' * (len(named) != 1)} {_join(sorted(named))}")
    names = {PurePosixPath(n).name for n in named}
    if names & HF_MARKERS:
        family = hf_family(named)  # config.json's model_type; CheckpointError names an unknown one
        files = {n: v for n, v in named.items() if PurePosixPath(n).name in family.folder_files
                 or weight_files.is_weight_file(PurePosixPath(n).name)}
        unread = weight_files.unread(PurePosixPath(n).name for n in files)  # another form's
        files = {n: v for n, v in files.items() if PurePosixPath(n).name not in unread}
        if archive_name is None and files:  # name what is read, not what came beside it
            label = f"the file{'s' * (len(files) != 1)} {_join(sorted(files))}"
        # Another family's tokenizer files go along too, unread but seen: where the family's own
        # are missing, the importer's refusal names them (a Marian folder whose config.json
        # says "bart": issue 37's fuzzer found them dropped here, and the refusal silent).
        foreign = {n: v for n, v in named.items() if n not in files
                   and PurePosixPath(n).name in FAMILY_TOKENIZER_FILES}
        return _finish(Upload({**files, **foreign}, label, family.recipe.name,
                              archive_name=archive_name,
                              ignored=sorted(set(named) - set(files))))
    weights = sorted(n for n in named if is_weights_file(n))
    vocabularies = [n for n in sorted(named) if n not in weights and _is_vocabulary(n)]
    ignored = sorted(set(named) - set(weights) - set(vocabularies))
    if not weights:
        which = (f"{label[0].upper()}{label[1:]} is not a model" if archive_name is None
                 and len(named) == 1 else f"None of {label} is a model")  # one file: "is not"
        raise CheckpointError(
            f"{which}: give a .ckpt; or a weights file (.weights.h5, .keras, "
            "or a TF checkpoint's .index and .data-00000-of-00001) with its two vocabulary "
            "files; or a Hugging Face model's files (config.json, model.safetensors and its "
            "tokenizer's, as a Marian or BART model's folder holds them; or one .zip of them).")
    if len(vocabularies) != 2:
        found = f": {_join(vocabularies)}" if vocabularies else ""
        raise CheckpointError(
            f"The weights {_join(weights)} need two vocabulary files (.txt, one token per line), "
            f"the source's and the target's; {label.removeprefix('the ')} "
            f"{'hold' if archive_name is None else 'holds'} {len(vocabularies)}{found}.")
    arrays = read_weights({n: named[n] for n in weights})  # CheckpointError names the file
    recipe, form = recipe_of_weights(arrays)
    files = {n: named[n] for n in weights + vocabularies}
    return _finish(Upload(files, label, recipe, form, weights, vocabulary_roles(vocabularies),
                          ignored, archive_name=archive_name))


def _finish(upload: Upload) -> Upload:
    digest = hashlib.sha256()
    for name in sorted(upload.files):
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(upload.files[name]).digest())
    upload.digest = digest.hexdigest()
    return upload


def _suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower()


def _is_vocabulary(name: str) -> bool:
    path = PurePosixPath(name)
    return (path.suffix.lower() in VOCABULARY_SUFFIXES and not path.name.startswith(".")
            and path.stem.lower() not in NOT_VOCABULARIES)


def vocabulary_roles(names) -> tuple[str, str]:
    """(source, target) among two vocabulary file names, by the words in them ("source", "src",
    "eng", "pt" / "target", "tgt", "spa", "en"); otherwise in the order of the names."""
    first, second = sorted(names)

    def side(name: str) -> int:  # +1 source, -1 target, 0 cannot tell
        words = set("".join(c if c.isalnum() else " " for c in Path(name).stem.lower()).split())
        return (1 if words & SOURCE_WORDS else 0) - (1 if words & TARGET_WORDS else 0)

    if side(first) < side(second):
        return second, first
    return first, second


def unzip(data: bytes, where: str) -> dict[str, bytes]:
    """{file name: bytes} of a .zip's files that a recipe may read (folders, macOS's extras and
    files of other kinds skipped), each within the limits a checkpoint's members have."""
    try:
        entries = archive.read_directory(data, where, MAX_ZIP_MEMBERS, limits.MAX_DIRECTORY_BYTES)
    except archive.ArchiveError as err:
        raise CheckpointError(str(err)) from None
    wanted = []
    for entry in entries:
        name = PurePosixPath(entry.name).name
        if entry.name.endswith("/") or name.startswith(".") or "__MACOSX/" in entry.name:
            continue
        if name in HF_FILES or is_weights_file(name) or _is_vocabulary(name):
            wanted.append((name, entry))
    if any(name in HF_MARKERS for name, _ in wanted):  # a Hugging Face folder: only its files
        wanted = [(name, entry) for name, entry in wanted if name in HF_FILES]
    files, total = {}, 0
    for name, entry in wanted:
        if name in files:
            raise CheckpointError(f"{where[0].upper() + where[1:]} holds two files named "
                                  f"{name!r}; give one model per archive.")
        total += entry.size
        if total > limits.MAX_TOTAL_BYTES or archive.unpacks_too_far(
                entry.size, entry.compressed_size, limits.MAX_MEMBER_BYTES):
            raise CheckpointError(
                f"{name} in {where} unpacks to {entry.size / 2**20:.1f} MB from "
                f"{entry.compressed_size / 2**20:.1f} MB (at most "
                f"{limits.MAX_MEMBER_BYTES / 2**20:.0f} MB a file, packed at most "
                f"{limits.MAX_COMPRESSION_RATIO} to 1): refused.")
        try:
            files[name] = bytes(archive.read_member(data, entry, where))
        except archive.ArchiveError as err:
            raise CheckpointError(str(err)) from None
    if not files:
        raise CheckpointError(f"{where[0].upper() + where[1:]} holds no model file (a weights "
                              "file and vocabularies, or a Hugging Face model's files).")
    return files


def import_key(upload: Upload, choices: Choices) -> str:
    """The cache key of a conversion: the files' digest plus the form's choices."""
    blob = json.dumps([upload.digest, choices.recipe, choices.num_heads, choices.source_vocab,
                       choices.target_vocab])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def command(upload: Upload, choices: Choices) -> str:
    """The command line that converts the same files the same way (a Hugging Face model's:
    the CLI's line for its folder, transformer.importers.cli.hf_argv)."""
    if opens_as_is(choices.recipe):
        from transformer.importers.cli import hf_argv

        folder = Path(upload.archive_name).stem if upload.archive_name else "MODEL_DIR"
        return shlex.join(hf_argv(choices.recipe, folder, f"{folder.lower()}.ckpt"))
    weights = next((n for n in upload.weights if n.endswith(".index")), upload.weights[0])
    out = Path(weights).name.split(".")[0] or "model"
    argv = ["python", "-m", "transformer.convert", choices.recipe, "--weights", weights,
            "--source-vocab", choices.source_vocab, "--target-vocab", choices.target_vocab]
    if choices.num_heads is not None:
        argv += ["--num-heads", str(choices.num_heads)]
    return shlex.join(argv + ["--out", f"{out}.ckpt"])


def check_choices(upload: Upload, choices: Choices) -> None:
    """A CheckpointError when the form's answers cannot work."""
    if choices.recipe not in RECIPE_LABELS:
        raise CheckpointError(f"Unknown recipe {choices.recipe!r}; pick one of "
                              f"{_join(RECIPE_LABELS.values())}.")
    if (opens_as_is(choices.recipe) or opens_as_is(upload.recipe)) \
            and choices.recipe != upload.recipe:
        said = (f"is a {RECIPE_LABELS[upload.recipe]} model." if opens_as_is(upload.recipe)
                else f"is no {RECIPE_LABELS[choices.recipe]} model.")
        raise CheckpointError(f"{upload.label[0].upper() + upload.label[1:]} {said}")
    if opens_as_is(choices.recipe):
        return
    if {choices.source_vocab, choices.target_vocab} != set(upload.vocabularies):
        raise CheckpointError(f"Pick which of {_join(upload.vocabularies)} is the source "
                              "vocabulary and which the target's.")
    if upload.handwritten and choices.recipe == "keras-seq2seq" and (
            choices.num_heads is None or choices.num_heads < 1):
        raise CheckpointError(
            f"The weights {_join(upload.weights)} are {FORM_LABELS[upload.form]}, whose "
            "hand-written attention (q_linear, k_linear, v_linear, concat_linear) does not tell "
            "how many heads it has: give the number of heads the model was built with.")


def convert(upload: Upload, choices: Choices) -> bytes:
    """The checkpoint file (bytes) of the uploaded model, built in memory; loads exactly as an
    uploaded .ckpt does (a Hugging Face model: the export of what its family maps, through the
    registry). Raises CheckpointErrors that name the file and the weight."""
    from transformer.checkpoint.format import checkpoint_bytes
    from transformer.importers.keras_seq2seq import convert_keras_seq2seq
    from transformer.importers.tf_tutorial import convert_tf_tutorial

    check_choices(upload, choices)
    line = command(upload, choices)
    if opens_as_is(choices.recipe):
        ckpt = hf_family(upload.files).convert(upload.files, command=line)
        return checkpoint_bytes(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer,
                                ckpt.metadata)
    convert_with = convert_keras_seq2seq if choices.recipe == "keras-seq2seq" \
        else convert_tf_tutorial
    ckpt = convert_with({n: upload.files[n] for n in upload.weights},
                        {choices.source_vocab: upload.files[choices.source_vocab]},
                        {choices.target_vocab: upload.files[choices.target_vocab]},
                        choices.num_heads, command=line)
    return checkpoint_bytes(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer,
                            ckpt.metadata)


def _join(names) -> str:
    names = [str(n) for n in names]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]
