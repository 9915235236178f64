"""The decode profile (bench/profile_decode.py) reads TensorFlow's profiler output, whose format
belongs to TensorFlow: it must still find the compiled call and the kernels in it."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_decode_profile_finds_the_compiled_call_and_its_kernels():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "profile_decode.py"), "--runs", "2"],
                         cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                         capture_output=True, text=True, timeout=600, check=True).stdout
    wall, call, host = map(float, re.search(
        r"wall +([\d.]+) us: compiled call +([\d.]+) us, host +(-?[\d.]+) us", out).groups())
    assert 0 < call < wall and host > 0, out
    kernels = float(re.search(r"kernels +([\d.]+) us in all", out).group(1))
    assert kernels > 0, out
    # the step's matmuls and softmaxes are among the kernels, and the body's nodes are counted
    assert re.search(r"^ +_?(Fused)?MatMul ", out, re.M), out
    assert re.search(r"the loop body's graph: \d+ nodes besides constants; .*MatMul \d+", out), out


def test_the_benchmarks_reach_what_they_share_without_editing_sys_path():
    """bench/ is installed with the project (pyproject.toml), so a benchmark imports the package,
    testkit and its siblings as they are; the fixtures' builders come through testkit.fixtures.
    Neither a benchmark nor the script it hands a child process edits sys.path (issue 39)."""
    scripts = sorted((ROOT / "bench").glob("*.py"))
    assert len(scripts) > 15
    for path in scripts:
        tree = ast.parse(path.read_text(), str(path))
        edits = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr == "path"
                 and isinstance(node.value, ast.Name) and node.value.id == "sys"]
        edits += [node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and re.search(r"sys\.path\.(insert|append)|sys\.path\[", node.value)]
        assert not edits, f"{path.name} edits sys.path at line {edits[0]}"


def test_real_models_measures_ours_as_a_user_imports_the_package():
    """bench/real_models.py times TensorFlow's import apart from ours, and must still import the
    package first, as a user does: the package turns oneDNN's kernels off before TensorFlow
    loads (a child that imported TensorFlow first measured the decode step with them on). Its
    child script is run up to the end of the import."""
    from bench import real_models

    script = real_models.OURS[:real_models.OURS.index("# (the end of the import")]
    script = script % {"repeats": 1} + "done()\n"  # the import needs no other value
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    result = json.loads(out.split("RESULT ", 1)[1])
    assert result["onednn"] is False and result["import"] > 0, result
