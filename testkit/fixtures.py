"""The builders of the tests' recorded fixtures (tests/fixtures/make_*.py: the corpus pairs, the
SentencePiece trainer, NLLB's token layout), which the benchmarks reuse to build real-size
folders: loaded from their files, since tests/ is not a package the project installs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def fixture_module(name: str) -> ModuleType:
    """tests/fixtures/<name>.py as a module ("make_marian_fixture"), imported once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FIXTURES / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no fixture builder {name!r} in {FIXTURES}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its own imports of its siblings find it
    spec.loader.exec_module(module)
    return module
