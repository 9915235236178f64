"""The bounded readers of tokenizer files (transformer.tokenizers.hf_files) refuse a file whose
counts are beyond the limits before they build its values (issue 26: every new file a user can
hand us is untrusted data), and still read files of the real models' sizes (BART's 50,000 merges,
NLLB-200's 256,204 pieces)."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest

from transformer.core import limits
from transformer.tokenizers import hf_files
from transformer.tokenizers.base import TokenizerError
from transformer.tokenizers.hf_files import read_merges_txt, read_tokenizer_config, read_tokenizer_json


def measured(call):
    """(the TokenizerError call raises, seconds, peak bytes traced while it ran)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TokenizerError) as refused:
            call()
        return str(refused.value), time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bpe(vocab: dict, merges=(), **doc) -> bytes:
    return json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": list(merges)},
                       **doc}).encode()


def unigram(pieces: list) -> bytes:
    return json.dumps({"model": {"type": "Unigram", "vocab": pieces, "unk_id": 0}}).encode()


# ------------------------------------------------------------------ merges.txt

def test_a_million_merges_are_refused_on_their_line_count_before_the_text_is_split():
    data = b"#version: 0.2\n" + b"".join(b"q%x z%x\n" % (i, i) for i in range(1_000_000))
    message, seconds, peak = measured(lambda: read_merges_txt(data, {"q0": 0}))
    assert message == ("merges.txt: 1,000,000 lines of merges, more than the 262,144 merges "
                       "allowed (a merges.txt makes one piece per merge, and a vocabulary has "
                       "at most 262,144)")
    assert seconds < 1.0
    assert peak < 2**20  # nothing in proportion to the lines: no text, no list of lines


def test_merges_over_a_lowered_bound_are_refused_naming_the_count(monkeypatch):
    monkeypatch.setattr(hf_files, "MAX_MERGES_TXT", 100)
    vocab = {"a": 0, "b": 1, "ab": 2}
    assert read_merges_txt(b"#version: 0.2\n" + b"a b\n" * 100, vocab) == [("a", "b")] * 100
    assert read_merges_txt(b"a b\n" * 99 + b"a b", vocab) == [("a", "b")] * 100  # no final \n
    with pytest.raises(TokenizerError, match=r"^merges\.txt: 101 lines of merges, more than the "
                                             r"100 merges allowed"):
        read_merges_txt(b"#version: 0.2\n" + b"a b\n" * 101, vocab)


def test_a_merge_outside_the_vocabulary_is_refused_as_it_is_read():
    data = b"#version: 0.2\na b\nq z\n" + b"a b\n" * 200_000
    message, seconds, _ = measured(lambda: read_merges_txt(data, {"a": 0, "b": 1, "ab": 2}))
    assert message == "merges.txt: merge 1 ('q' 'z') uses 'q', which is not in the vocabulary"
    assert seconds < 1.0


def test_bart_sized_merges_still_open():
    pieces = [f"p{i}" for i in range(50_000)]
    vocab = {p: i for i, p in enumerate(pieces + [p + "x" for p in pieces] + ["x"])}
    data = ("#version: 0.2\n" + "".join(f"{p} x\n" for p in pieces)).encode()
    assert len(read_merges_txt(data, vocab)) == 50_000


# ------------------------------------------------------------------ tokenizer.json

def test_a_million_entry_bpe_vocabulary_is_refused_on_its_keys_before_parsing():
    data = b'{"model": {"type": "BPE", "merges": [], "vocab": {' + b",".join(
        b'"zz%x": %d' % (i, i) for i in range(1_000_000)) + b"}}}"
    message, seconds, peak = measured(lambda: read_tokenizer_json(data))
    assert message == ("tokenizer.json: holds 1,000,004 keys, more than the 295,936 a "
                       "vocabulary of 262,144 pieces with 1,048,576 merges and 4,096 added "
                       "tokens needs")  # the million pieces, "model", "type", "merges", "vocab"
    assert seconds < 1.5
    assert peak < 3 * len(data)  # json.loads of it grows by ~200 MB


def test_a_million_entry_unigram_vocabulary_is_refused_on_its_numbers_before_parsing():
    data = b'{"model": {"type": "Unigram", "vocab": [' + b",".join(
        b'["zz%x", -20.0]' % i for i in range(1_000_000)) + b"]}}"
    message, seconds, peak = measured(lambda: read_tokenizer_json(data))
    assert message.startswith("tokenizer.json: holds 1,000,000 numbers, more than the 271,360 "
                              "a vocabulary of 262,144 pieces")
    assert seconds < 1.5
    assert peak < 3 * len(data)


@pytest.mark.parametrize("bound, data, what", [
    ("MAX_JSON_KEYS", bpe({f"p{i}": i for i in range(40)}), "keys"),
    ("MAX_JSON_KEYS", bpe({f"p{i}": f"s{i}" for i in range(40)}), "keys"),  # not ids: still keys
    ("MAX_JSON_NUMBERS", unigram([[f"p{i}", -1.5] for i in range(40)]), "numbers"),
    ("MAX_JSON_NUMBERS", b'{"model": [' + b", ".join([b"NaN", b"-Infinity", b"1e5"] * 14)
     + b"]}", "numbers"),
    ("MAX_JSON_ARRAYS", unigram([[f"p{i}", [1]] for i in range(20)]), "arrays"),
    ("MAX_JSON_ARRAYS", bpe({"a": 0}, [["a", "b"]] * 40), "arrays"),
    ("MAX_JSON_OBJECTS", b'{"model": [' + b", ".join([b"{}"] * 40) + b"]}", "objects"),
    ("MAX_JSON_LITERALS", b'{"model": [' + b",".join([b"null", b"true", b"false"] * 14) + b"]}",
     "true, false or null values"),
    ("MAX_JSON_STRINGS", bpe({"a": 0}, ["a b"] * 40), "strings"),
])
def test_each_kind_of_value_is_counted_against_its_bound(monkeypatch, bound, data, what):
    monkeypatch.setattr(hf_files, bound, 30)
    with pytest.raises(TokenizerError, match=rf"^tokenizer\.json: holds \d+ {what}, more than "
                                             rf"the 30 "):
        read_tokenizer_json(data)


def test_what_is_inside_strings_is_not_counted(monkeypatch):
    for bound in ("MAX_JSON_KEYS", "MAX_JSON_ARRAYS", "MAX_JSON_OBJECTS", "MAX_JSON_NUMBERS",
                  "MAX_JSON_LITERALS"):
        monkeypatch.setattr(hf_files, bound, {"MAX_JSON_KEYS": 2, "MAX_JSON_OBJECTS": 1}.get(bound, 0))
    tricky = 'a:[{1, true, "x": [\\"q\\\\'  # colons, brackets, escaped quotes, a backslash
    data = json.dumps({"tokenizer_class": tricky, "src_lang": '\\":[{,1'}).encode()
    assert read_tokenizer_config(data)["family"] is None


def test_an_unclosed_string_hides_nothing_json_loads_would_build(monkeypatch):
    monkeypatch.setattr(hf_files, "MAX_JSON_KEYS", 5)
    data = b'{"model": {' + b", ".join(b'"p%d": %d' % (i, i) for i in range(10)) + b', "x'
    with pytest.raises(TokenizerError, match="holds 11 keys, more than the 5"):
        read_tokenizer_json(data)


def test_nllb_sized_vocabulary_still_opens():
    pieces = 256_204
    vocab = {f"\u2581p{i:x}": i for i in range(pieces)}
    added = [{"id": i, "content": f"\u2581p{i:x}", "special": True} for i in range(206)]
    data = bpe(vocab, added_tokens=added, version="1.0", truncation=None, padding=None)
    start = time.perf_counter()
    read = read_tokenizer_json(data)
    assert len(read.vocab) == pieces and len(read.added_tokens) == 206
    assert time.perf_counter() - start < 2.0
    assert pieces + 8 * 206 < hf_files.MAX_JSON_KEYS and limits.MAX_VOCAB < hf_files.MAX_JSON_KEYS


# ------------------------------------------------------------------ the checks' fast paths

def _outside_one_by_one(data: bytes) -> bytes:
    """The bytes outside strings as the scan defines them, written out plainly: escape pairs
    blanked left to right, quotes' parity, then the spaces dropped."""
    data = data.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    out, inside = bytearray(), False
    for byte in data:
        if byte == ord('"'):
            inside = not inside
        if not inside and byte not in b" \t\n\r":
            out.append(byte)
    return bytes(out)


@pytest.mark.parametrize("data", [
    b'{"a": [1, "b c", "d\\"e"], "f\\\\": {"g": null}}',
    b'["x\\ ", "y"] ',  # a backslash before a space: the spaces go after the escapes are blanked
    b'"\\\\ \\" \t"  :  [ "\\\t\\\\\\"" ]',
    b'{"\xe2\x96\x81a": 1,\n  "b\\u0020": [\n "c d" ,\r\n true ]}',
    b'"unclosed \\" : [ {',
])
def test_the_scan_deletes_spaces_and_blanks_escapes_as_it_did_one_by_one(data):
    assert hf_files._outside_strings(data).tobytes() == _outside_one_by_one(data)


@pytest.mark.parametrize("merges, message", [
    ([["a", "b"], "b a"], None),  # lists and strings mixed: read merge by merge, as before
    ([["a", "b"], ["a", 1]], r"merge 1 must be 'a b' or \[a, b\], got \['a', 1\]"),
    ([["a", "b"], ["a", ["b"]]], r"merge 1 must be 'a b' or \[a, b\]"),
    (["a b", "a b c"], "merge 1 must be 'a b' or"),
    ([["a", "b"], ["zz", "a"]], r"merge 1 \('zz' 'a'\) uses 'zz', which is not in the vocabulary"),
    ([["a", "b"], ["b", "b"]], r"merge 1 \('b' 'b'\) uses 'bb', which is not in the vocabulary"),
    (["a b", "b zz"], r"merge 1 \('b' 'zz'\) uses 'zz'"),
])
def test_merges_are_checked_whole_and_the_first_bad_one_named(merges, message):
    data = bpe({"a": 0, "b": 1, "ab": 2, "ba": 3}, merges)
    if message is None:
        assert read_tokenizer_json(data).merges == [("a", "b"), ("b", "a")]
    else:
        with pytest.raises(TokenizerError, match=rf"^tokenizer\.json: {message}"):
            read_tokenizer_json(data)


@pytest.mark.parametrize("entry, message", [
    (["x", -3], None),  # an int score is read as a float
    (["x", True], "vocab entry 1 must be"),
    (["x", "1.0"], "vocab entry 1 must be"),
    (["x"], "vocab entry 1 must be"),
    ([7, -1.0], "vocab entry 1 must be"),
    ("x", "vocab entry 1 must be"),
    (["x", 10**400], "vocab entry 1 must be"),  # past a float's range (was an OverflowError)
])
def test_unigram_entries_are_checked_whole_and_the_first_bad_one_named(entry, message):
    data = unigram([["<unk>", 0.0], entry, ["y", -1.5]])
    if message is None:
        read = read_tokenizer_json(data)
        assert read.vocab == [("<unk>", 0.0), ("x", -3.0), ("y", -1.5)]
        assert all(type(score) is float for _, score in read.vocab)
    else:
        with pytest.raises(TokenizerError, match=message):
            read_tokenizer_json(data)
    with pytest.raises(TokenizerError, match="vocab entry 1 must be"):
        read_tokenizer_json(unigram([["<unk>", 0.0], ["x", 1.0]]).replace(b"1.0", b"NaN"))
