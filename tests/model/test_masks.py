"""transformer.model.masks against hand-written expected arrays (1 = may attend, 0 = blocked)."""

import numpy as np
import pytest
import tensorflow as tf

from transformer import decoder_mask, look_ahead_mask, padding_mask

IDS = [[5, 6, 7, 0, 0], [8, 9, 0, 0, 0], [1, 2, 3, 4, 5]]

# Hand-written: (B, 1, 1, N).
PADDING_EXPECTED = [
    [[[1, 1, 1, 0, 0]]],
    [[[1, 1, 0, 0, 0]]],
    [[[1, 1, 1, 1, 1]]],
]

LOOK_AHEAD_4 = [
    [1, 0, 0, 0],
    [1, 1, 0, 0],
    [1, 1, 1, 0],
    [1, 1, 1, 1],
]

# Hand-written: (B, 1, T, T), query row t sees keys 0..t that are not padding.
DECODER_EXPECTED = [
    [[[1, 0, 0, 0, 0],
      [1, 1, 0, 0, 0],
      [1, 1, 1, 0, 0],
      [1, 1, 1, 0, 0],
      [1, 1, 1, 0, 0]]],
    [[[1, 0, 0, 0, 0],
      [1, 1, 0, 0, 0],
      [1, 1, 0, 0, 0],
      [1, 1, 0, 0, 0],
      [1, 1, 0, 0, 0]]],
    [[[1, 0, 0, 0, 0],
      [1, 1, 0, 0, 0],
      [1, 1, 1, 0, 0],
      [1, 1, 1, 1, 0],
      [1, 1, 1, 1, 1]]],
]


def _as_list(ids):
    return [list(row) for row in ids]


INPUT_KINDS = {
    "list": _as_list,
    "numpy_int64": lambda ids: np.asarray(ids, dtype=np.int64),
    "numpy_int32": lambda ids: np.asarray(ids, dtype=np.int32),
    "tf_int32": lambda ids: tf.constant(ids, dtype=tf.int32),
    "tf_int64": lambda ids: tf.constant(ids, dtype=tf.int64),
}


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_padding_mask_hand_written(kind):
    mask = padding_mask(INPUT_KINDS[kind](IDS))
    array = np.asarray(mask)
    assert array.shape == (3, 1, 1, 5)
    np.testing.assert_array_equal(array, np.array(PADDING_EXPECTED, dtype=array.dtype))


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_padding_mask_nonzero_pad_id(kind):
    # With pad_id=9, the zeros are real tokens and the 9s are padding.
    ids = [[4, 0, 9, 9], [9, 9, 9, 9], [0, 1, 2, 3]]
    mask = np.asarray(padding_mask(INPUT_KINDS[kind](ids), pad_id=9))
    expected = [
        [[[1, 1, 0, 0]]],
        [[[0, 0, 0, 0]]],
        [[[1, 1, 1, 1]]],
    ]
    assert mask.shape == (3, 1, 1, 4)
    np.testing.assert_array_equal(mask, np.array(expected, dtype=mask.dtype))


def test_padding_mask_values_are_exactly_zero_and_one():
    mask = np.asarray(padding_mask(IDS))
    assert set(np.unique(mask).tolist()) == {0.0, 1.0}


@pytest.mark.parametrize(
    "size, expected",
    [
        (1, [[1]]),
        (2, [[1, 0], [1, 1]]),
        (4, LOOK_AHEAD_4),
    ],
)
def test_look_ahead_mask_hand_written(size, expected):
    mask = np.asarray(look_ahead_mask(size))
    assert mask.shape == (size, size)
    np.testing.assert_array_equal(mask, np.array(expected, dtype=mask.dtype))


def test_look_ahead_mask_accepts_numpy_and_tf_sizes():
    for size in (np.int64(4), tf.constant(4)):
        np.testing.assert_array_equal(np.asarray(look_ahead_mask(size)), np.array(LOOK_AHEAD_4))


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_decoder_mask_hand_written(kind):
    mask = np.asarray(decoder_mask(INPUT_KINDS[kind](IDS)))
    assert mask.shape == (3, 1, 5, 5)
    np.testing.assert_array_equal(mask, np.array(DECODER_EXPECTED, dtype=mask.dtype))


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_decoder_mask_nonzero_pad_id(kind):
    ids = [[1, 0, 7, 7], [1, 7, 7, 7]]  # pad_id=7: token 0 is real
    mask = np.asarray(decoder_mask(INPUT_KINDS[kind](ids), pad_id=7))
    expected = [
        [[[1, 0, 0, 0],
          [1, 1, 0, 0],
          [1, 1, 0, 0],
          [1, 1, 0, 0]]],
        [[[1, 0, 0, 0],
          [1, 0, 0, 0],
          [1, 0, 0, 0],
          [1, 0, 0, 0]]],
    ]
    assert mask.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(mask, np.array(expected, dtype=mask.dtype))


def test_decoder_mask_inside_tf_function_with_unknown_length():
    fn = tf.function(
        lambda ids: decoder_mask(ids),
        input_signature=[tf.TensorSpec((None, None), tf.int32)],
    )
    mask = np.asarray(fn(tf.constant(IDS, tf.int32)))
    np.testing.assert_array_equal(mask, np.array(DECODER_EXPECTED, dtype=mask.dtype))


def test_masks_broadcast_to_attention_shapes():
    # (B, 1, 1, N) and (B, 1, T, T) must broadcast against (B, heads, Tq, Tk).
    scores = np.zeros((3, 2, 5, 5), np.float32)
    assert (scores * np.asarray(padding_mask(IDS))).shape == (3, 2, 5, 5)
    assert (scores * np.asarray(decoder_mask(IDS))).shape == (3, 2, 5, 5)
