"""Importers of other programs' models: one module per family or recipe (keras_seq2seq: the Keras
example and the seed notebook; tf_tutorial; marian), and the registry here that tells which one
a set of files is.

Everything is read as data (transformer.checkpoint.readers) and mapped onto our names; the result
is an opened Checkpoint, checked as a file of ours is (transformer.checkpoint.format)."""

from __future__ import annotations

from pathlib import Path

from transformer.checkpoint.format import CheckpointError
from transformer.checkpoint.readers import read_weights
from transformer.importers import keras_seq2seq, marian, tf_tutorial
from transformer.importers.keras_seq2seq import recipe_of_weights
from transformer.importers.marian import convert_marian
from transformer.importers.recipe import Recipe
from transformer.inference import session
from transformer.inference.session import Checkpoint

# ------------------------------------------------------------------ which recipe
RECIPES: dict[str, Recipe] = {module.RECIPE.name: module.RECIPE
                              for module in (keras_seq2seq, tf_tutorial, marian)}
WEIGHT_SUFFIXES = (".h5", ".hdf5", ".keras", ".index")  # a Keras weights file, a TF checkpoint
MARIAN_FILES = marian.REQUIRED_FILES  # config.json, model.safetensors, source/target.spm, vocab.json


def is_weights_file(name: str) -> bool:
    """Whether a file name is a weights file of the Keras/TF recipes (.weights.h5, .h5, .keras, a
    TF checkpoint's .index or .data-NNNNN-of-NNNNN)."""
    name = Path(str(name)).name.lower()
    return name.endswith(WEIGHT_SUFFIXES) or ".data-" in name and "-of-" in name


def detect_recipe(files) -> str | None:
    """The recipe a set of files is for ({file name: bytes}): "marian" when a Marian model's
    files are among them (config.json, model.safetensors, *.spm, vocab.json); "keras-seq2seq" or
    "tf-tutorial" when a weights file's names show it; None when nothing tells (or the weights
    cannot be read: converting them says why)."""
    names = {Path(str(n)).name for n in files}
    if names & set(MARIAN_FILES):
        return "marian"
    weights = {n: v for n, v in files.items() if is_weights_file(n)}
    if not weights:
        return None
    try:
        arrays = read_weights(weights)
    except CheckpointError:
        return None
    return recipe_of_weights(arrays)[0]


def load_checkpoint(source) -> Checkpoint:
    """Open a model: our checkpoint file (a path, bytes or a binary file object), or a Hugging
    Face model given as its folder, a .zip of it or its files ({file name: bytes}) - a Marian
    (opus-mt) model opens as it is, mapped on load, with no conversion step. The Keras recipes'
    files need answers the files cannot give (python -m transformer.convert, or the app's import
    form). Raises CheckpointError."""
    if isinstance(source, (dict, list, tuple)):
        names = source if isinstance(source, dict) else {getattr(f, "name", ""): f for f in source}
        if not set(map(_base_name, names)) & set(MARIAN_FILES):
            raise CheckpointError("These files are no model that opens as it is: give a Marian "
                                  f"model's files ({', '.join(MARIAN_FILES)}), or convert Keras "
                                  "files with python -m transformer.convert.")
        return convert_marian(source)
    if isinstance(source, (str, Path)) and marian.is_folder(Path(source)):
        return convert_marian(source)  # its sentence names the files a Marian folder lacks
    if isinstance(source, (str, Path)) and Path(source).suffix.lower() == ".zip":
        return convert_marian(source)
    return session.load_checkpoint(source)


def _base_name(name) -> str:
    return Path(str(name).replace("\\", "/")).name
