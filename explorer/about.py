"""What a model does and what it expects, from its metadata; and whether a sentence is far from
what it was trained on (then its output may be nonsense). No Streamlit: Home and Model pages
show what these return."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from transformer.importers import RECIPES

UNKNOWN_SHARE = 1 / 3  # more unknown source pieces than this: far from the training data
LANGUAGES = {"ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
             "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "hi": "Hindi",
             "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch",
             "no": "Norwegian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
             "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
             "zh": "Chinese", "eng": "English", "spa": "Spanish", "fra": "French",
             "deu": "German", "por": "Portuguese", "ita": "Italian"}
DATES_TASK = "dates"
_MONTH_WORDS = ("january", "february", "march", "april", "may", "june", "july", "august",
                "september", "october", "november", "december")
_DATE_WORD = re.compile(r"\b(" + "|".join(m[:3] for m in _MONTH_WORDS) + r")[a-z]*\b")
_NUMERIC_DATE = re.compile(r"\d{1,4}\s*[./-]\s*\d{1,2}\s*[./-]\s*\d{1,4}")


@dataclass
class About:
    """What the pages say about a model."""
    does: str  # one sentence: what the model does
    languages: str | None = None  # "English → French"
    training: str | None = None  # what it was trained on
    inputs: str = ""  # what inputs it expects
    examples: list[str] = field(default_factory=list)  # a few inputs it expects


def language(code) -> str | None:
    if not isinstance(code, str) or not code.strip():
        return None
    return LANGUAGES.get(code.strip().lower(), code.strip())


def describe(metadata: dict, source_spec: dict | None = None, target_spec: dict | None = None,
             examples=()) -> About:
    """About a model from its metadata (task, corpus, provenance of a converted model) and its
    tokenizers' specs (BPEmb's language)."""
    examples = [e for e in examples if isinstance(e, str)][:4]
    shown = ", ".join(f'"{e}"' for e in examples[:3])
    provenance = metadata.get("source") if isinstance(metadata.get("source"), dict) else {}
    if metadata.get("task") == DATES_TASK:
        return About(
            does="It turns dates written by people into ISO dates: \"Friday, March 5, 2021\", "
                 "\"5th of march 2021\" or \"05.03.2021\" all become 2021-03-05.",
            languages="English dates → ISO 8601 (YYYY-MM-DD)",
            training=_count(metadata.get("train_examples"), "generated date pairs")
            + f" of the dates task: days from 1900 to 2099 in {_formats(metadata)}, in lower, "
              "title, upper and sentence case; the held-out days were never seen in training.",
            inputs="One date in English with its day, month and year, written as in the "
                   "examples; anything else is far from what it was trained on.",
            examples=examples)
    source_lang = language(provenance.get("source_lang")) or language(
        (source_spec or {}).get("lang"))
    target_lang = language(provenance.get("target_lang")) or language(
        (target_spec or {}).get("lang"))
    recipe = provenance.get("recipe") or metadata.get("recipe")
    if isinstance(recipe, str) and recipe in RECIPES:
        form = RECIPES[recipe].form(provenance.get("form"))
        what, (usual_source, usual_target) = ((form.title, form.languages) if form and form.title
                                              else (RECIPES[recipe].title,
                                                    RECIPES[recipe].languages))
        pair = f"{source_lang} → {target_lang}" if source_lang and target_lang else None
        as_is = not RECIPES[recipe].asks  # a Hugging Face model, opened from its own files
        does = (f"It translates {source_lang} into {target_lang}." if pair else
                (f"It is {what}, opened from its own files: a sequence-to-sequence model that "
                 "writes an output text for an input text (a translation, a summary, ...: the "
                 "files do not say which)." if as_is else
                 "It is a translator converted from a model trained with " + what + "."))
        if not pair and usual_source:
            does += (f" That recipe translates {usual_source} into {usual_target}; yours may have "
                     "been trained on anything: the checkpoint does not record it.")
        model = provenance.get("model")
        training = ("Not recorded in the files: whatever it was trained on with " + what
                    + (f" ({model})." if isinstance(model, str) and model else "."))
        inputs = ("Sentences like those it was trained on"
                  + (f", in {source_lang}" if source_lang else "") + ".")
        return About(does, pair, training, inputs, examples)
    if isinstance(metadata.get("corpus"), str) and metadata["corpus"]:
        pair = f"{source_lang} → {target_lang}" if source_lang and target_lang else None
        corpus = metadata["corpus"]
        return About(
            does=(f"It translates {source_lang} into {target_lang}" if pair
                  else "It translates the source side of a parallel corpus into its target side")
            + f", trained on {corpus}.",
            languages=pair,
            training=_count(metadata.get("train_examples"), "sentence pairs") + f" of {corpus}.",
            inputs="Sentences like those of the corpus" + (f" ({shown})." if shown else "."),
            examples=examples)
    return About(does="The checkpoint does not say what it was trained to do (no task, corpus "
                      "or recipe in its metadata).",
                 inputs="Unknown: try sentences like its examples." if shown else "Unknown.",
                 examples=examples)


def about_checkpoint(ckpt, examples=()) -> About:
    """describe() for a checkpoint: its metadata and both tokenizers' specs."""
    return describe(ckpt.metadata, ckpt.source_tokenizer.spec(), ckpt.target_tokenizer.spec(),
                    examples)


def _count(value, what: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return f"{value:,} {what}"
    return what[0].upper() + what[1:]


def has_date_part(text: str) -> bool:
    """A month's name (or its first three letters) or a numeric date such as 05.03.2021."""
    lowered = text.lower()
    return bool(_DATE_WORD.search(lowered) or _NUMERIC_DATE.search(lowered))


def input_warnings(ckpt, text: str) -> list[str]:
    """Why `text` is far from what the model was trained on, one sentence each ([] when it is
    not): for the dates task, no digit or no date part; for any model, more than a third of
    the source pieces unknown to its vocabulary."""
    warnings = []
    if not text.strip():
        return warnings
    if ckpt.metadata.get("task") == DATES_TASK:
        if not any(c.isdigit() for c in text):
            warnings.append("The sentence has no digit, but the dates model was trained only on "
                            "dates with a day and a year in digits: its output may be nonsense.")
        elif not has_date_part(text):
            warnings.append("The sentence has no month name and no date in digits (such as "
                            "05.03.2021), which every date the model was trained on has: its "
                            "output may be nonsense.")
    tokenizer = ckpt.source_tokenizer
    ids = tokenizer.encode(text)
    unknown = sum(1 for i in ids if i == tokenizer.unk_id)
    if ids and unknown > UNKNOWN_SHARE * len(ids):
        warnings.append(f"{unknown} of the {len(ids)} source pieces are unknown to the model's "
                        f"vocabulary ({tokenizer.id_to_piece(tokenizer.unk_id)}): the sentence "
                        "is far from what it was trained on, and its output may be nonsense.")
    return warnings


@dataclass
class Origin:
    """Where a model came from: converted from someone else's files, or trained here."""
    how: str  # one sentence
    command: str = ""  # the command that reproduces it (conversion or training)
    files: list[dict] = field(default_factory=list)  # [{"file", "role", "sha256"}] converted from


def origin(metadata: dict) -> Origin:
    """The provenance a checkpoint records: metadata["source"] of a converted model (recipe,
    files with their sha256, the convert command), or the training command of our own."""
    source = metadata.get("source")
    if isinstance(source, dict):
        recipe = RECIPES.get(source.get("recipe"))
        name = recipe.in_text if recipe else str(source.get("recipe") or "an unknown recipe")
        note = recipe.form(source.get("form")).note if recipe and recipe.form(source.get("form")) \
            else ""
        form = f" ({note})" if note else ""
        files = []
        for item in source.get("files") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                digest = item.get("sha256")
                files.append({"file": item["name"], "role": str(item.get("role") or ""),
                              "sha256": digest[:16] if isinstance(digest, str) else ""})
        model = source.get("model")
        named = f" ({model})" if isinstance(model, str) and model else ""
        command = source.get("command") if isinstance(source.get("command"), str) else ""
        if recipe and not recipe.asks:  # a Hugging Face family: opened as it is, no conversion
            how = (f"Opened from a {name} model's own files{named}: read as data, its weights "
                   "mapped onto this project's Transformer on load, with no conversion step.")
            if not command:  # what writes the same folder as a checkpoint (the CLI's own line)
                from transformer.importers.cli import hf_argv

                command = shlex.join(hf_argv(recipe.name, "MODEL_DIR", "model.ckpt"))
            return Origin(how, command, files)
        how = (f"Converted from a model trained with {name}{form}{named}: its weights and "
               "vocabularies were read as data and mapped onto this project's Transformer.")
        return Origin(how, command, files)
    command = metadata.get("command")
    if isinstance(command, str) and command:
        return Origin("Trained by this project (python -m transformer.train) with this command:",
                      command)
    return Origin("The checkpoint does not record how it was made.")


def mask_texts(config, start_piece: str) -> dict[str, str]:  # start_piece: as shown, quoted
    """What the Masks page says of this model's masks, from its config: "masks" (what they
    block: padding or not, a start token that has the pad id, as Marian's), "what" (the name of
    its batch masks), "row_caption" (its decoder and memory masks), "row_intro" (one row)."""
    if not config.mask_padding:
        return {
            "masks": "**This model applies no padding mask**: every key is visible, padding "
                     "included; only the decoder's look-ahead mask blocks keys (later target "
                     "tokens).",
            "what": "mask (no padding masked)",
            "row_caption": "Decoder mask = the look-ahead mask alone: this model applies no "
                           "padding mask. The memory mask is its source mask, all 1, broadcast by "
                           "cross-attention over the T target queries: every query may attend to "
                           "every source key, padding included.",
            "row_intro": "Row 0 (the sidebar's sentence) inside the padded batch; this model "
                         "masks no padding, so padded keys get a weight like any other key."}
    masks = ("This model masks padding: no query attends to a padded key, and the decoder never "
             "looks at later target tokens.")
    if config.start_id == config.pad_id:
        masks += (f" Its start token {start_piece} has the pad id ({config.pad_id}): position 0 "
                  "of every target is the start token, **not padding**, and stays visible; only "
                  "later positions with that id are padding.")
    return {
        "masks": masks,
        "what": "padding mask",
        "row_caption": "Decoder mask = target padding mask × look-ahead mask. The memory mask is "
                       "the source padding mask, broadcast by cross-attention over the T target "
                       "queries: no query may attend to source padding.",
        "row_intro": "Row 0 (the sidebar's sentence) inside the padded batch, so padding blocks "
                     "some keys when another sentence is longer."}


def _formats(metadata: dict) -> str:
    """How many named formats the held-out report measured ("36 formats"), from the metadata:
    models trained before the per-format report say only "its formats"."""
    held_out = metadata.get("held_out")
    rows = held_out.get("per_format") if isinstance(held_out, dict) else None
    return f"{len(rows)} formats" if isinstance(rows, list) and rows else "its formats"
