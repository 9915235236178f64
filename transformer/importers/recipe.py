"""What a family or recipe of other programs' models is, in words: each importer module declares
its RECIPE, and the registry (transformer.importers.RECIPES) collects them. The app's pickers,
its "where this model came from" and the CLI read these; no other table of recipes exists."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Form:
    """One form of a recipe (its files told apart by what is inside them)."""
    label: str  # what the files are: "the Keras example with a hand-written attention"
    note: str = ""  # said after the recipe's name where a model came from ("" for the usual form)
    title: str | None = None  # when the form is another program's: what a model of it is
    languages: tuple[str | None, str | None] = (None, None)  # what that program translates


@dataclass(frozen=True)
class Recipe:
    name: str  # the CLI's and the metadata's name: "keras-seq2seq"
    label: str  # short, for pickers and progress: "Keras seq2seq example"
    in_text: str  # in a sentence: "the Keras seq2seq example"
    title: str  # what a model of it is, in full
    languages: tuple[str | None, str | None] = (None, None)  # what the original translates
    asks: bool = True  # its files cannot tell everything: the import form asks (heads, sides)
    forms: dict[str, Form] = field(default_factory=dict)

    def form(self, name) -> Form | None:
        return self.forms.get(name) if isinstance(name, str) else None
