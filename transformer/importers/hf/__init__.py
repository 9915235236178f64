"""The Hugging Face encoder-decoder families, read as data: one module per family, each a
declaration (its FAMILY record: tokenizer files, config.json allow-list and mapping, weight
table; hf.family.Family), and the steps they share.

    family          Family, and the steps every family's model goes through (read, data, convert)
    folder          a folder, a .zip or uploaded files gathered by name within their caps
    config_reader   config.json read against a family's allow-list
    weight_files    model.safetensors, its shards or tf_model.h5 (tf_weights), any precision
    fairseq         what the fairseq-born families share: config fields and the weight layout
    hub             a Hugging Face name resolved to a folder (the local cache, else a download)
    the others      one family each (marian, bart, mbart, t5, pegasus, m2m100: M2M100 and NLLB)

FAMILIES is the registry: every Family the modules of this package declare (imported here, each
records itself: family.DECLARED), in the order of their recipes' names. A new family is one
module here (the README's "Adding a Hugging Face family").
"""

from __future__ import annotations

import importlib
import pkgutil

from transformer.importers.hf.family import DECLARED, Family

__all__ = ["FAMILIES", "BY_MODEL_TYPE", "Family"]


for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
FAMILIES: tuple[Family, ...] = tuple(sorted(DECLARED, key=lambda family: family.recipe.name))
BY_MODEL_TYPE = {model_type: family for family in FAMILIES for model_type in family.model_types}
