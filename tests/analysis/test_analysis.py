"""transformer.analysis.flow against small hand-computed examples (numbers written out literally)."""


import numpy as np
import pytest

from transformer.analysis.flow import (
    attention_rollout,
    drop_tokens,
    has_word_boundaries,
    head_max,
    head_mean,
    merge_subwords,
    normalise_rows,
    simplify_tokens,
    source_to_target_flow,
    word_groups,
    word_starts,
)

# Two layers, two heads, two tokens.
# Head means: A0 = [[.75, .25], [.5, .5]], A1 = [[0, 1], [.5, .5]].
TWO_LAYERS = np.array([
    [[[1.0, 0.0], [1.0, 0.0]], [[0.5, 0.5], [0.0, 1.0]]],
    [[[0.0, 1.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]],
])


def softmax_maps(shape, seed=0, causal=False):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=shape)
    if causal:
        scores = np.where(np.tril(np.ones(shape[-2:], bool)), scores, -np.inf)
    exp = np.exp(scores - scores.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def test_head_mean_and_max():
    np.testing.assert_allclose(head_mean(TWO_LAYERS), [[[0.75, 0.25], [0.5, 0.5]],
                                                       [[0.0, 1.0], [0.5, 0.5]]])
    np.testing.assert_allclose(head_max(TWO_LAYERS), [[[1.0, 0.5], [1.0, 1.0]],
                                                      [[0.0, 1.0], [0.5, 0.5]]])
    with pytest.raises(ValueError, match=r"\(2, 2, 2\)"):
        head_mean(TWO_LAYERS[0])


def test_rollout_without_residual_multiplies_later_layers_on_the_left():
    rollout = attention_rollout(TWO_LAYERS, residual=False)
    assert rollout.shape == (2, 2, 2)
    np.testing.assert_allclose(rollout[0], [[0.75, 0.25], [0.5, 0.5]])
    # A1 @ A0 (A0 @ A1 would be [[.125, .875], [.25, .75]])
    np.testing.assert_allclose(rollout[1], [[0.5, 0.5], [0.625, 0.375]])


def test_rollout_with_residual():
    rollout = attention_rollout(TWO_LAYERS)  # residual=True by default
    # A0' = [[.875, .125], [.25, .75]], A1' = [[.5, .5], [.25, .75]]
    np.testing.assert_allclose(rollout[0], [[0.875, 0.125], [0.25, 0.75]])
    np.testing.assert_allclose(rollout[1], [[0.5625, 0.4375], [0.40625, 0.59375]])


def test_rollout_with_max_over_heads_renormalises_rows():
    rollout = attention_rollout(TWO_LAYERS, residual=False, head_reduce="max")
    np.testing.assert_allclose(rollout[0], [[2 / 3, 1 / 3], [0.5, 0.5]])
    with pytest.raises(ValueError, match="median"):
        attention_rollout(TWO_LAYERS, head_reduce="median")


def test_rollout_rows_sum_to_one_and_causal_structure_is_kept():
    weights = softmax_maps((3, 2, 5, 5), causal=True)
    for residual in (True, False):
        rollout = attention_rollout(weights, residual=residual)
        np.testing.assert_allclose(rollout.sum(-1), 1.0)
        assert np.all(np.triu(rollout, k=1) == 0.0)


def test_rollout_needs_square_maps():
    with pytest.raises(ValueError, match="3 queries and 4 keys"):
        attention_rollout(np.ones((1, 1, 3, 4)) / 4)


ENCODER = np.array([[[[0.5, 0.5], [0.0, 1.0]]]])  # (1, 1, 2, 2)
CROSS = np.array([
    [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]],  # layer 0: C = [[1, 0], [1, 0]]
    [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]],  # layer 1: C = [[.5, .5], [0, 1]]
])


def test_flow_equals_hand_computation():
    np.testing.assert_allclose(source_to_target_flow(ENCODER, CROSS, residual=False),
                               [[0.25, 0.75], [0.0, 1.0]])
    np.testing.assert_allclose(source_to_target_flow(ENCODER, CROSS, layer=0, residual=False),
                               [[0.5, 0.5], [0.5, 0.5]])
    # residual: R_enc = [[.75, .25], [0, 1]]
    flow = source_to_target_flow(ENCODER, CROSS)
    np.testing.assert_allclose(flow, [[0.375, 0.625], [0.0, 1.0]])
    with_decoder = source_to_target_flow(ENCODER, CROSS, decoder_rollout=[[1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_allclose(with_decoder, [[0.375, 0.625], [0.1875, 0.8125]])


def test_flow_rows_sum_to_one_and_shapes_are_checked():
    flow = source_to_target_flow(softmax_maps((2, 4, 6, 6)), softmax_maps((3, 4, 5, 6), seed=1),
                                 layer=1)
    assert flow.shape == (5, 6)
    np.testing.assert_allclose(flow.sum(-1), 1.0)
    with pytest.raises(ValueError, match="5 source keys but the encoder has 6"):
        source_to_target_flow(softmax_maps((2, 4, 6, 6)), softmax_maps((3, 4, 4, 5)))
    with pytest.raises(ValueError, match="layer 3 is out of range for 3"):
        source_to_target_flow(softmax_maps((2, 4, 6, 6)), softmax_maps((3, 4, 5, 6)), layer=3)
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(5, 5\)"):
        source_to_target_flow(softmax_maps((2, 4, 6, 6)), softmax_maps((3, 4, 5, 6)),
                              decoder_rollout=np.eye(2))


W3 = np.array([[0.5, 0.25, 0.25],
               [0.2, 0.3, 0.5],
               [1.0, 0.0, 0.0]])


def test_drop_tokens_renormalises_and_keeps_empty_rows_zero():
    with np.errstate(all="raise"):  # no division by zero anywhere
        kept = drop_tokens(W3, [False, True, True], [False, True, True])
    np.testing.assert_allclose(kept, [[0.375, 0.625], [0.0, 0.0]])
    np.testing.assert_allclose(drop_tokens(W3, [1, 2], [1, 2]), kept)  # indices work too
    np.testing.assert_allclose(drop_tokens(W3, [1, 2], [1, 2], renormalise=False),
                               [[0.3, 0.5], [0.0, 0.0]])
    batched = drop_tokens(np.stack([W3, W3]), [0, 1], [1, 2])  # (..., q, k)
    np.testing.assert_allclose(batched[1], [[0.5, 0.5], [0.375, 0.625]])
    assert drop_tokens(W3, [], [0]).shape == (0, 1)
    with pytest.raises(ValueError, match="shape \\(2,\\) but there are 3"):
        drop_tokens(W3, [True, False], [True, True, True])
    with pytest.raises(ValueError, match="index 3 but there are 3"):
        drop_tokens(W3, [0, 3], [0])


def test_merge_subwords_sums_keys_and_averages_queries():
    merged = merge_subwords(W3, [[0, 1], [2]], [[0, 1], [2]])
    # keys summed: [[.75, .25], [.5, .5], [1, 0]]; queries 0 and 1 averaged
    np.testing.assert_allclose(merged, [[0.625, 0.375], [1.0, 0.0]])
    np.testing.assert_allclose(merged.sum(-1), 1.0)
    # rectangular, groups out of order, batched
    merged = merge_subwords(np.stack([W3[:2], W3[:2]]), [[1], [0]], [[2, 0], [1]])
    np.testing.assert_allclose(merged[0], [[0.7, 0.3], [0.75, 0.25]])


@pytest.mark.parametrize("groups, message", [
    ([[0, 1]], "missing \\[2\\]"),
    ([[0, 1], [1, 2]], "repeated \\[1\\]"),
    ([[0, 1, 2, 3]], "out of range \\[3\\]"),
    ([[0, 1, 2], []], "empty group"),
])
def test_merge_subwords_rejects_bad_groups(groups, message):
    with pytest.raises(ValueError, match=message):
        merge_subwords(W3, groups, [[0], [1], [2]])
    with pytest.raises(ValueError, match=message):
        merge_subwords(W3, [[0], [1], [2]], groups)


def test_word_groups_sentencepiece_convention():
    groups, words = word_groups(["<s>", "▁fri", "day", ",", "▁", "5", "</s>"])
    assert groups == [[0], [1, 2, 3], [4, 5], [6]]
    assert words == ["<s>", "friday,", "5", "</s>"]
    date = ["<s>", "▁friday", ",", "▁march", "▁", "5", ",", "▁", "2", "0", "2", "1", "</s>"]
    assert word_groups(date)[1] == ["<s>", "friday,", "march", "5,", "2021", "</s>"]


def test_word_groups_of_the_hugging_face_families():
    """BART's byte-level BPE starts a word with Ġ (a space before it); the SentencePiece
    families (T5, mBART, ...) with ▁, as Marian's does."""
    from types import SimpleNamespace

    from transformer.tokenizers.huggingface import HFTokenizer

    def hf(family):  # a Hugging Face tokenizer's word_mark is its family record's
        return SimpleNamespace(kind="huggingface", family=family,
                               word_mark=HFTokenizer.word_mark.fget(SimpleNamespace(family=family)))

    bart = hf("bart")
    pieces = ["<s>", "Fri", "day", ",", "\u0120March", "\u0120", "5", "</s>"]
    assert word_groups(pieces, tokenizer=bart) == (
        [[0], [1, 2, 3], [4], [5, 6], [7]], ["<s>", "Friday,", "March", "5", "</s>"])
    t5 = hf("t5")
    assert word_groups(["\u2581a", "b", "\u2581c", "</s>"], tokenizer=t5)[1] == ["ab", "c", "</s>"]


def test_word_groups_edge_cases():
    assert word_groups([]) == ([], [])
    assert word_groups(["a", "b"]) == ([[0, 1]], ["ab"])  # no ▁ first: still one word
    assert word_groups(["<s>", "x", "y"]) == ([[0], [1, 2]], ["<s>", "xy"])  # specials stand alone
    assert word_groups(["▁", "▁b"]) == ([[0, 1]], ["b"])  # a bare ▁ joins the next piece
    assert word_groups(["▁a", "▁", "<unk>"]) == ([[0], [1], [2]], ["a", "▁", "<unk>"])
    assert word_groups(["▁x", "<pad>", "<pad>"], special=("<pad>",)) == (
        [[0], [1], [2]], ["x", "<pad>", "<pad>"])


def test_simplify_tokens_hides_specials_then_merges_words():
    tokens = ["<s>", "▁fri", "day", "▁5", "</s>"]
    weights = normalise_rows(np.arange(1.0, 26.0).reshape(5, 5))
    shown, rows, cols = simplify_tokens(weights, tokens, tokens, hide_special=True,
                                        merge_words=True)
    assert rows == cols == ["friday", "5"]
    expected = merge_subwords(drop_tokens(weights, [1, 2, 3], [1, 2, 3]), [[0, 1], [2]],
                              [[0, 1], [2]])
    np.testing.assert_allclose(shown, expected)
    np.testing.assert_allclose(shown.sum(-1), 1.0)
    shown, rows, cols = simplify_tokens(weights, tokens, tokens)
    np.testing.assert_array_equal(shown, weights)
    assert rows == cols == tokens
    shown, rows, _ = simplify_tokens(weights[None, :1], ["<s>"], tokens, hide_special=True)
    assert shown.shape == (1, 0, 3) and rows == []
    with pytest.raises(ValueError, match="5 query and 4 key"):
        simplify_tokens(weights, tokens, tokens[:4])


class Tok:
    """Stands for a tokenizer of a kind: word boundaries are read from its word_mark only, the
    kind's class's (none for a kind that does not exist)."""

    def __init__(self, kind):
        from transformer.tokenizers import KIND_CLASSES, tokenizer_class

        self.kind = kind
        if kind in KIND_CLASSES:
            self.word_mark = tokenizer_class(kind).word_mark


DATE_TARGET = ["<s>", "▁", "2", "0", "2", "1", "-", "0", "3", "-", "0", "5"]  # the dates model's


def test_word_starts_follow_each_tokenizer_kind():
    pieces = ["<s>", "▁fri", "day", "##s", "▁", "5", "</s>"]
    for kind in ("bpemb", "trained", "marian"):  # SentencePiece: "▁" starts a word
        assert word_starts(Tok(kind), pieces) == [True, True, False, False, True, False, True]
    assert word_starts(Tok("wordpiece"), ["[CLS]", "fri", "##day", ",", "##s"],
                       special=("[CLS]",)) == [True, True, False, True, False]
    assert word_starts(Tok("word"), ["friday", "march", "5"]) == [True, True, True]
    with pytest.raises(ValueError, match="no word convention for tokenizer kind 'bytes'"):
        word_starts(Tok("bytes"), pieces)


def test_word_groups_by_kind():
    assert word_groups(["<s>", "fri", "##day", ",", "5", "</s>"], tokenizer=Tok("wordpiece")) \
        == ([[0], [1, 2], [3], [4], [5]], ["<s>", "friday", ",", "5", "</s>"])
    assert word_groups(["friday", "##x", "5"], tokenizer=Tok("word")) == (
        [[0], [1], [2]], ["friday", "##x", "5"])
    assert word_groups(DATE_TARGET, tokenizer=Tok("trained")) == (
        [[0], list(range(1, 12))], ["<s>", "2021-03-05"])


def test_a_side_without_word_boundaries_is_told_apart():
    assert not has_word_boundaries(Tok("trained"), DATE_TARGET)  # one "▁": one word
    assert has_word_boundaries(Tok("trained"), ["<s>", "▁friday", ",", "▁march", "</s>"])
    assert not has_word_boundaries(Tok("wordpiece"), ["[START]", "20", "##21"],
                                   special=("[START]",))
    assert has_word_boundaries(Tok("word"), ["a", "b"])
    assert not has_word_boundaries(Tok("word"), ["<s>", "a", "</s>"])


def test_simplify_tokens_merges_each_side_with_its_tokenizer_or_not_at_all():
    source = ["<s>", "fri", "##day", "5", "</s>"]  # WordPiece
    weights = normalise_rows(np.arange(1.0, 61.0).reshape(12, 5))  # (target, source)
    shown, rows, cols = simplify_tokens(weights, DATE_TARGET, source, merge_words=(False, True),
                                        query_tokenizer=Tok("trained"),
                                        key_tokenizer=Tok("wordpiece"))
    assert rows == DATE_TARGET and cols == ["<s>", "friday", "5", "</s>"]
    np.testing.assert_allclose(shown, merge_subwords(weights, [[i] for i in range(12)],
                                                     [[0], [1, 2], [3], [4]]))
    assert shown.max() <= 1.0
