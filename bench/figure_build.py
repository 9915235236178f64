"""Server time to build the large attention figures and turn them into what st.plotly_chart sends.

    .venv/bin/python bench/figure_build.py [--length 200] [--repeats 5]

A random model (as bench/model_view.py) runs one `--length`-token sentence; each figure is built
from its maps and then turned into the chart's JSON the way st.plotly_chart does it
(plotly.tools.return_figure_from_figure_or_data, then plotly.io.to_json without validation).
Prints the median build and JSON seconds of each, and the same for the bundled model's
13-token default sentence.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
import plotly.io as pio  # noqa: E402
import plotly.tools  # noqa: E402
from model_view import attention_maps  # noqa: E402

from figures.attention import attention_heatmap_fig, linked_view_fig, model_view_fig  # noqa: E402
from figures.token_view import head_colour, token_view_fig  # noqa: E402


def figures(maps: dict) -> dict:
    """{name: a function building the figure} for these maps."""
    src, tgt = maps["source_tokens"], maps["target_tokens"]
    enc, cross, dec = maps["encoder"], maps["cross"], maps.get("decoder")
    n, t = len(src), len(tgt)
    look_ahead = np.triu(np.ones((t, t), bool), 1)
    built = {
        f"attention_heatmap_fig ({n}x{n})": lambda: attention_heatmap_fig(
            enc[0, 0], src, src, title="encoder L0 H0"),
        f"model_view_fig ({'x'.join(map(str, enc.shape))})": lambda: model_view_fig(
            enc, src, src, selected=(1, 2)),
        f"model_view_fig cross ({'x'.join(map(str, cross.shape))})": lambda: model_view_fig(
            cross, tgt, src, selected=(0, 0)),
        f"token_view_fig ({enc.shape[1]} heads, {n}x{n})": lambda: token_view_fig(
            enc[0], src, src, head_labels=[f"head {h}" for h in range(enc.shape[1])],
            colours=[head_colour(h) for h in range(enc.shape[1])]),
    }
    if dec is not None:
        built[f"linked_view_fig ({n} + {t} tokens)"] = lambda: linked_view_fig(
            enc[0, 0], dec[0, 0], cross[0, 0], src, tgt, selected_target=1,
            blocked={"decoder": look_ahead})
    return built


def chart_json(fig) -> str:
    """What st.plotly_chart does with a figure (Streamlit 1.67, elements/plotly_chart.py)."""
    figure = plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True)
    return pio.to_json(figure, validate=False)


def timed(function, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def report(title: str, maps: dict, repeats: int) -> None:
    print(title)
    for name, build in figures(maps).items():
        build_s, fig = timed(build, repeats)
        json_s, spec = timed(lambda: chart_json(fig), repeats)
        print(f"  {name:<40} build {build_s * 1000:7.1f} ms, to the chart's JSON "
              f"{json_s * 1000:7.1f} ms ({len(spec) / 2**20:.2f} MB)", flush=True)


def bundled_maps() -> dict:
    from explorer.state import DEFAULT_SOURCE
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    maps = load_checkpoint(DEFAULT_CHECKPOINT).attention(DEFAULT_SOURCE)
    return {"encoder": maps["encoder"], "cross": maps["cross"], "decoder": maps["decoder"],
            "source_tokens": maps["source_tokens"], "target_tokens": maps["target_tokens"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    maps = attention_maps(args.length)
    causal = np.tril(np.ones(maps["cross"].shape[:3] + (args.length,)))  # (L, H, T, T)
    maps["decoder"] = causal / causal.sum(-1, keepdims=True)  # uniform over the prefix
    report(f"A random model, {args.length} source and target tokens:", maps, args.repeats)
    report("The bundled model, the default sentence:", bundled_maps(), args.repeats)


if __name__ == "__main__":
    main()
