"""Server time of every page with a long sequence (issue 24, item 4): a typed 400-token target
on an opus-mt-shaped model, and the longest the bundled model reads.

    .venv/bin/python bench/long_pages.py [--models bundled,tiny512,opus] [--pages Masks,...]
                                         [--repeats 3] [--opus-folder DIR] [--profile PAGE]

Runs the app in Streamlit's AppTest (no browser: the script's own time, from its start to its
end, figures serialized included) with, in the sidebar, a typed target (teacher forcing) and:
- bundled: the bundled dates model (max_len 64: it reads at most 64 tokens a side), a source
  and a typed target repeated until the model's own cut (the lengths read are printed);
- tiny512: testkit.tiny's untrained model (dates tokenizers, 1 + 1 layers, 2 heads) reading
  512 positions: a long source and a typed target of 400 target tokens, both read whole;
- opus: an opus-mt-en-fr-shaped Marian folder (random weights, 6 + 6 layers, d_model 512,
  8 heads, vocabulary 59,514, 512 positions), built once with transformers as bench/open_real.py
  builds it (--opus-folder keeps it between runs), the default source and a typed target of
  400 target tokens, which the model's own budget cuts (transformer.core.limits: the maps of
  one request within 256 MB, 305 target ids for 6 + 6 layers x 8 heads; printed). Pages that
  show the model's own translation (Masks, the sidebar) decode it as the app does: random
  weights rarely end, so it runs to the step or time budget (10 s).
The app's background preparation of the model's compiled functions (explorer.warm, on as
in the served app) is waited for after app.py's first run and its time printed, as a user who
reads the first page meets the next ones (--no-wait: the pages at once, beside it).
For each page: the first visit (its own results computed; the model and the translation
already cached by the pages before it) and the median of --repeats reruns, against the goal
of 3 s. --profile prints the cProfile of one rerun of a page (bench/page_rerun.py's).
Skips the opus model (exit 0) where torch or transformers is not installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")
ROOT = Path(__file__).resolve().parent.parent

from streamlit.testing.v1 import AppTest  # noqa: E402

from bench.page_rerun import profile  # noqa: E402
from explorer import state, warm  # noqa: E402
from testkit.fragments import script_seconds  # noqa: E402

PAGES = ["0_Home", "1_Model", "2_Tokenization", "3_Positional_Encodings", "4_Masks",
         "5_Attention_Maps", "6_Linked_View", "7_Aggregations", "8_Token_View",
         "9_Head_Arithmetic", "10_Decoding", "11_Compare_Heads", "12_Head_Statistics",
         "13_Ablation", "14_Contributions"]
GOAL_S = 3.0
TARGET_TOKENS = 400
BUNDLED_SOURCE = "Friday, March 5, 2021 "  # repeated until the bundled model's cut
BUNDLED_TARGET = "2021-03-05 "


def _check(at):
    if at.exception:
        raise RuntimeError(at.exception)
    return at


def opus_files(folder: Path | None) -> dict[str, bytes]:
    """The opus-mt-shaped folder's files, built by bench/open_real.py's build_folder."""
    if folder is None or not (folder / "model.safetensors").exists():
        folder = folder or Path(tempfile.mkdtemp()) / "opus-mt-en-fr"
        print(f"building the opus-mt-shaped folder in {folder} ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "open_real.py"), "--build",
                        str(folder)], check=True, cwd=ROOT,
                       env={**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                            "PYTHONWARNINGS": "ignore::UserWarning"})
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def opus_target(ckpt, tokens: int = TARGET_TOKENS) -> str:
    """French-like words from the target vocabulary, as many as make `tokens` target ids."""
    from testkit.fixtures import fixture_module

    PAIRS = fixture_module("make_marian_fixture").PAIRS

    words = " ".join(t for _, t in PAIRS).split()

    def count(n: int) -> int:
        return len(ckpt.encode_target(" ".join(words[i % len(words)] for i in range(n))))

    low, high = 1, 4 * tokens  # bisect the number of words whose ids (</s> included) reach it
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if count(middle) - 1 < tokens else (low, middle)
    return " ".join(words[i % len(words)] for i in range(low))


def session(model: str, opus: Path | None):
    """An AppTest of app.py whose sidebar holds the model, a source and a typed target; the
    lengths the model reads, for the report."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    if model == "opus":
        files = opus_files(opus)
        ckpt = load_checkpoint(files)
        digest = hashlib.sha256(b"".join(files[name] for name in sorted(files))).hexdigest()
        at.session_state[state.UPLOADS] = {digest: ("opus-mt-en-fr (random weights)", files)}
        at.session_state[state.MODEL] = f"{state.UPLOADED}:{digest}"
        source, target = state.DEFAULT_SOURCE, opus_target(ckpt)
    elif model == "tiny512":
        from testkit.tiny import tiny_checkpoint_bytes

        data = tiny_checkpoint_bytes("tiny512", max_len=512)
        ckpt = load_checkpoint(data)
        digest = hashlib.sha256(data).hexdigest()
        at.session_state[state.UPLOADS] = {digest: ("tiny512.ckpt", data)}
        at.session_state[state.MODEL] = f"{state.UPLOADED}:{digest}"
        source, target = BUNDLED_SOURCE.lower() * 40, BUNDLED_TARGET
        while len(ckpt.encode_target(target)) - 1 < TARGET_TOKENS:
            target += BUNDLED_TARGET
    else:
        ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
        source, target = BUNDLED_SOURCE * 40, BUNDLED_TARGET * 40
    at.session_state[state.SOURCE] = source
    at.session_state[state.TARGET_MODE] = state.TARGET_TYPED
    at.session_state[state.TARGET] = target
    at.session_state[state.TARGET_STARTED] = True
    lengths = (len(ckpt.encode_source(source)), len(ckpt.encode_target(target)))
    return at, lengths


def measure(at, page: str, repeats: int) -> tuple[float, float]:
    """(first visit, median rerun) seconds of script."""
    _check(at.switch_page(f"views/{page}.py").run())
    first = script_seconds()
    again = []
    for _ in range(repeats):
        _check(at.run())
        again.append(script_seconds())
    return first, statistics.median(again)


def main() -> None:
    warm.enable_background()  # as the served app (explorer.serve) does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bundled,tiny512,opus")
    parser.add_argument("--pages", default="", help="comma-separated parts of page names")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--opus-folder", type=Path, help="build once here, reuse after")
    parser.add_argument("--profile", default="", help="a part of one page's name")
    parser.add_argument("--no-wait", action="store_true",
                        help="visit the pages at once, while the model's compiled functions "
                             "are still being prepared in the background")
    args = parser.parse_args()
    wanted = [w for w in args.pages.split(",") if w]
    pages = [p for p in PAGES if not wanted or any(w in p for w in wanted)]
    for model in [m for m in args.models.split(",") if m]:
        if model == "opus" and any(importlib.util.find_spec(m) is None
                                   for m in ("torch", "transformers")):
            print("opus: skipped (torch and transformers build its folder)")
            continue
        at, (n, t) = session(model, args.opus_folder)
        started = time.perf_counter()
        _check(at.run())  # the model loaded, its translation decoded (the sidebar's)
        first_run = time.perf_counter() - started
        print(f"\n{model}: source {n} tokens, typed target {t} target ids (its end token "
              f"included); app.py's first run {first_run:.1f} s; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        if not args.no_wait:
            warm.wait_prepared()
            print(f"its compiled functions prepared in the background "
                  f"{time.perf_counter() - started - first_run:.1f} s after that run ended "
                  f"(the pages below are visited then)", flush=True)
        if args.profile:
            [page] = [p for p in PAGES if args.profile in p]
            profile(at, page)
            continue
        print(f"{'page':<24} {'first visit':>12} {'rerun':>8}  goal <= {GOAL_S:.0f} s")
        for page in pages:
            first, rerun = measure(at, page, args.repeats)
            met = "met" if max(first, rerun) <= GOAL_S else "NOT met"
            print(f"{page:<24} {first:10.2f} s {rerun:6.2f} s  {met}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
