"""What the Positional encodings page says of a model's position codes, from its config and the
recipe it was read with: which kind it uses (sinusoids, a learned table, or none: a relative
bias on the scores), the sinusoids' layout and formula, where its positions start in its table,
and a model without any."""

from __future__ import annotations

from transformer.importers.hf import FAMILIES

LAYOUTS = {"sinusoidal_concat": "concat", "sinusoidal_fairseq": "fairseq"}  # else interleaved
# recipe -> rows of transformers' learned table before position 0 (never read, not kept)
LEARNED_OFFSETS = {family.recipe.name: family.position_offset for family in FAMILIES
                   if family.position_offset}
NO_POSITIONS = ("This model adds **no** position codes (positional = 'none', as T5): positions "
                "enter as a relative bias on the attention scores, one learned number per head "
                "for each bucket of key − query distance, computed in each stack's first layer "
                "and added to the scores of all its layers. Below: that bias for the sentence; "
                "the Arithmetic of one head page adds it to one head's scores step by step.")
FORMULAS = {  # each layout of the sinusoids (transformer.positional_encoding), as the page says it
    "interleaved": "PE(pos, 2i) = sin(pos / base^(2i/d_model)), PE(pos, 2i+1) = cos(pos / "
                   "base^(2i/d_model)): each pair of dimensions turns at its own rate, fast on "
                   "the left, slow on the right.",
    "concat": "PE(pos, i) = sin(pos / base^(2i/d_model)) in the first half, PE(pos, d_model/2 + "
              "i) = cos(pos / base^(2i/d_model)) in the second (this model's layout: the sines "
              "of every frequency, then the cosines): fast on the left of each half, slow on "
              "its right.",
    "fairseq": "PE(pos, i) = sin(pos · ω_i) in the first half, PE(pos, d_model/2 + i) = "
               "cos(pos · ω_i) in the second, with ω_i = base^(−i/(d_model/2 − 1)) (fairseq's "
               "layout, M2M100's and NLLB's): fast on the left of each half, slow on its right.",
}


def kind(config) -> str:
    """What the model adds for positions: "sinusoidal" (any layout), "learned" or "none"."""
    return config.positional if config.positional in ("learned", "none") else "sinusoidal"


def learned_offset_note(recipe, config) -> str:
    """Where a learned table's rows start in the original model ("" when at row 0): BART's and
    mBART's tables have two rows before position 0, which the import leaves out."""
    offset = LEARNED_OFFSETS.get(recipe, 0)
    if not offset:
        return ""
    unread = {1: "row 0 is", 2: "rows 0 and 1 are"}.get(offset, f"rows 0 to {offset - 1} are")
    return (f"The original model's table has {config.max_len + offset:,} rows: transformers reads "
            f"row position + {offset} (its LearnedPositionalEmbedding's offset), so {unread} "
            f"never read and were left out on import. Row p drawn here is the original's row "
            f"p + {offset}: the code position p gets.")


def layout(config) -> str:
    """The layout of the model's sinusoids (transformer.positional_encoding's layout names)."""
    return LAYOUTS.get(config.positional, "interleaved")


def offset_note(config) -> str:
    """Where the model's positions start in its sinusoid table ("" when at 0)."""
    offset = getattr(config, "position_offset", 0)
    if not offset:
        return ""
    return (f" This model reads its table from row {offset} on (pad_id + 1, as fairseq counts "
            f"positions): position p is row p + {offset}, as drawn here.")
