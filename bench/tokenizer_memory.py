"""What building a Hugging Face family's tokenizer takes, per vocabulary piece and per BPE merge
(issue 37): the numbers behind limits.TOKENIZER_BYTES_PER_PIECE and TOKENIZER_BYTES_PER_MERGE.

Each case builds one tokenizer (HFTokenizer.from_files, as an upload's is built: the bounded
readers, then the `tokenizers` library) from files made here out of the fixtures' own
(tests/fixtures/nllb's tokenizer.json for BPE, tests/fixtures/t5's for Unigram and its
spiece.model for SentencePiece), grown to the pieces and merges asked, in a fresh process, and
prints the seconds and the peak memory growth (VmHWM, reset just before) against the bytes the
limits allow it. Not part of `make test` (a minute, and it measures).

    .venv/bin/python bench/tokenizer_memory.py
"""

from __future__ import annotations

import itertools
import json
import string
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CASES = (("bpe", 65_536, 0), ("bpe", 262_144, 0), ("bpe", 262_144, 262_144),
         ("bpe", 262_144, 524_288), ("bpe", 262_144, 768_000), ("unigram", 65_536, 0),
         ("unigram", 262_144, 0), ("sentencepiece", 131_072, 0), ("sentencepiece", 262_144, 0))


def status(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) * 1024 for x in f if x.startswith(field + ":"))


def words():
    """Distinct lower-case strings, shortest first (a, b, ..., aa, ab, ...)."""
    for n in itertools.count(1):
        for letters in itertools.product(string.ascii_lowercase, repeat=n):
            yield "".join(letters)


def bpe_files(pieces: int, merges: int) -> tuple[str, dict[str, bytes]]:
    """NLLB's tokenizer.json with `pieces` pieces and `merges` merges (each joins two pieces
    into a third), its added tokens moved past the new pieces."""
    doc = json.loads((FIXTURES / "nllb" / "tokenizer.json").read_bytes())
    base = dict(doc["model"]["vocab"])
    vocab = dict(base)
    for word in words():
        if len(vocab) >= pieces:
            break
        vocab.setdefault(word, len(vocab))
    listed = []
    for word in vocab:
        if len(listed) >= merges:
            break
        listed += [[word[:k], word[k:]] for k in range(1, len(word))
                   if word[:k] in vocab and word[k:] in vocab]
    for token in doc["added_tokens"]:
        if token["id"] >= len(base):
            token["id"] += len(vocab) - len(base)
    doc["model"]["vocab"], doc["model"]["merges"] = vocab, listed[:merges]
    return "nllb", {"tokenizer.json": json.dumps(doc).encode()}


def unigram_files(pieces: int) -> tuple[str, dict[str, bytes]]:
    doc = json.loads((FIXTURES / "t5" / "tokenizer.json").read_bytes())
    vocab = doc["model"]["vocab"]
    have = {piece for piece, _ in vocab}
    for word in words():
        if len(vocab) >= pieces:
            break
        if "▁" + word not in have:
            vocab.append(["▁" + word, -12.0])
    return "t5", {"tokenizer.json": json.dumps(doc).encode()}


def sentencepiece_files(pieces: int) -> tuple[str, dict[str, bytes]]:
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString((FIXTURES / "t5" / "spiece.model").read_bytes())
    have = {p.piece for p in model.pieces}
    extra = 100  # T5's <extra_id_N>, added after the model's pieces
    for word in words():
        if len(model.pieces) + extra >= pieces:
            break
        if "▁" + word not in have:
            piece = model.pieces.add()
            piece.piece, piece.score = "▁" + word, -12.0
    return "t5", {"spiece.model": model.SerializeToString()}


def one(kind: str, pieces: int, merges: int) -> dict:
    """Build the case's tokenizer in this process; what it took."""
    from transformer.tokenizers.huggingface import HFTokenizer

    family, files = (bpe_files(pieces, merges) if kind == "bpe" else
                     unigram_files(pieces) if kind == "unigram" else sentencepiece_files(pieces))
    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    started = time.perf_counter()
    tokenizer = HFTokenizer.from_files(family, files, "source")
    return {"kind": kind, "pieces": tokenizer.vocab_size, "merges": merges,
            "file_bytes": sum(map(len, files.values())),
            "seconds": time.perf_counter() - started, "peak": status("VmHWM") - before}


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    from transformer.core import limits

    print(f"{'tokenizer':14s} {'pieces':>8s} {'merges':>8s} {'file MB':>8s} {'s':>6s} "
          f"{'peak MB':>8s} {'allowed MB':>10s}")
    rows = []
    for kind, pieces, merges in CASES:
        out = subprocess.run([sys.executable, __file__, "--one", kind, str(pieces), str(merges)],
                             capture_output=True, text=True, check=True,
                             env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(r)
        allowed = limits.load_memory_budget(r["file_bytes"], r["pieces"], r["merges"])
        print(f"{kind:14s} {r['pieces']:8,d} {r['merges']:8,d} {r['file_bytes'] / 2**20:8.1f} "
              f"{r['seconds']:6.2f} {r['peak'] / 2**20:8.0f} {allowed / 2**20:10.0f}"
              f"{'' if r['peak'] <= allowed else '  OVER'}", flush=True)
    for kind in ("bpe", "unigram", "sentencepiece"):
        plain = [r for r in rows if r["kind"] == kind and not r["merges"]]
        print(f"{kind}: {max(r['peak'] / r['pieces'] for r in plain):.0f} bytes per piece at the "
              f"peak (largest of {len(plain)}; limits.TOKENIZER_BYTES_PER_PIECE = "
              f"{limits.TOKENIZER_BYTES_PER_PIECE})")
    bpe = sorted((r for r in rows if r["kind"] == "bpe" and r["pieces"] == rows[1]["pieces"]),
                 key=lambda r: r["merges"])
    slopes = [(b["peak"] - a["peak"]) / (b["merges"] - a["merges"]) for a, b in zip(bpe, bpe[1:])]
    print(f"bpe: {max(slopes):.0f} bytes per merge (largest slope of {len(slopes)}; "
          f"limits.TOKENIZER_BYTES_PER_MERGE = {limits.TOKENIZER_BYTES_PER_MERGE})")

if __name__ == "__main__":
    main()
