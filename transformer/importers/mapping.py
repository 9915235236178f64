"""The one place an importer takes another program's weights by name: each weight asked for is
there with the shape the model needs, or the refusal is an error naming it (the file, the
weight, what it is for, the shape expected and the one found); and once the mapping is done,
every weight the file holds was taken, or the first one left over is named.

Every importer (keras_common's tree walk for the Keras recipes and the TF tutorial, marian's
mapping of model.safetensors) goes through a WeightMap, so a file that lacks, adds or reshapes a
weight is refused the same way in every format, never with an AttributeError or a KeyError
from deep inside the mapping."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from transformer.checkpoint.format import CheckpointError
from transformer.core.text import quoted

__all__ = ["WeightMap", "shape_text"]


def shape_text(shape) -> str:
    """(16, 2, 16) as a sentence shows it; None for "any size" in an expected shape: (16, ?)."""
    parts = ["?" if n is None else str(n) for n in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def fits(found, expected) -> bool:
    """Whether a shape is the expected one (None in `expected`: any size in that place)."""
    return len(found) == len(expected) and all(e is None or f == e
                                               for f, e in zip(found, expected))


class WeightMap:
    """A file's weights {name: array}, taken one by one.

    where: the file in the sentences, at their start ("'model.weights.h5'", "model.safetensors
    in the folder 'opus-mt-en-fr'"). described_by: who expects the shapes ("the model expects",
    "config.json describes"). The arrays may be None (only the names are looked at, to tell
    which recipe a file is)."""

    def __init__(self, arrays: Mapping[str, np.ndarray | None], where: str,
                 described_by: str = "the model expects"):
        self.arrays = arrays
        self.where = where
        self.described_by = described_by
        self.taken: set[str] = set()

    def __contains__(self, name) -> bool:
        return name in self.arrays

    def peek(self, name: str):
        """The array (or None when the file lacks it), not counted as taken: for looking at a
        shape before deciding what a weight is."""
        return self.arrays.get(name)

    def take(self, name: str, shape=None, what: str | None = None) -> np.ndarray:
        """The weight `name`, checked to have `shape` (a tuple; None in it: any size there; no
        shape: any), and counted as used. Raises a CheckpointError naming it."""
        for_what = f" ({what})" if what else ""
        if name not in self.arrays:
            raise CheckpointError(f"{self.where} has no weight {quoted(name)}{for_what}.")
        value = self.arrays[name]
        if shape is not None:
            found = tuple(np.shape(value))
            if not fits(found, tuple(shape)):
                raise CheckpointError(
                    f"The weight {quoted(name)}{for_what} in {self.where} has shape "
                    f"{shape_text(found)}, but {self.described_by} {shape_text(shape)}.")
        self.taken.add(name)
        return value

    def unused(self) -> list[str]:
        """The names not taken, in the file's order."""
        return [name for name in self.arrays if name not in self.taken]

    def check_all_used(self, model: str) -> None:
        """Refuse a file holding a weight nothing took: it would mean the model is not the one
        `model` describes ("a MarianMTModel with this config.json"), so what it computes would
        not be the original's."""
        unused = self.unused()
        if unused:
            more = f" (and {len(unused) - 1:,} more)" if len(unused) > 1 else ""
            raise CheckpointError(
                f"{self.where} has a weight {quoted(unused[0])}{more} that {model} does not "
                "have; a file holding weights that are not used is not the model it seems.")
