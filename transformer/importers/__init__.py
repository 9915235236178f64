"""Importers of other programs' models: one module per recipe (keras_seq2seq: the Keras example
and the seed notebook; tf_tutorial), the Hugging Face families in their own subpackage (hf: marian,
bart, mbart, t5, pegasus and m2m100, each one Family record), and the registry here that tells
which one a set of files is.

A Hugging Face family is a Family (transformer.importers.hf.family): its recipe, model_types
(config.json's model_type values it reads), folder_files (the names it reads), convert(source),
and refused_model_types (model_type values it takes only to refuse them in an error message of its own:
m2m100's nllb-moe; never named among the families read here); HF_FAMILIES maps model_type to
it, and a folder, .zip or set of files opens through the family its config.json names.

Everything is read as data (transformer.checkpoint.readers) and mapped onto our names; the result
is an OpenedModel, checked as a file of ours is (transformer.checkpoint.format)."""

from __future__ import annotations

from pathlib import Path

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import read_weights
from transformer.core import limits
from transformer.importers import keras_seq2seq, tf_tutorial
from transformer.importers.hf import BY_MODEL_TYPE, FAMILIES, hub
from transformer.importers.hf.family import REQUIRED_FILES, SHARED_FILES, Family
from transformer.importers.hf.folder import FolderSpec, gather, is_folder, parse_json
from transformer.importers.keras_seq2seq import recipe_of_weights
from transformer.importers.recipe import Recipe
from transformer.inference import session
from transformer.inference.session import OpenedModel

# ------------------------------------------------------------------ which recipe
HF_FAMILIES: dict[str, Family] = BY_MODEL_TYPE  # config.json's model_type -> its family
RECIPES: dict[str, Recipe] = {
    **{module.RECIPE.name: module.RECIPE for module in (keras_seq2seq, tf_tutorial)},
    **{family.recipe.name: family.recipe for family in FAMILIES}}
WEIGHT_SUFFIXES = (".h5", ".hdf5", ".keras", ".index")  # a Keras weights file, a TF checkpoint
# Any of these among given files makes them a Hugging Face model's (config.json, model.safetensors,
# and the files a family without config.json would still be told by: Marian's .spm and vocab.json)
HF_MARKERS = frozenset(name for family in FAMILIES for name in family.required_files)
HF_FILES = tuple(dict.fromkeys(name for family in FAMILIES for name in family.folder_files))
# The files that tell a family without its config.json (Marian's source.spm and target.spm)
_OWN_FILES = {family: frozenset(family.required_files) - set(REQUIRED_FILES) - SHARED_FILES
              for family in FAMILIES}
_CONFIG_ONLY = FolderSpec({"config.json": limits.MAX_JSON_BYTES},
                          tuple(sorted(set().union(*_OWN_FILES.values()))),
                          what="the Hugging Face model")


def _family_by_files(names) -> Family | None:
    """The family a model's files tell without config.json: one whose required files besides
    config.json and the weights (Marian's source.spm, target.spm, vocab.json) are among them."""
    names = {Path(str(n)).name for n in names}
    return next((family for family, own in _OWN_FILES.items() if own & names), None)


def hf_family(source) -> Family:
    """The family of a Hugging Face model (folder, .zip or {file name: bytes}) by its
    config.json's model_type; Marian when there is no config.json (its own error then names
    what is missing). CheckpointError when config.json names a family not read here."""
    raw, label = gather(source, _CONFIG_ONLY)
    if not raw.get("config.json"):
        if (family := _family_by_files(raw)) is not None:
            return family  # its error names what its model lacks
        raise CheckpointError(f"{label[0].upper() + label[1:]} holds no config.json; a Hugging "
                              "Face model holds config.json, model.safetensors and its "
                              "tokenizer's files (download them from the model's page).")
    model_type = parse_json(raw["config.json"], "config.json", label).get("model_type")
    if isinstance(model_type, str) and model_type in HF_FAMILIES:
        return HF_FAMILIES[model_type]
    known = ", ".join(sorted(model_type for model_type, family in HF_FAMILIES.items()
                             if model_type not in family.refused_model_types))
    raise CheckpointError(
        f"config.json in {label} describes model_type {str(model_type)[:40]!r}; the Hugging "
        f"Face families read here are {known}.")


def is_weights_file(name: str) -> bool:
    """Whether a file name is a weights file of the Keras/TF recipes (.weights.h5, .h5, .keras, a
    TF checkpoint's .index or .data-NNNNN-of-NNNNN)."""
    name = Path(str(name)).name.lower()
    return name.endswith(WEIGHT_SUFFIXES) or ".data-" in name and "-of-" in name


def detect_recipe(files) -> str | None:
    """The recipe a set of files is for ({file name: bytes}): a Hugging Face family's when its
    files are among them (config.json, model.safetensors, or Marian's *.spm, vocab.json: the
    family config.json names, or the one its files tell); "keras-seq2seq" or
    "tf-tutorial" when a weights file's names show it; None when nothing tells (or the weights
    cannot be read: converting them says why)."""
    names = {Path(str(n)).name for n in files}
    if names & HF_MARKERS:
        try:
            return hf_family(files).recipe.name
        except CheckpointError:  # converting them says what the files lack
            family = _family_by_files(names)
            return family.recipe.name if family is not None else None
    weights = {n: v for n, v in files.items() if is_weights_file(n)}
    if not weights:
        return None
    try:
        arrays = read_weights(weights)
    except CheckpointError:
        return None
    return recipe_of_weights(arrays)[0]


def load_checkpoint(source, *, budgets: limits.Budgets | None = None,
                    progress=None) -> OpenedModel:
    """Open a model. Two kinds of source (core.limits.Budgets):

    - what a person running this code names: a folder path, a Hugging Face name ("org/name",
      or "name" as the hub allows: resolved by transformer.importers.hf.hub, the local cache first,
      else a download of only the files the family reads), a .zip path or our checkpoint file's
      path. Budgets from the machine (limits.named_budgets: the memory available, the model's
      own lengths);
    - files given as bytes ({file name: bytes}, uploaded file objects, a .zip's bytes): a
      stranger's upload, held to every upload limit (limits.UPLOAD).

    budgets overrides either. A Hugging Face model opens as it is, mapped on load, with no
    conversion step. The Keras recipes' files need answers the files cannot give (python -m
    transformer.convert, or the app's import form). progress(fraction, text): a download's
    progress. Raises CheckpointError."""
    if isinstance(source, (dict, list, tuple)):
        names = source if isinstance(source, dict) else {getattr(f, "name", ""): f for f in source}
        given = set(map(_base_name, names))
        one_zip = len(given) == 1 and next(iter(given)).lower().endswith(".zip")
        if not (given & HF_MARKERS or one_zip):
            raise CheckpointError("These files are no model that opens as it is: give a Hugging "
                                  "Face model's files (config.json, model.safetensors and its "
                                  "tokenizer's), or convert Keras files with python -m "
                                  "transformer.convert.")
        return hf_family(source).convert(source, budgets=budgets or limits.UPLOAD)
    if not isinstance(source, (str, Path)):
        return session.load_checkpoint(source)  # bytes or a file object: our checkpoint file
    budgets = budgets or limits.named_budgets()
    path = Path(source).expanduser()
    if is_folder(path):
        return hf_family(path).convert(path, budgets=budgets)  # its error names what it lacks
    if path.suffix.lower() == ".zip":
        return hf_family(path).convert(path, budgets=budgets)
    if not _exists(path) and path.suffix.lower() != ".ckpt":  # a hub name, or its error
        folder = hub.resolve(str(source), progress=progress)
        return hf_family(folder).convert(folder, budgets=budgets)
    return session.load_checkpoint(source)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _base_name(name) -> str:
    return Path(str(name).replace("\\", "/")).name
