"""Every page on a real-sized named model with a long source (issue 36): the app as
`python -m explorer.serve --model DIR` runs it (AppTest, the real script), the sentence a
source of about --tokens ids, every page visited in turn; prints, per page, the seconds its first
run took, whether it raised, the process's peak memory (VmHWM) so far, and the page's own peak:
how far above the memory held before it the process went while it ran (VmHWM reset first).

    .venv/bin/python bench/named_pages.py DIR [--tokens 400] [--target]

DIR: a Hugging Face model folder (bench/real_models.py builds nllb-200-distilled-600M- and
pegasus-xsum-shaped ones in /work/models). --target: with a typed target of the same length
(teacher forcing) instead of the model's translation. Not part of `make test`: minutes, GBs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from explorer.pages import PAGE_FILES  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
PAGES = PAGE_FILES  # every page, in the menus' order (explorer/pages.py)
WORDS = ("the old man walks slowly to the station with my friend while the children of the "
         "village sing songs about the river and the mountains in the early morning light").split()


def status_bytes(field: str = "VmHWM") -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith(field + ":"))


def peak_bytes() -> int:
    return max(status_bytes(), _PEAK[0])


_PEAK = [0]  # the highest VmHWM before the last reset


def reset_peak() -> int:
    """Set VmHWM to the memory held now (Linux: clear_refs 5); the memory held (bytes)."""
    _PEAK[0] = peak_bytes()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_bytes("VmRSS")


def sentence(ckpt, tokens: int) -> str:
    """Words until the source has about `tokens` ids (the model's own tokenizer counts)."""
    words = []
    while len(ckpt.encode_source(" ".join(words))) < tokens:
        words.extend(WORDS[: max(1, (tokens - len(ckpt.encode_source(" ".join(words)))) // 2)])
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--tokens", type=int, default=400)
    parser.add_argument("--target", action="store_true")
    args = parser.parse_args()
    from streamlit.testing.v1 import AppTest

    from explorer import models, state

    os.environ[state.SERVED_MODELS] = json.dumps([args.folder])
    os.environ[state.OPEN_BY_NAME] = "0"
    t = time.perf_counter()
    ckpt = models.open_named(args.folder)
    print(f"opened {args.folder} in {time.perf_counter() - t:.1f} s; source budget "
          f"{ckpt.source_len} ids, peak {peak_bytes() / 2**30:.2f} GB", flush=True)
    text = sentence(ckpt, args.tokens)
    ids = len(ckpt.encode_source(text))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
    at.run()
    at.text_input(key=state.SOURCE).set_value(text).run()
    if args.target:
        at.radio(key=state.TARGET_MODE).set_value(state.TARGET_TYPED).run()
        at.text_input(key=state.TARGET).set_value(text).run()
    print(f"source: {ids} ids; target: {'typed, the same text' if args.target else 'the model'}"
          f"'s translation", flush=True)
    rows = []
    for page in PAGES:
        held = reset_peak()
        t = time.perf_counter()
        try:
            at.switch_page(page).run()
            failed = "; ".join(str(e.value)[:120] for e in at.exception) or ""
        except Exception as err:  # noqa: BLE001 - a bench reports, it does not stop
            failed = f"{type(err).__name__}: {err}"[:160]
        seconds = time.perf_counter() - t
        rows.append({"page": page, "seconds": round(seconds, 1), "error": failed,
                     "peak_gb": round(peak_bytes() / 2**30, 2),
                     "page_peak_gb": round((status_bytes() - held) / 2**30, 2)})
        print(f"{page:34s} {seconds:7.1f} s  peak {rows[-1]['peak_gb']:5.2f} GB  this page "
              f"+{rows[-1]['page_peak_gb']:4.2f} GB  {'FAILED: ' + failed if failed else 'ok'}",
              flush=True)
    print(json.dumps({"folder": args.folder, "source_ids": ids, "pages": rows}))


if __name__ == "__main__":
    main()
