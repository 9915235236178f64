"""What the Positional encodings page says of a model's position codes, from its config: the
sinusoids' layout and formula, where its positions start, and a model without any."""

from __future__ import annotations

LAYOUTS = {"sinusoidal_concat": "concat", "sinusoidal_fairseq": "fairseq"}  # else interleaved
NO_POSITIONS = ("This model adds **no** position codes (positional = 'none', as T5): positions "
                "enter as a relative bias on the attention scores. The sinusoids are for "
                "comparison.")
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
