"""The decode profile (bench/profile_decode.py) reads TensorFlow's profiler output, whose format
belongs to TensorFlow: it must still find the compiled call and the kernels in it."""

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
