"""The imported families' sinusoid tables against transformers' own: fairseq's (M2M100, NLLB)
and Marian's and Pegasus's [sin | cos]. Live where torch and transformers are installed, and a
recorded check of transformers' values that runs without them."""

import math

import numpy as np
import pytest

from transformer.model.layers import positional_encoding

OFFSET = 2  # M2M100's table starts at pad_id + 1 = 2; transformers builds num_positions + 2 rows

# Recorded with transformers 5.23 / torch 2.13 (x86, AVX2):
# M2M100SinusoidalPositionalEmbedding.get_embedding(4, 8) as float32 bits ...
FAIRSEQ_4_BY_8 = [
    [0, 0, 0, 0, 1065353216, 1065353216, 1065353216, 1065353216],
    [1062693540, 1027476766, 990720356, 953267990, 1057640769, 1065335146, 1065353177, 1065353216],
    [1063831479, 1035851959, 999108942, 961656598, 3201634611, 1065280977, 1065353060, 1065353216],
    [1041269187, 1041113367, 1003735487, 966609232, 3212668966, 1065190824, 1065352866, 1065353215],
]
# ... and get_embedding(1026, 1024)[1025, column]: the columns that NumPy's float32 exp put
# 6e-5 away (one unit in the last place of the frequency, times the position).
FAIRSEQ_1024_ROW_1025 = {30: -0.018264787271618843, 33: -0.020245598629117012,
                         528: -0.0892176479101181, 532: 0.06052248179912567,
                         548: -0.06068576127290726, 550: 0.05691435560584068}


def test_fairseq_sinusoids_equal_recorded_transformers_values():
    table = positional_encoding(4, 8, layout="fairseq")
    expected = np.array(FAIRSEQ_4_BY_8, np.uint32).view(np.float32)
    # torch's cos (MKL's) rounds two of these the other way: one unit in the last place
    np.testing.assert_array_max_ulp(table, expected, maxulp=1)
    row = positional_encoding(1026, 1024, layout="fairseq")[1025]
    for column, value in FAIRSEQ_1024_ROW_1025.items():
        assert abs(float(row[column]) - value) <= 1e-7, column


def test_fairseq_sinusoids_odd_width_ends_with_a_zero_column():
    table = positional_encoding(5, 9, layout="fairseq")
    assert table.shape == (5, 9) and table.dtype == np.float32
    assert not table[:, -1].any()
    np.testing.assert_array_equal(table[:, :8], positional_encoding(5, 8, layout="fairseq"))


@pytest.mark.parametrize("d_model", [1024, 512])
def test_fairseq_sinusoids_equal_transformers_live(d_model):
    torch = pytest.importorskip("torch")
    m2m = pytest.importorskip("transformers.models.m2m_100.modeling_m2m_100")
    max_len = 1024
    expected = m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(
        max_len + OFFSET, d_model).numpy()
    ours = positional_encoding(max_len + OFFSET, d_model, layout="fairseq")
    assert ours.shape == expected.shape and ours.dtype == np.float32
    # transformers' frequencies, and which of them its exp does not round as float64 then float32
    # does (torch's exp is MKL's on x86: within 0.55 units in the last place, not always the
    # nearest float32)
    half = d_model // 2
    exponents = torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1))
    theirs = torch.exp(exponents).numpy()
    nearest = np.exp(exponents.numpy().astype(np.float64)).astype(np.float32)
    np.testing.assert_array_max_ulp(theirs, nearest, maxulp=1)
    off = np.flatnonzero(theirs != nearest)
    assert len(off) <= max(1, half // 50), off  # 4 of 512 and 4 of 256 here
    columns = np.concatenate([off, off + half])
    same = np.setdiff1d(np.arange(d_model), columns)
    # every column of a frequency both compute alike: within 1e-7 (sin and cos to one unit)
    assert np.abs(ours[:, same] - expected[:, same]).max() <= 1e-7
    # the rest: the angles differ by the position times one unit of the frequency, and by one
    # unit of the angle (at most twice that) where the two products round apart
    positions = np.arange(max_len + OFFSET, dtype=np.float64)[:, None]
    bound = 3 * positions * np.spacing(np.tile(theirs[off], 2))[None, :] + 1e-7
    assert (np.abs(ours[:, columns] - expected[:, columns]) <= bound).all()


@pytest.mark.parametrize("family, d_model", [("marian", 1024), ("marian", 512), ("marian", 7),
                                             ("pegasus", 1024), ("pegasus", 512)])
def test_concat_sinusoids_equal_marian_and_pegasus_live(family, d_model):
    pytest.importorskip("torch")
    module = pytest.importorskip(f"transformers.models.{family}.modeling_{family}")
    layer_class = getattr(module, f"{family.capitalize()}SinusoidalPositionalEmbedding")
    max_len = 1024
    expected = layer_class(max_len, d_model).create_weight().numpy()
    np.testing.assert_array_equal(positional_encoding(max_len, d_model, layout="concat"), expected)
