"""transformer.training.report: the held-out report's per-format rows as the Model page shows
them, from a trained checkpoint's metadata or from anyone's."""

from transformer.training.report import MAX_CHARS, MAX_ROWS, per_format_rows

GOOD = {"format": "iso", "example": "2020-05-01", "exact_match": 0.995, "num_examples": 200}


def test_rows_of_a_trained_checkpoint():
    metadata = {"held_out": {"exact_match": 1.0, "per_format": [
        GOOD, {**GOOD, "format": "mon_d_y", "example": "Sept 11, 2001", "exact_match": 1}]}}
    assert per_format_rows(metadata) == [
        {"format": "iso", "example": "2020-05-01", "exact match": 0.995, "examples": 200},
        {"format": "mon_d_y", "example": "Sept 11, 2001", "exact match": 1.0, "examples": 200}]


def test_no_rows_without_a_per_format_report():
    for metadata in ({}, {"held_out": {"exact_match": 1.0}}, {"held_out": "perfect"},
                     {"held_out": {"per_format": "all of them"}}, None, []):
        assert per_format_rows(metadata) == []


def test_unusable_rows_are_left_out_and_long_text_cut():
    bad = [None, "iso", {**GOOD, "format": 3}, {**GOOD, "exact_match": 1.5},
           {**GOOD, "exact_match": float("nan")}, {**GOOD, "exact_match": True},
           {**GOOD, "num_examples": -1}, {**GOOD, "num_examples": 2.5},
           {**GOOD, "num_examples": "200"}]
    rows = per_format_rows({"held_out": {"per_format": [*bad, {**GOOD, "example": 7},
                                                         {**GOOD, "format": "x" * 1000}]}})
    assert rows == [{"format": "iso", "example": "", "exact match": 0.995, "examples": 200},
                    {"format": "x" * MAX_CHARS, "example": "2020-05-01", "exact match": 0.995,
                     "examples": 200}]
    assert len(per_format_rows({"held_out": {"per_format": [GOOD] * 10_000}})) == MAX_ROWS
