"""The package's import graph: packages in layers whose imports only go down, no cycle between
modules, TensorFlow-free layers that import no TensorFlow, and no UI library anywhere in it.

    core        no TensorFlow: the three kinds, limits, text, padding and the blocked score
    analysis    NumPy only: rollout, flow, head statistics, value norms (imports core only;
                the runtime uses its arithmetic on captured tensors: OpenedModel.contributions)
    tokenizers  one interface and one module per kind
    model       config, attention, layers, the Transformer, weight names and shapes
    checkpoint  the one-file format and the bounded readers of untrusted bytes
    inference   the runtime: translate, maps, decoding, teacher forcing, batch, ablation
    importers   one module per recipe, the Hugging Face families (hf/), and the registry
    training    the CLI and its data

Read from the source (every import statement, those inside functions included), so an import
added anywhere is judged."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "transformer"
LAYERS = ("core", "analysis", "tokenizers", "model", "checkpoint", "inference", "importers",
          "training")
MAY_IMPORT = {name: set(LAYERS[:i + 1]) for i, name in enumerate(LAYERS)}
TENSORFLOW_FREE = ("core", "analysis")
TOP = {"transformer", "transformer.convert", "transformer.train"}  # entry points, above all


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts a.b when b is a
    module of ours, else a)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return found


FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module_name(path) for path in FILES}
GRAPH = {_module_name(path): _imports(path) for path in FILES}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and module not in TOP else None


def test_every_module_sits_in_a_layer():
    loose = sorted(m for m in MODULES if m not in TOP and _layer(m) not in MAY_IMPORT)
    assert not loose, f"modules outside the layers: {loose}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m not in TOP))
def test_imports_only_go_down(module):
    layer = _layer(module)
    ours = {m for m in GRAPH[module] if m == "transformer" or m.startswith("transformer.")}
    assert "transformer" not in ours, f"{module} imports the package root (the entry point)"
    upward = sorted(m for m in ours if _layer(m) not in MAY_IMPORT[layer])
    assert not upward, f"{module} ({layer}) imports {upward}"


def test_no_cycle_between_modules():
    ours = {m: {d for d in deps if d in MODULES and d not in TOP} for m, deps in GRAPH.items()}
    state, cycle = {}, []

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(ours[module]):
            if state.get(dep) == "open":
                cycle.extend(path[path.index(dep):] + [dep])
                return True
            if dep not in state and visit(dep, path + [dep]):
                return True
        state[module] = "done"
        return False

    for module in sorted(ours):
        if module not in state and visit(module, [module]):
            break
    assert not cycle, " -> ".join(cycle)


def test_no_ui_library_in_the_package():
    ui = sorted((m, d) for m, deps in GRAPH.items() for d in deps
                if d.split(".")[0] in ("streamlit", "plotly"))
    assert not ui, ui


@pytest.mark.parametrize("layer", TENSORFLOW_FREE)
def test_tensorflow_free_layers_import_no_tensorflow(layer):
    modules = sorted(m for m in MODULES if _layer(m) == layer)
    static = sorted((m, d) for m in modules for d in GRAPH[m]
                    if d.split(".")[0] in ("tensorflow", "keras", "tf_keras"))
    assert not static, static
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "bad = [m for m in ('tensorflow', 'keras', 'streamlit', 'plotly') if m in sys.modules]\n"
            "assert not bad, bad\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]


def test_figures_import_only_the_tensorflow_free_core():
    for path in sorted((ROOT / "figures").glob("*.py")):
        module = "figures." + path.stem
        deps = {d for d in _imports(path) if d.startswith("transformer")}
        assert all(_layer(d) in TENSORFLOW_FREE for d in deps), (module, deps)


def test_the_graph_is_read():
    """The checks above judge real edges: the graph holds imports that cross layers."""
    assert "transformer.core.limits" in GRAPH["transformer.checkpoint.format"]
    assert "transformer.model.config" in GRAPH["transformer.model.transformer"]
    assert any(d.startswith("transformer.inference") for d in GRAPH["transformer.importers.hf.family"])


def test_no_module_name_repeats_across_packages():
    """One name, one module (issue 39): a module's file name says which it is, wherever it is
    imported from (the packages' __init__ aside; tests mirror the code, so they are not judged)."""
    seen: dict[str, list[str]] = {}
    for top in ("transformer", "figures", "explorer", "views", "bench", "testkit"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name != "__init__.py":
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    seen["app.py"] = seen.get("app.py", []) + ["app.py"]
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
