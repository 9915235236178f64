"""Server time to build the large attention figures and turn them into what st.plotly_chart sends.

    .venv/bin/python bench/figure_build.py [--length 200] [--repeats 5]

A random model (as bench/model_view.py) runs one `--length`-token sentence; each figure is built
from its maps and then turned into the chart's JSON the way st.plotly_chart does it
(plotly.tools.return_figure_from_figure_or_data, then plotly.io.to_json without validation).
Prints the median build and JSON seconds of each, and the same for the bundled model's
13-token default sentence; then the other pages' figures (arithmetic, aggregations, masks,
positional encodings, compare heads, decoding, head statistics) for `--length` tokens and a
model of `--layers` x `--heads` heads, from random weights (`--only attention|others` runs one
part).
"""

import argparse
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
ROOT = Path(__file__).resolve().parent.parent

import numpy as np  # noqa: E402
import plotly.io as pio  # noqa: E402
import plotly.tools  # noqa: E402

from bench.model_view import attention_maps  # noqa: E402
from figures import (  # noqa: E402
    aggregate,
    arithmetic,
    compare,
    decoding,
    head_grids,
    mask_maps,
    positional,
)
from figures.attention_maps import attention_heatmap_fig, linked_view_fig, model_view_fig  # noqa: E402
from figures.token_view import head_colour, token_view_fig  # noqa: E402
from transformer.core.kinds import KIND_NAMES, head_label  # noqa: E402


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


def weight_rows(shape, rng) -> np.ndarray:
    weights = rng.random(shape)
    return weights / weights.sum(-1, keepdims=True)


def other_figures(n: int, layers: int, heads: int, seed: int = 0) -> dict:
    """{name: a function building the figure} for the figures of the other pages: n tokens,
    layers x heads heads of each kind, d_model 512 (head_dim 64), random values."""
    rng = np.random.default_rng(seed)
    tokens = [f"▁t{i}" for i in range(n)]
    d_model, head_dim = 512, 64
    look_ahead = np.tril(np.ones((n, n)))  # (q, k), 1 = may attend
    row = n // 2  # a query halfway: half its keys blocked by the look-ahead mask
    q, K, V = rng.normal(size=head_dim), rng.normal(size=(n, head_dim)), rng.normal(
        size=(n, head_dim))
    result = arithmetic.head_arithmetic(q, K, V, look_ahead[row], blocked_score=-1e9)
    dims = arithmetic.dimension_labels(head_dim)
    layer_maps = weight_rows((layers, n, n), rng)  # (L, q, k)
    pe = rng.normal(size=(n, d_model))  # (positions, d_model): stands for the codes
    batch_ids = rng.integers(0, 1000, size=(8, n))
    entries = [{"kind": kind, "layer": layer, "head": head, "delta_log_prob": float(rng.normal())}
               for kind in KIND_NAMES for layer in range(layers)
               for head in range(heads)]
    labels = [head_label(e["kind"], e["layer"], e["head"]) for e in entries]
    steps = weight_rows((heads, n), rng)  # (H, k): one decoding step's cross-attention
    return {
        f"arithmetic.score_steps_fig ({n} keys, half blocked)":
            lambda: arithmetic.score_steps_fig(result, tokens, title="t"),
        f"arithmetic.contributions_fig ({n}x{head_dim})":
            lambda: arithmetic.contributions_fig(result["weighted_values"], result["context"],
                                                 tokens, title="t"),
        f"arithmetic.matrix_fig K ({n}x{head_dim})":
            lambda: arithmetic.matrix_fig(K, tokens, dims, "K", name="K"),
        f"arithmetic.vector_fig q ({head_dim})":
            lambda: arithmetic.vector_fig(q, dims, "q", name="q"),
        f"aggregate.layer_grid_fig ({layers}x{n}x{n})":
            lambda: aggregate.layer_grid_fig(layer_maps, tokens, tokens,
                                             [f"layer {i}" for i in range(layers)], title="t"),
        f"mask_maps.mask_heatmap_fig ({n}x{n})":
            lambda: mask_maps.mask_heatmap_fig(look_ahead, tokens, tokens, "look-ahead"),
        f"mask_maps.batch_mask_fig (8x{n})":
            lambda: mask_maps.batch_mask_fig(np.ones((8, n)), batch_ids,
                                         [tokens] * 8, [f"row {i}" for i in range(8)], "batch"),
        f"mask_maps.masking_row_fig ({n} keys, half blocked)":
            lambda: mask_maps.masking_row_fig(result["scaled"], look_ahead[row], result["weights"],
                                          tokens, "t", blocked_score=-1e9),
        f"positional.positional_heatmap_fig ({n}x{d_model})":
            lambda: positional.positional_heatmap_fig(pe),
        "positional.sinusoids_fig (4 dimensions)":
            lambda: positional.sinusoids_fig(pe, [0, 1, 10, 11]),
        f"positional.similarity_fig ({n}x{n})":
            lambda: positional.similarity_fig(positional.dot_similarity(pe), tokens),
        f"positional.encoder_input_fig (3x{n}x{d_model})":
            lambda: positional.encoder_input_fig(pe, pe, pe + pe, tokens),
        f"compare.side_by_side_fig (3x{n}x{n})":
            lambda: compare.side_by_side_fig(layer_maps[:3], ["a", "b", "c"], tokens, tokens),
        f"compare.difference_fig ({n}x{n})":
            lambda: compare.difference_fig(layer_maps[0], layer_maps[1], tokens, tokens),
        f"compare.importance_fig ({len(entries)} heads)":
            lambda: compare.importance_fig(entries, "t"),
        f"decoding.heads_grid_fig ({heads}x{n})":
            lambda: decoding.heads_grid_fig(steps, tokens, "t"),
        f"decoding.alignment_fig ({n}x{n})":
            lambda: decoding.alignment_fig(layer_maps[0], tokens, tokens, "t"),
        f"head_grids.similarity_matrix_fig ({len(entries)}x{len(entries)})":
            lambda: head_grids.similarity_matrix_fig(
                weight_rows((len(entries), len(entries)), rng), labels, title="t"),
    }


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


def report(title: str, built: dict, repeats: int) -> None:
    print(title)
    for name, build in built.items():
        build_s, fig = timed(build, repeats)
        json_s, spec = timed(lambda: chart_json(fig), repeats)
        print(f"  {name:<40} build {build_s * 1000:7.1f} ms, to the chart's JSON "
              f"{json_s * 1000:7.1f} ms ({len(spec) / 2**20:.2f} MB)", flush=True)


def bundled_maps() -> dict:
    from explorer.state import DEFAULT_SOURCE
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint
    maps = load_checkpoint(DEFAULT_CHECKPOINT).attention(DEFAULT_SOURCE)
    return {key: maps[key] for key in (*KIND_NAMES, "source_tokens", "target_tokens")}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--only", choices=["attention", "others"])
    args = parser.parse_args()
    if args.only != "others":
        maps = attention_maps(args.length)
        causal = np.tril(np.ones(maps["cross"].shape[:3] + (args.length,)))  # (L, H, T, T)
        maps["decoder"] = causal / causal.sum(-1, keepdims=True)  # uniform over the prefix
        report(f"A random model, {args.length} source and target tokens:", figures(maps),
               args.repeats)
        report("The bundled model, the default sentence:", figures(bundled_maps()),
               args.repeats)
    if args.only != "attention":
        report(f"The other pages' figures, {args.length} tokens, {args.layers} x {args.heads} "
               "heads:", other_figures(args.length, args.layers, args.heads), args.repeats)


if __name__ == "__main__":
    main()
