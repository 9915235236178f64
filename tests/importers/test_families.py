"""A Hugging Face family is one declaration (issue 39): its importer module under
transformer/importers/hf/ and, where its tokenizer is one of the pipelines transformers builds, one
TokenizerFamily record; the registry finds the module, and no other production file names it.

The count reads the code as Python tokens: comments, docstrings and sentences (a string with a
space in it: an error message or a page's help naming a family in words) are left out; names,
identifiers and one-word strings ("bart", MBART_CODES, m2m100_pieces) count."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from transformer.importers import HF_FAMILIES
from transformer.importers.hf import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("transformer", "figures", "explorer", "views", "app.py")
NAMES = {  # a family -> how the code may spell it
    "bart": r"(?<![a-z])bart(?![a-z])", "mbart": r"mbart", "pegasus": r"pegasus",
    "t5": r"(?<![a-z0-9])m?t5(?![a-z0-9])", "nllb": r"nllb", "m2m100": r"m2m_?100",
    "marian": r"marian",
}
RECORD_FAMILIES = ("bart", "mbart", "pegasus", "t5", "nllb")  # their tokenizer is a record
# The families with a tokenizer kind of their own: its module, the kind registry, the pair
# maker that dispatches to it (M2M100), and Marian's own convert subcommand (the CLI kept it).
OWN_KIND_FILES = {
    "m2m100": {"transformer/importers/hf/m2m100.py", "transformer/tokenizers/m2m100_pieces.py",
               "transformer/tokenizers/__init__.py", "transformer/tokenizers/hf_pair.py",
               "transformer/tokenizers/hf_families.py"},
    "marian": {"transformer/importers/hf/marian.py", "transformer/tokenizers/marian_pieces.py",
               "transformer/tokenizers/__init__.py", "transformer/importers/cli.py"},
}


def code_words(path: Path) -> str:
    """The file's code without comments, docstrings and sentences, lowercased."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.STRING and (token.start[0] in docstrings or " " in token.string):
            continue
        kept.append(token.string)
    return " ".join(kept).lower()


def naming_files() -> dict[str, set[str]]:
    files = []
    for root in PRODUCTION:
        path = ROOT / root
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    words = {path: code_words(path) for path in files}
    return {family: {str(path.relative_to(ROOT)) for path, text in words.items()
                     if re.search(pattern, text)} for family, pattern in NAMES.items()}


@pytest.fixture(scope="module")
def named():
    return naming_files()


@pytest.mark.parametrize("family", RECORD_FAMILIES)
def test_a_family_is_named_in_its_module_and_its_tokenizer_record_only(named, family):
    module = "m2m100" if family == "nllb" else family  # NLLB-200 is read by the M2M100 module
    assert named[family] == {f"transformer/importers/hf/{module}.py",
                             "transformer/tokenizers/hf_families.py"}


@pytest.mark.parametrize("family", sorted(OWN_KIND_FILES))
def test_a_family_with_a_tokenizer_kind_of_its_own_is_named_where_that_kind_lives(named, family):
    assert named[family] == OWN_KIND_FILES[family]


def test_the_count_reads_names_not_sentences():
    text = code_words(ROOT / "transformer" / "tokenizers" / "hf_families.py")
    assert '"bart"' in text and "mbart_codes" in text  # a one-word string and an identifier
    assert "which bart" not in text  # no sentence survives


def test_the_registry_holds_every_declared_module():
    declared = sorted(p.stem for p in (ROOT / "transformer" / "importers" / "hf").glob("*.py")
                      if "\nFAMILY = Family(" in p.read_text())
    assert sorted(family.recipe.name for family in FAMILIES) == declared
    assert declared == ["bart", "m2m100", "marian", "mbart", "pegasus", "t5"]
    for family in FAMILIES:
        for model_type in family.model_types:
            assert HF_FAMILIES[model_type] is family
