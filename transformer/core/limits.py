"""Every limit on what one uploaded checkpoint may make the server do, in one place.

A checkpoint is data from a stranger. Each number below bounds one resource that a hostile file
could otherwise spend: bytes read, bytes allocated, entries parsed, layers built, positions
tabulated, decoding steps and decoding seconds, ids read from typed text and the memory of the
attention maps one request computes. transformer.checkpoint.format and
transformer.checkpoint.archive import them from here (and transformer.checkpoint.format
re-exports the MAX_* names it always had).

What one load may take, in memory, follows from them: the file itself, its members unpacked
(at most `load_budget(file size)` bytes, checked from the archive's directory before anything
is unpacked) and the model the config declares, which must be the size of the weights the file
holds (checked from the .npy headers before the model is built). So one load grows memory by at
most file + 2 x load_budget(file) plus TensorFlow's fixed overhead, and refusals stop before the
model is built.

What one request may take, whatever max_len a checkpoint declares: its (L, H, T, T) attention
maps grow with the square of the length, so a typed source or target is cut to
`token_budget(config)` ids and a translation stops at `step_budget(config)` tokens; both keep
the maps of one request within MAX_MAPS_BYTES for the model's layers and heads (a model fed a
fixed source length beyond it is refused at load).

What one open and one request may take in time follows from the work a config implies, checked
from the config before anything is built: tracing and compiling grow with the layers whatever
their width (MAX_TOTAL_LAYERS), the arithmetic of one pass with layers x width x length
(pass_flops: the token and step budgets keep it within MAX_PASS_FLOPS, and a model fed every
source padded beyond that is refused), and a translation stops after MAX_DECODE_SECONDS.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

MB = 2**20

# ---------------------------------------------------------------- the file and its archive
MAX_FILE_BYTES = 400 * MB  # the archive as uploaded: = server.maxUploadSize (MB) in .streamlit
MAX_MEMBERS = 64  # files in the checkpoint's ZIP: it has 8; a bigger directory is not ours
MAX_DIRECTORY_BYTES = 64 * 2**10  # the checkpoint's ZIP directory: 8 short names need ~1 KB
MAX_MEMBER_BYTES = 1024 * MB  # one member unpacked (the weights): a 250M-parameter model
MAX_TOTAL_BYTES = 2048 * MB  # all members unpacked together
MAX_JSON_BYTES = 1 * MB  # one .json member: settings, tokenizer specs, metadata with curves
MAX_TOKENIZER_BYTES = 64 * MB  # one SentencePiece model: a 250k-piece vocabulary is ~5 MB
MAX_COMPRESSION_RATIO = 200  # float32 weights deflate ~1.1x; a member >1 MB packed 200x is a bomb
RATIO_CHECKED_ABOVE = 1 * MB  # small members (JSON of zeros, tiny models) may compress better
LOAD_BUDGET_FLOOR = 64 * MB  # unpacked bytes any file may use, however small it is
LOAD_BUDGET_PER_FILE_BYTE = 3  # beyond the floor: unpacked bytes per byte of the file (~1.1 real)
MAX_ZIP_VERSION = 45  # "version needed to extract" 4.5 (zip64 extras, which NumPy's savez writes)
READ_CHUNK_BYTES = 64 * 2**10  # compressed bytes fed to zlib at a time (bounds one step's output)

# ---------------------------------------------------------------- the weights (.npz inside)
MAX_WEIGHTS = 4096  # arrays in weights.npz: 12 + 12 layers of a pre-LN model hold ~500
MAX_WEIGHTS_DIRECTORY_BYTES = 1 * MB  # its ZIP directory: ~4,096 entries of ~200 bytes
MAX_NPY_HEADER_BYTES = 10_000  # one .npy header (NumPy's own default for untrusted files)

# ---------------------------------------------------------------- JSON members
MAX_JSON_DEPTH = 32  # nesting of any JSON member; ours are at most 3 deep
MAX_METADATA_LIST = 100_000  # entries of one metadata list (a training curve of 100k epochs)
MAX_METADATA_STRING = 100_000  # characters of one metadata string (the training command)
MAX_EXAMPLES = 64  # example sentences offered by the sidebar
MAX_EXAMPLE_CHARS = 1_000  # characters of one example sentence

# ---------------------------------------------------------------- the config, at load time
MAX_LAYERS = 12  # encoder or decoder layers: every layer is a page row and a Python loop
MAX_TOTAL_LAYERS = 16  # encoder + decoder layers. Whatever its width, each layer costs time to
# trace and compile, once for each compiled function a first page runs (the decode loop, the
# pages' pass): about 0.2 s each on 2 cores (measured at width 8 to a first translation and its
# maps: 6 + 6 layers 0.8 s to open + 2.5 s + 2.3 s, 12 + 12 layers 1.6 + 5.2 + 4.8 s), so 16
# layers stay within about 8 s. 64 + 64 layers of width 5 took 14 s to open and 48 s to
# translate a first sentence. Real models under the upload limit have at most 8 + 8 (t5-small
# and opus-mt 6 + 6, flan-t5-small 8 + 8).
MAX_VOCAB = 262_144  # pieces of one vocabulary: NLLB-200 has 256,206, mT5 250,112; a tokenizer
# of a million pieces took 30 s and 1.5 GB to build
MAX_UNIGRAM_PIECE_CHARS = 128  # a Unigram piece's characters: the lattice tries every piece
# length at every position of a text, so 100,000 typed characters cost 0.8 s at 128 and 40 s
# with pieces of 2,000; SentencePiece trains pieces of at most 16 (max_sentencepiece_length)
MIN_POSITIONS = 4  # max_len: <s>, one piece and </s> must fit, and a decoder step after <s>
MAX_POSITIONS = 16384  # max_len: the sinusoid table is max_len x d_model floats no weight holds
MAX_HEADS = 256  # num_heads costs no weights (16 heads of 1); (L, H, T, T) maps grow with it
# Vocabulary sizes, d_model, dff and head_dim need no limit of their own: each is a weight's
# dimension, so the weights the file holds (within the load budget) bound them.
PROBE_LENGTH = 16  # ids per probe row at load (min(max_len, this)): a short sentence (64 cost
# pegasus-xsum's load 1.4 s, 16 0.6 s; the bound of transformer.model.bounds covers every input)
PROBE_ROWS = 2  # probe rows: one full-length row of spread-out ids, one short padded row

# ---------------------------------------------------------------- decoding in the app
MAX_DECODE_STEPS = 512  # tokens one translation may emit, whatever max_len says: a model that
# never emits its end token stops here (the app says when it was reached)
MAX_DECODE_SECONDS = 10.0  # seconds one translation may take: no step starts after them (checked
# inside the compiled decode loop), so a huge model that never ends holds the server's CPU about
# this long plus one step; the app says when a translation stopped here

# ---------------------------------------------------------------- typed text and attention maps
MAX_INPUT_TOKENS = 512  # ids of a typed source or target, whatever max_len says: the step budget,
# so a typed target may be as long as the longest translation; the app says when it cut a text
MAX_MAPS_BYTES = 256 * MB  # what the attention maps of one request may take at their peak
MAPS_COPIES = 5  # peak memory of one pass with details, in float32 maps of one pass (every kind,
# layer and head): its weights and scores, TensorFlow's and NumPy's copies (measured 4.3 to 5.0;
# a greedy translation keeping every step's attention, 2.3)
MAPS_COPIES_PER_BEAM = 2.5  # the same for a beam search, per hypothesis kept (measured 2.3)
MAX_PASS_FLOPS = 1.5e11  # arithmetic of one pass over a source and a target (pass_flops): about
# 4 s at the ~40 GFLOP/s two cores reach; opus-mt (6 + 6 layers of 512, 59,514 pieces) needs
# 8.6e10 at 512 + 512 ids, so only wider models read less than MAX_INPUT_TOKENS for it


def load_budget(file_bytes: int) -> int:
    """How many unpacked bytes one load of a file of this size may read (all members)."""
    return min(MAX_TOTAL_BYTES, LOAD_BUDGET_FLOOR + LOAD_BUDGET_PER_FILE_BYTE * file_bytes)


# ---------------------------------------------------------------- the memory one load may take
# What the README promises and the fuzzer checks on every case, opened or refused (its children
# measure the peak growth): 3 x the bytes of the files + 128 MB (a valid file of each format
# grows it by 17 to 33 MB beyond what importing TensorFlow takes), plus what a tokenizer built
# from a vocabulary takes per piece and per BPE merge. That is not proportional to the bytes: a
# piece of 3 characters is 8 bytes of tokenizer.json, but the parsed entry, the `tokenizers`
# library's two maps of it and its added-token matcher are hundreds. Measured at the peak of
# building one (bench/tokenizer_memory.py, 2026-11-27, 65,536 to 262,144 pieces, 0 to 768,000
# merges): at most 671 bytes per piece (BPE tokenizer.json), 898 (Unigram tokenizer.json), 942
# (a SentencePiece model), 455 per merge; the budget allows about a third more (malloc's arenas
# and the Python objects' sizes vary from run to run and version to version).
LOAD_MEMORY_PER_FILE_BYTE = 3
LOAD_MEMORY_ALLOWANCE = 128 * MB
TOKENIZER_BYTES_PER_PIECE = 1280
TOKENIZER_BYTES_PER_MERGE = 640


def load_memory_budget(file_bytes: int, pieces: int = 0, merges: int = 0) -> int:
    """How much one load of files of file_bytes bytes may grow memory by, when its tokenizers
    hold `pieces` vocabulary pieces and `merges` BPE merges (each side's own: a target that
    shares the source's vocabulary counts once)."""
    return (LOAD_MEMORY_PER_FILE_BYTE * file_bytes + LOAD_MEMORY_ALLOWANCE
            + TOKENIZER_BYTES_PER_PIECE * pieces + TOKENIZER_BYTES_PER_MERGE * merges)


# ---------------------------------------------------------------- two kinds of source
@dataclass(frozen=True)
class Budgets:
    """What one opened model may make the server do, by who gave it.

    UPLOAD: a file a stranger sent through the browser, held to every limit above.
    named_budgets(): a model the person running the server named (a folder, a Hugging Face name:
    `load_checkpoint(NAME_OR_DIR)`, `--model`, the sidebar box on a local server). Still data,
    read by the same bounded readers, but its budgets come from the machine: the memory the load
    will take (load_bytes, from config.json before any weight is read) against the memory
    available, the model's own positions for typed text, its own
    lengths for translations; no fixed time cut (a translation shows progress)."""
    source: str  # "upload" or "named"
    weights_bytes: int  # all weight files together, as stored (safetensors, shards, tf_model.h5)
    layers: int  # encoder or decoder layers
    total_layers: int  # encoder + decoder layers
    maps_bytes: int  # the attention maps of one request at their peak
    input_tokens: int  # ids of one typed source or target
    decode_steps: int  # tokens one translation may emit
    decode_seconds: float  # seconds one translation may take (math.inf: none)
    pass_flops: float  # arithmetic of one pass
    memory_bytes: int = 0  # what a load may grow the process by (named: the memory available)

    @property
    def named(self) -> bool:
        return self.source == "named"


UPLOAD = Budgets("upload", MAX_MEMBER_BYTES, MAX_LAYERS, MAX_TOTAL_LAYERS, MAX_MAPS_BYTES,
                 MAX_INPUT_TOKENS, MAX_DECODE_STEPS, MAX_DECODE_SECONDS, MAX_PASS_FLOPS)
NAMED_MAX_LAYERS = 64  # encoder or decoder layers of a named model: flan-t5-xxl has 24 + 24; every
# layer is a row of the pages' grids
NAMED_MAPS_SHARE = 4  # a request's maps may take a quarter of the memory available after the load
NAMED_MAX_MAPS_BYTES = 8 * 1024 * MB  # ... and at most this, however big the machine


def meminfo_bytes(field: str) -> int | None:
    """A /proc/meminfo field ("MemAvailable", "MemFree") in bytes, or None where it cannot be
    read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_available() -> int:
    """Bytes the kernel says can be allocated without swapping (/proc/meminfo's MemAvailable),
    or total physical memory where that is not readable."""
    available = meminfo_bytes("MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4096 * MB


def named_budgets(available: int | None = None) -> Budgets:
    """The budgets of a model the person running the server named, from the memory available
    now (bytes; /proc/meminfo by default)."""
    available = memory_available() if available is None else int(available)
    return Budgets("named", weights_bytes=available, layers=NAMED_MAX_LAYERS,
                   total_layers=2 * NAMED_MAX_LAYERS,
                   maps_bytes=max(MAX_MAPS_BYTES, min(NAMED_MAX_MAPS_BYTES,
                                                      available // NAMED_MAPS_SHARE)),
                   input_tokens=MAX_POSITIONS, decode_steps=MAX_POSITIONS,
                   decode_seconds=math.inf, pass_flops=math.inf, memory_bytes=available)


def maps_bytes(config, length: int) -> int:
    """Bytes of the float32 attention maps of one pass whose source and target both have
    `length` ids: encoder (L_enc, H, N, N), decoder (L_dec, H, T, T), cross (L_dec, H, T, N)."""
    layers = config.num_encoder_layers + 2 * config.num_decoder_layers
    return 4 * layers * config.num_heads * length * length


def maps_copies(beam_width: int = 1) -> float:
    """How many maps of one pass a request holds at its peak: a pass with details, or a beam
    search of beam_width hypotheses (each keeps its own attention), whichever is more."""
    return max(MAPS_COPIES, MAPS_COPIES_PER_BEAM * beam_width)


def maps_length(config, beam_width: int = 1, budgets: Budgets = UPLOAD) -> int:
    """The longest source and target (in ids) whose maps fit budgets.maps_bytes at their peak
    (see maps_copies), never below MIN_POSITIONS: a model with the most layers and heads allowed
    still reads <s>, a piece and </s>."""
    per_id2 = maps_copies(beam_width) * maps_bytes(config, 1)  # bytes per length squared
    return max(MIN_POSITIONS, int((budgets.maps_bytes / per_id2) ** 0.5))


def pass_flops(config, length: int) -> float:
    """Multiply-adds x 2 of one teacher-forced pass whose source and target both have `length`
    ids (a translation of `length` steps with the cache costs about the same): per id and layer
    the projections (q, k, v, output), the scores and weighted sum over `length` keys and the
    feed-forward (three projections when gated, T5 v1.1's); per target id the output
    projection. Arithmetic on config values only (no array is formed), in floats: nothing
    overflows."""
    d, inner, n = float(config.d_model), float(config.num_heads * config.head_dim), float(length)
    attention = 2 * (3 * d * inner + inner * d) + 2 * 2 * n * inner  # (per query id)
    ffn = (3 if getattr(config, "feedforward", "dense") == "gated" else 2) * 2 * d * config.dff
    per_id = (config.num_encoder_layers * (attention + ffn)
              + config.num_decoder_layers * (2 * attention + ffn)
              + 2 * d * config.tgt_vocab_size)
    return n * per_id


def flops_length(config, budgets: Budgets = UPLOAD) -> int:
    """The longest source and target (in ids) whose pass stays within budgets.pass_flops, never
    below MIN_POSITIONS (found by bisection: pass_flops grows with the length)."""
    low, high = MIN_POSITIONS, max(MIN_POSITIONS, MAX_POSITIONS)
    if pass_flops(config, high) <= budgets.pass_flops:
        return high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if pass_flops(config, mid) <= budgets.pass_flops else (low, mid)
    return low


def token_budget(config, budgets: Budgets = UPLOAD) -> int:
    """The most ids of one typed source or target (<s>, </s> included) a request reads: the
    model's max_len, budgets.input_tokens, the length whose attention maps fit
    budgets.maps_bytes and the length whose pass fits budgets.pass_flops, whichever is least.
    Text is cut to it when it is tokenized, before any tensor exists."""
    return min(config.max_len, budgets.input_tokens, maps_length(config, 1, budgets),
               flops_length(config, budgets))


def step_budget(config, beam_width: int = 1, budgets: Budgets = UPLOAD) -> int:
    """The most tokens one translation may emit: the model's max_len, budgets.decode_steps, the
    length whose attention maps (those of the decode, then of the pass over its output) fit
    budgets.maps_bytes with beam_width hypotheses and the length whose pass fits
    budgets.pass_flops, whichever is least."""
    return min(config.max_len, budgets.decode_steps, maps_length(config, beam_width, budgets),
               flops_length(config, budgets))


def load_bytes(config) -> int:
    """What opening a model takes of the memory available, from its config alone, before
    anything is read: the model's float32 variables (parameter_count x 4) with a margin for the
    one weight widened at a time and the probe pass, and TensorFlow's runtime and the
    tokenizers. The weight files are memory-mapped, and their pages leave the process as they
    are read (core.mapped.release): bench/real_models.py's peak at the first translation is
    about 1.2 x the weights."""
    return int(4 * config.parameter_count() * LOAD_OVERHEAD + LOAD_FIXED_BYTES)


LOAD_OVERHEAD = 1.25  # the variables, and a quarter more (a margin, not a measurement)
LOAD_FIXED_BYTES = 512 * MB  # TensorFlow's runtime and the tokenizers
