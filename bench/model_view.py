"""Size and draw time of the model view (every layer x head) for a long sentence.

    .venv/bin/python bench/model_view.py [--length 200] [--layers 2] [--heads 4] [--repeats 3]
                                         [--no-browser]

A random model with max_len 256 (--layers encoder and decoder layers of --heads heads each:
12 and 16 are nllb-200-distilled-600M's grid) runs one 200-token sentence (random ids) with
return_attention=True; figures.attention_maps.model_view_fig draws its encoder self-attention and its
cross-attention. Prints each figure's JSON size (goal <= 2 MB) and its draw time in headless
Chromium (goal < 2 s): the median time Plotly.newPlot takes to resolve in a page written by
plotly.io.to_html, and the time from navigation until the plot is drawn (parsing plotly.js too).
The same figures without downsampling, and an empty figure (what loading plotly.js alone costs
from navigation), are measured for comparison.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import plotly.io as pio  # noqa: E402

from figures.attention_maps import heatmap_json_size, model_view_fig  # noqa: E402
from testkit.browser import launch_options  # noqa: E402
from transformer import Transformer, TransformerConfig  # noqa: E402

GOAL_MB, GOAL_SECONDS = 2.0, 2.0
# Wraps Plotly.newPlot: the time from the call until its promise resolves (the plot is drawn),
# and from navigation start until then.
TIMER = """<script>
window.__timedNewPlot = function () {
  const start = performance.now();
  return Plotly.newPlot.apply(Plotly, arguments).then(function (gd) {
    window.__draw = {newPlot: (performance.now() - start) / 1000,
                     fromNavigation: performance.now() / 1000};
    return gd;
  });
};
</script>"""


def attention_maps(length: int, layers: int = 2, heads: int = 4, seed: int = 0) -> dict:
    """Encoder and cross attention of one random sentence through a random model."""
    config = TransformerConfig(src_vocab_size=1000, tgt_vocab_size=1000, d_model=16 * heads,
                               num_heads=heads, dff=128, num_encoder_layers=layers,
                               num_decoder_layers=layers, max_len=256)
    model = Transformer(config).build_weights()
    rng = np.random.default_rng(seed)
    src = rng.integers(4, config.src_vocab_size, (1, length)).astype(np.int32)
    tgt = rng.integers(4, config.tgt_vocab_size, (1, length)).astype(np.int32)
    tgt[0, 0] = config.start_id
    out = model((src, tgt), return_attention=True)
    return {"encoder": out["encoder_attention"].numpy()[:, 0],  # (L, H, N, N)
            "cross": out["cross_attention"].numpy()[:, 0],  # (L, H, T, N)
            "source_tokens": [f"s{i}" for i in src[0]],
            "target_tokens": [f"t{i}" for i in tgt[0]]}


def html_page(fig) -> str:
    page = pio.to_html(fig, include_plotlyjs=True, full_html=True, div_id="model-view")
    if page.count("Plotly.newPlot(") != 1:
        raise RuntimeError("expected one Plotly.newPlot call in plotly.io.to_html's page")
    page = page.replace("Plotly.newPlot(", "window.__timedNewPlot(")
    return page.replace("<body>", "<body>" + TIMER, 1)


def draw_seconds(browser, path: Path, repeats: int) -> tuple[float, float]:
    """Median (newPlot, from navigation) seconds over `repeats` fresh page loads."""
    draws, loads = [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(path.as_uri())
        page.wait_for_function("window.__draw !== undefined", timeout=120_000)
        timing = page.evaluate("window.__draw")
        draws.append(timing["newPlot"])
        loads.append(timing["fromNavigation"])
        page.close()
    return float(np.median(draws)), float(np.median(loads))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="sizes only")
    args = parser.parse_args()

    start = time.perf_counter()
    maps = attention_maps(args.length, args.layers, args.heads)
    print(f"forward pass, {args.length} source and target tokens: "
          f"{time.perf_counter() - start:.2f} s")
    figures = {}
    for kind, queries in (("encoder", "source_tokens"), ("cross", "target_tokens")):
        for label, max_cells in (("model view", 64), ("not downsampled", 10**9)):
            start = time.perf_counter()
            fig = model_view_fig(maps[kind], maps[queries], maps["source_tokens"],
                                 selected=(0, 0), max_cells=max_cells)
            shape = "x".join(str(n) for n in maps[kind].shape)
            figures[f"{kind} {label} ({shape})"] = (fig, time.perf_counter() - start)
    figures["empty figure (baseline)"] = (go.Figure(), 0.0)  # plotly.js's own load time

    browser = None
    if not args.no_browser:
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        browser = playwright.chromium.launch(**launch_options())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for index, (name, (fig, build)) in enumerate(figures.items()):
                size_mb = heatmap_json_size(fig) / 2**20
                line = (f"{name:<42}: build {build:.2f} s, JSON {size_mb:.3f} MB "
                        f"({size_mb / GOAL_MB:.2f} x the {GOAL_MB:g} MB goal)")
                if browser is not None:
                    path = Path(tmp) / f"figure{index}.html"
                    path.write_text(html_page(fig), encoding="utf-8")
                    draw, load = draw_seconds(browser, path, args.repeats)
                    line += (f", draw {draw:.3f} s ({draw / GOAL_SECONDS:.2f} x the "
                             f"{GOAL_SECONDS:g} s goal; {load:.2f} s from navigation)")
                print(line, flush=True)
    finally:
        if browser is not None:
            browser.close()
            playwright.stop()


if __name__ == "__main__":
    main()
