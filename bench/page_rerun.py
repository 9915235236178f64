"""Server time of one interaction on each page: the full rerun (app.py, the sidebar, the page)
against the rerun of the fragment that holds the widget, as the browser asks for it.

    .venv/bin/python bench/page_rerun.py [--repeats 5] [--pages Masks,Attention_Maps]
                                         [--profile Attention_Maps]

Runs the app in Streamlit's AppTest (no browser, no websocket: the script's own time, from its
start to its end, on the bundled model and the default sentence, every cache warm). For each
page it changes the widgets a user flips most (layer, head, kind, colour scale, ...) back and
forth and prints the median seconds of a full rerun and, when the widget is drawn inside an
st.fragment, of that fragment's rerun alone. --profile prints the cProfile of one full rerun of
a page (its 45 costliest calls, cumulative).
"""

import argparse
import cProfile
import os
import pstats
import statistics
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")
ROOT = Path(__file__).resolve().parent.parent

from streamlit.testing.v1 import AppTest  # noqa: E402
from streamlit.testing.v1.local_script_runner import LocalScriptRunner  # noqa: E402

from testkit.fragments import fragment_of, script_seconds, set_in_fragment  # noqa: E402

# page file: [(widget kind, key, two values to flip between)]
CHANGES = {
    "0_Home": [],
    "1_Model": [],
    "2_Tokenization": [],
    "3_Positional_Encodings": [("checkbox", "pe_shared_scale", (False, True))],
    "4_Masks": [("selectbox", "mask_layer", (1, 0)), ("selectbox", "mask_head", (2, 0)),
                ("radio", "mask_kind", ("Cross-attention", "Encoder self-attention"))],
    "5_Attention_Maps": [("selectbox", "attn_layer", (1, 0)), ("selectbox", "attn_head", (2, 0)),
                         ("radio", "attn_kind", ("Cross-attention", "Encoder self-attention")),
                         ("radio", "attn_scale", ("Fitted to this map", "Fixed 0 to 1"))],
    "6_Linked_View": [("selectbox", "link_layer", (1, 0)), ("selectbox", "link_head", (2, 0)),
                      ("selectbox", "link_target", (3, 0))],
    "7_Aggregations": [("radio", "agg_kind", ("Cross-attention", "Encoder self-attention")),
                       ("selectbox", "agg_flow_layer", (0, 1))],
    "8_Token_View": [("selectbox", "tv_layer", (1, 0)),
                     ("radio", "tv_kind", ("Cross-attention", "Encoder self-attention"))],
    "9_Head_Arithmetic": [("selectbox", "arith_layer", (1, 0)),
                          ("selectbox", "arith_head", (2, 0))],
    "10_Decoding": [("selectbox", "dec_layer", (1, 0)), ("selectbox", "dec_head", (2, 0))],
    "11_Compare_Heads": [("selectbox", "cmp_ckpt_head", ("cross L1 H2", "cross L0 H0"))],
    "12_Head_Statistics": [("radio", "stats_kind", ("Cross-attention",
                                                    "Encoder self-attention"))],
    "13_Ablation": [("multiselect", "abl_heads", (["cross L0 H0"], []))],
}


def _check(at):
    if at.exception:
        raise RuntimeError(at.exception)
    return at


def _median(values):
    return statistics.median(values) if values else float("nan")


def measure(at, page: str, repeats: int) -> list[str]:
    _check(at.switch_page(f"views/{page}.py").run())
    _check(at.run())  # caches warm
    lines = []
    if not CHANGES[page]:
        full = []
        for _ in range(repeats):
            _check(at.run())
            full.append(script_seconds())
        lines.append(f"{page:<24} {'(rerun, no change)':<20} full {_median(full) * 1000:7.1f} ms")
    for kind, key, values in CHANGES[page]:
        full, part = [], []
        for i in range(repeats):
            value = values[i % 2]
            getattr(at, kind)(key=key).set_value(value)
            _check(at.run())
            full.append(script_seconds())
            if fragment_of(at, kind, key):
                set_in_fragment(at, kind, key, values[(i + 1) % 2])
                part.append(script_seconds())
                set_in_fragment(at, kind, key, value)  # back, for the next full rerun
                _check(at.run())  # a full tree again
        line = f"{page:<24} {key:<20} full {_median(full) * 1000:7.1f} ms"
        if part:
            line += (f", fragment {_median(part) * 1000:7.1f} ms "
                     f"({_median(full) / _median(part):.1f}x less)")
        else:
            line += ", not in a fragment"
        lines.append(line)
    return lines


def profile(at, page: str) -> None:
    _check(at.switch_page(f"views/{page}.py").run())
    _check(at.run())
    profiler = cProfile.Profile()
    original = LocalScriptRunner._run_script

    def run_script(self, rerun_data):  # the script runs in the runner's own thread
        profiler.enable()
        try:
            return original(self, rerun_data)
        finally:
            profiler.disable()

    LocalScriptRunner._run_script = run_script
    try:
        _check(at.run())
    finally:
        LocalScriptRunner._run_script = original
    print(f"full rerun of {page}: {script_seconds() * 1000:.1f} ms of script")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", default="", help="comma-separated parts of page names")
    parser.add_argument("--profile", default="", help="a part of one page's name")
    args = parser.parse_args()
    at = _check(AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run())
    if args.profile:
        [page] = [p for p in CHANGES if args.profile in p]
        profile(at, page)
        return
    wanted = [w for w in args.pages.split(",") if w]
    for page in CHANGES:
        if not wanted or any(w in page for w in wanted):
            for line in measure(at, page, args.repeats):
                print(line, flush=True)


if __name__ == "__main__":
    main()
