"""transformer.analysis.head_stats against hand-computed examples, and transformer.inference.batch against
OpenedModel.attention run one sentence at a time."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformer.analysis.head_stats import (
    KINDS,
    STATISTICS,
    batch_statistics,
    cluster_order,
    cosine_similarity,
    head_divergence,
    head_labels,
    head_similarity_matrix,
    head_statistics,
    js_divergence,
    statistics_names,
    statistics_table,
)

ROOT = Path(__file__).resolve().parents[2]
EYE = np.eye(3)
UNIFORM = np.full((3, 3), 1 / 3)
PREVIOUS = np.array([[1.0, 0, 0], [1, 0, 0], [0, 1, 0]])  # each query looks one step back
LN3 = 1.0986122886681098


def encoder_maps(*heads, tokens=("<s>", "a", "</s>")):
    """One head per layer: (L, 1, 3, 3) encoder maps of a 3-token source, mask all True."""
    weights = np.stack(heads)[:, None]
    return {"encoder": weights, "encoder_mask": np.ones(weights.shape[-2:], bool),
            "source_tokens": list(tokens)}


def test_diagonal_and_uniform_heads_by_hand():
    stats = head_statistics(encoder_maps(EYE, UNIFORM), "encoder")
    assert set(stats) == set(statistics_names("encoder")) and "alignment" not in stats
    assert all(values.shape == (2, 1) for values in stats.values())
    expected = {  # layer 0: the diagonal head; layer 1: uniform over 3 keys
        "entropy": [0.0, LN3],
        "max_weight": [1.0, 1 / 3],
        "distance": [0.0, 8 / 9],  # rows (0+1+2)/3, (1+0+1)/3, (2+1+0)/3, averaged
        "diagonal": [1.0, 1 / 3],
        "previous": [0.0, 2 / 9],  # row 0 has no previous token
        "next": [0.0, 2 / 9],  # row 2 has no next token
        "special": [2 / 3, 2 / 3],  # keys <s> and </s>
    }
    for name, values in expected.items():
        np.testing.assert_allclose(stats[name][:, 0], values, atol=1e-12, err_msg=name)


def test_previous_token_head_by_hand():
    stats = head_statistics(encoder_maps(PREVIOUS, tokens=("a", "b", "c")), "encoder")
    np.testing.assert_allclose(
        [stats[name][0, 0] for name in ("entropy", "max_weight", "distance", "diagonal",
                                        "previous", "next", "special")],
        [0.0, 1.0, 2 / 3, 1 / 3, 2 / 3, 0.0, 0.0], atol=1e-12)


def test_all_zero_rows_and_padding_queries_are_skipped():
    head = np.array([[1.0, 0, 0], [0, 0, 1], [0, 0, 0]])  # row 2 all zero
    stats = head_statistics(encoder_maps(head, tokens=("a", "b", "c")), "encoder")
    np.testing.assert_allclose([stats["diagonal"][0, 0], stats["distance"][0, 0]], [0.5, 0.5])
    maps = encoder_maps(EYE, tokens=("a", "b", "<pad>"))  # a padding query row is skipped
    maps["encoder"][0, 0, 0] = [0, 1, 0]
    np.testing.assert_allclose(head_statistics(maps, "encoder")["diagonal"][0, 0], 0.5)
    assert np.isnan(head_statistics(encoder_maps(np.zeros((3, 3))), "encoder")["entropy"][0, 0])


def test_cross_attention_alignment_agreement_by_hand():
    heads = np.array([[[1.0, 0, 0], [0, 1, 0]],  # argmax 0, 1
                      [[0.6, 0.4, 0], [0, 0.2, 0.8]],  # argmax 0, 2
                      [[0, 0, 1.0], [0, 1, 0]]])  # argmax 2, 1
    # Consensus (mean of the three): [0.53, 0.13, 0.33] -> 0 and [0, 0.73, 0.27] -> 1.
    maps = {"cross": heads[None], "cross_mask": np.ones((2, 3), bool),
            "source_tokens": ["a", "b", "</s>"], "target_tokens": ["<s>", "x"]}
    stats = head_statistics(maps, "cross")
    assert stats["alignment"].shape == (1, 3)
    np.testing.assert_allclose(stats["alignment"][0], [1.0, 0.5, 0.5])
    # Positions used as indices: target i against source j.
    np.testing.assert_allclose(stats["distance"][0], [0.0, 0.5 * 0.4 + 0.5 * (0.2 * 0 + 0.8), 1.0])
    np.testing.assert_allclose(stats["diagonal"][0], [1.0, 0.5 * 0.6 + 0.5 * 0.2, 0.5])
    np.testing.assert_allclose(stats["special"][0], [0.0, 0.4, 0.5])


def test_decoder_statistics_use_the_causal_mask_and_target_tokens():
    causal = np.tril(np.ones((3, 3), bool))
    head = np.array([[1.0, 0, 0], [0.5, 0.5, 0], [0.25, 0.25, 0.5]])
    maps = {"decoder": head[None, None], "decoder_mask": causal,
            "target_tokens": ["<s>", "1", "2"]}
    stats = head_statistics(maps, "decoder")
    np.testing.assert_allclose(stats["next"][0, 0], 0.0)
    np.testing.assert_allclose(stats["special"][0, 0], (1 + 0.5 + 0.25) / 3)
    np.testing.assert_allclose(stats["entropy"][0, 0], (0 + np.log(2) + 1.5 * np.log(2)) / 3)


def test_batch_statistics_weights_sentences_by_query_rows():
    short = encoder_maps(np.ones((1, 1)), tokens=("a",))  # 1 row: entropy 0, diagonal 1
    long = encoder_maps(np.full((2, 2), 0.5), tokens=("a", "b"))  # 2 rows: ln 2, 0.5
    stats = batch_statistics([short, long], "encoder")
    np.testing.assert_allclose(stats["entropy"][0, 0], 2 * np.log(2) / 3)  # not ln(2) / 2
    np.testing.assert_allclose(stats["diagonal"][0, 0], 2 / 3)
    assert batch_statistics([long], "encoder")["entropy"][0, 0] == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="at least one"):
        batch_statistics([], "encoder")


def test_statistics_table_rows():
    table = statistics_table({"encoder": head_statistics(encoder_maps(EYE, UNIFORM), "encoder")})
    assert [(r["kind"], r["layer"], r["head"]) for r in table] == [("encoder", 0, 0),
                                                                  ("encoder", 1, 0)]
    assert list(table[0]) == ["kind", "layer", "head", *STATISTICS]
    assert table[1]["entropy"] == pytest.approx(LN3) and table[0]["alignment"] is None
    assert isinstance(table[0]["entropy"], float)


def test_js_divergence_by_hand_symmetric_and_bounded():
    assert js_divergence([1.0, 0], [0, 1.0]) == pytest.approx(1.0)
    assert js_divergence([1.0, 0], [0.5, 0.5]) == pytest.approx(0.31127812445913283)
    assert js_divergence([1.0, 0, 0], np.full(3, 1 / 3)) == pytest.approx(0.4591479170272448)
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(5) * 0.3, size=50), rng.dirichlet(np.ones(5) * 0.3, size=50)
    p[:, 0] = 0  # zeros are fine
    d = js_divergence(p, q)
    assert d.shape == (50,) and np.all((d >= 0) & (d <= 1)) and not np.isnan(d).any()
    np.testing.assert_allclose(d, js_divergence(q, p), atol=1e-15)
    np.testing.assert_array_equal(js_divergence(p, p), 0.0)


def test_head_divergence_and_cosine_similarity():
    for head in (EYE, UNIFORM, PREVIOUS):
        assert head_divergence(head, head) == 0.0
        assert cosine_similarity(head, head) == pytest.approx(1.0)
    assert head_divergence(EYE, UNIFORM) == pytest.approx(0.4591479170272448)
    assert head_divergence(EYE, UNIFORM) == head_divergence(UNIFORM, EYE)
    assert cosine_similarity(EYE, UNIFORM) == pytest.approx(1 / np.sqrt(3))
    assert cosine_similarity(EYE, np.zeros((3, 3))) == 0.0
    with pytest.raises(ValueError, match="one shape"):
        head_divergence(EYE, np.eye(2))


def test_head_similarity_matrix_and_cluster_order_group_similar_heads():
    near_eye = 0.9 * EYE + 0.1 * UNIFORM
    near_uniform = 0.9 * UNIFORM + 0.1 * PREVIOUS
    maps = encoder_maps(EYE, UNIFORM)
    maps["encoder"] = np.stack([[EYE, UNIFORM], [near_eye, near_uniform]])  # (2 layers, 2 heads)
    matrix = head_similarity_matrix([maps, maps], "encoder")
    assert matrix.shape == (4, 4) and head_labels("cross", 2, 2) == ["cross L0 H0", "cross L0 H1",
                                                            "cross L1 H0", "cross L1 H1"]
    np.testing.assert_array_equal(np.diag(matrix), 0.0)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[0, 1] == pytest.approx(0.4591479170272448)  # one-hot vs uniform, every row
    order = cluster_order(matrix)
    assert sorted(order) == [0, 1, 2, 3]
    assert abs(order.index(0) - order.index(2)) == 1 and abs(order.index(1) - order.index(3)) == 1
    assert cluster_order(np.zeros((2, 2))) == [0, 1]


def test_head_similarity_is_computed_a_block_of_heads_at_a_time(monkeypatch):
    """Every pair of heads at once made (LH, LH, q, k) float64 values: 44 GB for an NLLB-sized
    model's 192 cross heads at 400 tokens. In blocks of one head the matrix is the same."""
    from transformer.analysis import head_stats

    near_eye = 0.9 * EYE + 0.1 * UNIFORM
    maps = encoder_maps(EYE, UNIFORM)
    maps["encoder"] = np.stack([[EYE, UNIFORM], [near_eye, PREVIOUS]])
    whole = head_similarity_matrix([maps], "encoder")
    monkeypatch.setattr(head_stats, "SIMILARITY_BLOCK_VALUES", 1)  # one head a block
    np.testing.assert_array_equal(head_similarity_matrix([maps], "encoder"), whole)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="kind must be one of"):
        head_statistics(encoder_maps(EYE), "self")
    with pytest.raises(ValueError, match="layers, heads, queries, keys"):
        head_statistics({"encoder": EYE}, "encoder")
    with pytest.raises(ValueError, match="2 key tokens"):
        head_statistics(encoder_maps(EYE, tokens=("a", "b")), "encoder")
    with pytest.raises(ValueError, match="square"):
        cluster_order(np.zeros((2, 3)))


def test_module_loads_without_tensorflow():
    code = (
        "import sys\n"
        "import transformer.analysis.head_stats as module\n"
        "import numpy as np\n"
        "maps = {'encoder': np.eye(2)[None, None], 'source_tokens': ['a', 'b']}\n"
        "assert module.head_statistics(maps, 'encoder')['diagonal'][0, 0] == 1.0\n"
        "assert module.cluster_order(np.ones((3, 3)) - np.eye(3)) is not None\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------- transformer.inference.batch
@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def test_attention_batch_equals_one_by_one(ckpt):
    from transformer.inference.batch import attention_batch

    sources = ["5 Mar 2021", "", "Friday, March 5, 2021", "friday 5 march 2021",
               "the 5th of MARCH, 1999 and then some internationalisation"]
    progress = []
    batched = attention_batch(ckpt, sources, batch_size=2,
                              on_progress=lambda done, total: progress.append((done, total)))
    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert len({len(m["source_tokens"]) for m in batched}) == len(sources)  # different lengths
    for source, got in zip(sources, batched):
        want = ckpt.attention(source)
        assert got.keys() == want.keys()
        for key, value in want.items():
            if isinstance(value, list):
                assert got[key] == value, (source, key)
            else:
                assert got[key].shape == value.shape and got[key].dtype == value.dtype, key
                np.testing.assert_allclose(got[key], value, atol=1e-5, err_msg=f"{source}: {key}")
    assert attention_batch(ckpt, []) == []
    for kind in KINDS:  # the statistics of a batch are those of its sentences pooled
        assert batch_statistics(batched, kind)["entropy"].shape == (2, 4)
