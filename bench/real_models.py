"""Real-sized Hugging Face models (random weights, the hub's real config.json values), ours against
transformers on the same files, in one run.

    .venv/bin/python bench/real_models.py [--models SELECTION|NAME,...] [--hub] [--keep DIR]
                                          [--tokens N] [--repeats N]
    .venv/bin/python bench/real_models.py --configs DIR   # the config.json transformers writes

Models (--models, comma-separated names or selections; "default" when not given):

    default     what `make bench` runs: t5-base, flan-t5-base, bart-large-cnn,
                bart-large-cnn-bf16, nllb-200-distilled-600M, pegasus-xsum
    all         the 15 checkpoints issue 36 lists: opus-mt-en-de, opus-mt-tc-big-en-tr
                (Helsinki-NLP/opus-mt-tc-big-en-tr, the opus-mt-tc-big shape: transformer-big,
                57,060 entries), t5-small, flan-t5-small, flan-t5-large, t5-base, flan-t5-base,
                bart-base, bart-large, bart-large-cnn, distilbart-cnn-12-6, mbart-large-50
                (facebook/mbart-large-50), nllb-200-distilled-600M, m2m100_418M, pegasus-xsum
    forms       the other stored forms: bart-large-cnn-bf16 (bart-large-cnn's weights saved in
                bfloat16), opus-mt-en-de-tf and opus-mt-tc-big-en-tr-tf (the Helsinki-NLP
                repositories' own weight files: tf_model.h5 + pytorch_model.bin, no
                model.safetensors; ours reads tf_model.h5, transformers 5 pytorch_model.bin)
    everything  all, then forms

--hub: each model opened by its hub name (HUB: "Helsinki-NLP/opus-mt-en-de", ...) instead of its
folder: the folder's files laid out as that repository's main revision in a Hugging Face cache
(testkit.hub_cache: blobs/<sha256>, hard links to the folder's files; snapshots/<commit>/<file>
as relative links; refs/main) under a temporary HF_HOME, both sides run with HF_HOME set to it
and HF_HUB_OFFLINE=1: ours load_checkpoint(name), theirs from_pretrained(name) for the model and
the tokenizer; everything else as by folder. --repeats: the runs of each timed median (3).

Each folder is built once, with a Python that has torch and transformers (HF_PYTHON, by default
/work/hfenv/bin/python; skipped with exit 0 and the reason where there is none), and kept in --keep
DIR (default /work/models), reused when present: the hub's config.json (the values of the real
checkpoint, written out here: HUB_CONFIGS) and generation_config.json (HUB_GENERATION) read with
AutoConfig / GenerationConfig as a download is, a model of it with transformers' default
initialisation (torch seed 0, eval) saved with save_pretrained in float32 (opus-mt-tc-big-en-tr in
float16, as its config's torch_dtype says the hub holds it; bart-large-cnn-bf16:
model.to(torch.bfloat16).save_pretrained; the -tf forms: tf_model.h5 written by transformers 4 +
TensorFlow, HF4_PYTHON, by default /work/hf4env/bin/python:
TFMarianMTModel.from_pretrained(from_pt=True).save_pretrained, checked by reading it back with
from_tf=True, and pytorch_model.bin in the stored dtype), then the hub's own config.json and
generation_config.json written over the ones save_pretrained wrote (a folder built before they were
gets them on the next run), and a real tokenizer of the family's kind at the model's vocabulary
size, trained here on English text (the docstrings of Python's standard library) and saved by
transformers' class for the family:

    T5        a SentencePiece unigram model (<pad> 0, </s> 1, <unk> 2) padded with synthetic pieces
              to 32,000 (T5TokenizerFast: + 100 extra ids = 32,100 entries; vocab_size 32,128)
    BART      a byte-level BPE vocab.json + merges.txt of 50,265 entries (<s> <pad> </s> <unk>
              first, <mask> last; BartTokenizerFast); bart-large-cnn's vocab_size is 50,264
    Pegasus   a SentencePiece unigram model padded to 96,000 pieces (PegasusTokenizerFast: + 103
              reserved ids = 96,103 entries)
    NLLB      a SentencePiece BPE model padded to 256,000 pieces (sentencepiece.bpe.model;
              NllbTokenizerFast: fairseq's 4 specials, the pieces, the 202 language codes,
              <mask> = 256,204 entries; vocab_size 256,206)
    Marian    source.spm + target.spm (SentencePiece unigram models padded to 32,000 pieces) and
              the shared vocab.json of both at the config's vocab_size (MarianTokenizer):
              opus-mt-en-de 58,101 (</s> 0, <unk> 1, <pad> 58,100), opus-mt-tc-big-en-tr 57,060
              (</s> 43,741 as its config's eos_token_id, <unk> 0, <pad> 57,059)
    M2M100    sentencepiece.bpe.model (BPE, 128,000 pieces) + vocab.json (fairseq's 4 specials,
              then the pieces: 128,004 entries, what M2M100Tokenizer's len() counts in
              transformers 5.24), the 100 language codes after them (__en__ 128,022, __fr__
              128,028, as in the real one); vocab_size 128,112 (8 <madeupword> rows)
    mBART-50  sentencepiece.bpe.model (unigram, 250,000 pieces), MBart50Tokenizer: fairseq's ids,
              the 52 language codes, <mask> = 250,054 entries

The folder is then reloaded with AutoTokenizer + AutoModelForSeq2SeqLM, as a check that
transformers reads it.

Each side then runs in a fresh process (as bench/open_real.py), the folder's files read once before
each (in_page_cache: both read them from memory, as a model used before): files to the first
translation (import, load, one greedy translation of SOURCE with exactly --tokens new tokens: ours
load_checkpoint(folder) then ckpt.generate(SOURCE, settings), the folder's generation config made
greedy with min = max = N new tokens; theirs from_pretrained(dtype=float32) + AutoTokenizer +
generate(num_beams=1, min_new_tokens=max_new_tokens=N), the folder's generation config otherwise
(forced tokens, no_repeat_ngram_size, ...) on both sides); the warm translation (median of 3); the
maps of SOURCE with a typed TARGET (ckpt.attention(source, target) against a forward pass with
output_attentions=True, eager attention; median of 3); the growth of the RSS high-water mark (VmHWM)
during the load, against the weights' size on disk; and whether the greedy ids are equal (ours
decoding.token_ids against generate's output less the decoder start id). A model our side refuses
shows "refused: <its error>" and the run goes on.

Then, after every timing, equality as the project's standard asks (logits 1e-4, greedy and beam
ids): the teacher-forced pass of the maps (SOURCE with TARGET; each side's ids, checked equal:
source, decoder inputs <start> + labels[:-1], labels), ours the model called eagerly (its logits;
bfloat16 weights widened to float32) and theirs model(input_ids, decoder_input_ids).logits in
float32, each saved to a file and compared here: the max absolute difference of the log-softmax
(float64; pass at LOGITS_TOLERANCE) and of the raw logits, whether every position's argmax is
the same, and the compiled pass's log-probability of each label (forward's "log_probs") against
transformers'; and generate with the folder's generation_config.json as saved (beam search where
it gives num_beams; length_penalty, no_repeat_ngram_size, forced ids, min_length, ...) with
max_new_tokens capped to --tokens (ours read_generation_config of the file's bytes, max_length
set to N + 1; theirs generate(max_new_tokens=N)): ids equal, or the first differing step.

--configs DIR: for every model of HUB_CONFIGS, the config.json (and generation_config.json) that
transformers writes when it saves the model read from the hub's files (DIR/<name>/config.json; the
hub's own as hub_config.json), the fields it adds, drops or changes against the hub's, and what our
config readers say of each (every refusal, a field at a time: a refused field is dropped and the
reader run again).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from bench.timing import CHILD_PRELUDE  # noqa: E402
from testkit.fixtures import fixture_module  # noqa: E402  (the tests' fixture builders)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
DEFAULT_HF_PYTHON = "/work/hfenv/bin/python"
DEFAULT_KEEP = "/work/models"
SOURCE = ("The old man walked slowly to the station with my friend, because the last train to the "
          "city leaves at nine o'clock every evening in the winter.")  # 27 words
TARGET = "The old man takes the last train to the city at nine every winter evening."
NEW_TOKENS, REPEATS = 24, 3
LOGITS_TOLERANCE = 1e-4  # the project's standard: log-softmax of the logits within 1e-4

# ----------------------------------------------------------------------------- the hub's files
# config.json and generation_config.json of each checkpoint as the hub has them (transformers
# 4.x wrote them), by name; "hub" is the repository. Written out from the hub's files.
_LABELS3 = ({"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
            {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2})
_T5_TASKS = {
    "summarization": {"early_stopping": True, "length_penalty": 2.0, "max_length": 200,
                      "min_length": 30, "no_repeat_ngram_size": 3, "num_beams": 4,
                      "prefix": "summarize: "},
    "translation_en_to_de": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to German: "},
    "translation_en_to_fr": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to French: "},
    "translation_en_to_ro": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to Romanian: "},
}


def _t5(d_model, d_ff, heads, layers, v11=False):
    config = {
        "architectures": ["T5ForConditionalGeneration" if v11 else "T5WithLMHeadModel"],
        "d_ff": d_ff, "d_kv": 64, "d_model": d_model, "decoder_start_token_id": 0,
        "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
        "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5",
        "n_positions": 512, "num_heads": heads, "num_layers": layers, "output_past": True,
        "pad_token_id": 0, "relative_attention_num_buckets": 32,
        "task_specific_params": _T5_TASKS, "vocab_size": 32128}
    if v11:  # flan-t5-*: T5 v1.1 (gated-gelu, its own lm_head)
        config.update({
            "dense_act_fn": "gelu_new", "feed_forward_proj": "gated-gelu", "is_gated_act": True,
            "num_decoder_layers": layers, "relative_attention_max_distance": 128,
            "tie_word_embeddings": False, "torch_dtype": "float32",
            "transformers_version": "4.23.1", "use_cache": True})
    return config


_T5_GENERATION = {"_from_model_config": True, "decoder_start_token_id": 0, "eos_token_id": 1,
                  "pad_token_id": 0, "transformers_version": "4.27.0.dev0"}
_CNN_TASK = {"summarization": {"early_stopping": True, "length_penalty": 2.0, "max_length": 142,
                               "min_length": 56, "no_repeat_ngram_size": 3, "num_beams": 4}}
_BART_COMMON = {
    "_num_labels": 3, "activation_function": "gelu", "add_bias_logits": False,
    "add_final_layer_norm": False, "architectures": ["BartForConditionalGeneration"],
    "bos_token_id": 0, "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096,
    "decoder_layerdrop": 0.0, "decoder_start_token_id": 2, "dropout": 0.1,
    "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0,
    "encoder_layers": 12, "eos_token_id": 2, "id2label": _LABELS3[0], "init_std": 0.02,
    "is_encoder_decoder": True, "label2id": _LABELS3[1], "max_position_embeddings": 1024,
    "model_type": "bart", "normalize_before": False, "num_hidden_layers": 12, "pad_token_id": 1,
    "scale_embedding": False}

_BART_LARGE_TASKS = {
    "summarization": {"length_penalty": 1.0, "max_length": 128, "min_length": 12, "num_beams": 4},
    "summarization_cnn": {"length_penalty": 2.0, "max_length": 142, "min_length": 56,
                          "num_beams": 4},
    "summarization_xsum": {"length_penalty": 1.0, "max_length": 62, "min_length": 11,
                           "num_beams": 6}}


def _opus_tc_big(vocab: int, eos: int, name: str) -> dict:
    """An opus-mt-tc-big config.json as the hub has it (converted with transformers 4.18, saved
    again by the commit that added tf_model.h5, 4.22): transformer-big, relu, 1024 positions,
    the vocabulary's </s> where the Marian vocabulary put it, <pad> last, float16 weights."""
    pad = vocab - 1
    return {
        "_name_or_path": f"/tmp/Helsinki-NLP/{name}", "activation_dropout": 0.0,
        "activation_function": "relu", "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0, "bad_words_ids": [[pad]], "bos_token_id": 0,
        "classifier_dropout": 0.0, "d_model": 1024, "decoder_attention_heads": 16,
        "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0, "decoder_layers": 6,
        "decoder_start_token_id": pad, "decoder_vocab_size": vocab, "dropout": 0.1,
        "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0,
        "encoder_layers": 6, "eos_token_id": eos, "forced_eos_token_id": eos, "init_std": 0.02,
        "is_encoder_decoder": True, "max_length": 512, "max_position_embeddings": 1024,
        "model_type": "marian", "normalize_embedding": False, "num_beams": 4,
        "num_hidden_layers": 6, "pad_token_id": pad, "scale_embedding": True,
        "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
        "torch_dtype": "float16", "transformers_version": "4.22.0.dev0", "use_cache": True,
        "vocab_size": vocab}


HUB_CONFIGS = {
    "t5-small": _t5(512, 2048, 8, 6),
    "t5-base": _t5(768, 3072, 12, 12),
    "flan-t5-small": _t5(512, 1024, 6, 8, v11=True),  # 6 heads of 64: 384 wide, not 512
    "flan-t5-base": _t5(768, 2048, 12, 12, v11=True),
    "flan-t5-large": _t5(1024, 2816, 16, 24, v11=True),
    "bart-base": {  # no _num_labels
        **{k: v for k, v in _BART_COMMON.items() if k != "_num_labels"},
        "_name_or_path": "bart-base", "activation_dropout": 0.1,
        "architectures": ["BartModel"], "attention_dropout": 0.1, "classif_dropout": 0.1,
        "classifier_dropout": 0.0, "d_model": 768, "decoder_attention_heads": 12,
        "decoder_ffn_dim": 3072, "decoder_layers": 6, "early_stopping": True,
        "encoder_attention_heads": 12, "encoder_ffn_dim": 3072, "encoder_layers": 6,
        "forced_bos_token_id": 0, "forced_eos_token_id": 2, "gradient_checkpointing": False,
        "no_repeat_ngram_size": 3, "normalize_embedding": True, "num_beams": 4,
        "num_hidden_layers": 6, "task_specific_params": _BART_LARGE_TASKS,
        "torch_dtype": "float32", "transformers_version": "4.12.0.dev0", "use_cache": True,
        "vocab_size": 50265},
    "bart-large": {
        **_BART_COMMON, "activation_dropout": 0.1, "architectures": ["BartModel"],
        "attention_dropout": 0.1, "classif_dropout": 0.1, "classifier_dropout": 0.0,
        "decoder_layers": 12, "early_stopping": True, "forced_eos_token_id": 2,
        "gradient_checkpointing": False, "no_repeat_ngram_size": 3, "num_beams": 4,
        "task_specific_params": _BART_LARGE_TASKS,
        "transformers_version": "4.12.0.dev0", "use_cache": True, "vocab_size": 50265},
    "bart-large-cnn": {
        **_BART_COMMON, "activation_dropout": 0.0, "attention_dropout": 0.0,
        "classif_dropout": 0.0, "classifier_dropout": 0.0, "decoder_layers": 12,
        "early_stopping": True, "force_bos_token_to_be_generated": True, "forced_bos_token_id": 0,
        "forced_eos_token_id": 2, "gradient_checkpointing": False, "length_penalty": 2.0,
        "max_length": 142, "min_length": 56, "no_repeat_ngram_size": 3, "num_beams": 4,
        "output_past": True, "prefix": " ", "task_specific_params": _CNN_TASK,
        "transformers_version": "4.7.0.dev0", "use_cache": True, "vocab_size": 50264},
    "distilbart-cnn-12-6": {
        **_BART_COMMON, "activation_dropout": 0.0, "attention_dropout": 0.0,
        "classif_dropout": 0.0, "decoder_layers": 6, "early_stopping": True,
        "extra_pos_embeddings": 2, "force_bos_token_to_be_generated": True,
        "length_penalty": 2.0, "max_length": 142, "min_length": 56, "no_repeat_ngram_size": 3,
        "normalize_embedding": True, "num_beams": 4, "output_past": True, "prefix": " ",
        "replacing_rate": 0, "static_position_embeddings": False,
        "student_decoder_layers": None, "student_encoder_layers": None,
        "task_specific_params": _CNN_TASK, "vocab_size": 50264},
    "mbart-large-50": {
        "_name_or_path": "/home/suraj/projects/mbart-50/hf_models/mbart-50-large",
        "_num_labels": 3, "activation_dropout": 0.0, "activation_function": "gelu",
        "add_bias_logits": False, "add_final_layer_norm": True,
        "architectures": ["MBartForConditionalGeneration"], "attention_dropout": 0.0,
        "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": 1024,
        "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0,
        "decoder_layers": 12, "decoder_start_token_id": 2, "dropout": 0.1,
        "early_stopping": True, "encoder_attention_heads": 16, "encoder_ffn_dim": 4096,
        "encoder_layerdrop": 0.0, "encoder_layers": 12, "eos_token_id": 2,
        "forced_eos_token_id": 2, "gradient_checkpointing": False, "id2label": _LABELS3[0],
        "init_std": 0.02, "is_encoder_decoder": True, "label2id": _LABELS3[1],
        "max_length": 200, "max_position_embeddings": 1024, "model_type": "mbart",
        "normalize_before": True, "normalize_embedding": True, "num_beams": 5,
        "num_hidden_layers": 12, "output_past": True, "pad_token_id": 1, "scale_embedding": True,
        "static_position_embeddings": False, "tokenizer_class": "MBart50Tokenizer",
        "transformers_version": "4.4.0.dev0", "use_cache": True, "vocab_size": 250054},
    "m2m100_418M": {
        "_name_or_path": "hf_models/m2m100_418M", "activation_dropout": 0.0,
        "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
        "attention_dropout": 0.1, "bos_token_id": 0, "d_model": 1024,
        "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.05,
        "decoder_layers": 12, "decoder_start_token_id": 2, "dropout": 0.1,
        "early_stopping": True, "encoder_attention_heads": 16, "encoder_ffn_dim": 4096,
        "encoder_layerdrop": 0.05, "encoder_layers": 12, "eos_token_id": 2,
        "gradient_checkpointing": False, "init_std": 0.02, "is_encoder_decoder": True,
        "max_length": 200, "max_position_embeddings": 1024, "model_type": "m2m_100",
        "num_beams": 5, "num_hidden_layers": 12, "pad_token_id": 1, "scale_embedding": True,
        "transformers_version": "4.4.0.dev0", "use_cache": True, "vocab_size": 128112},
    "nllb-200-distilled-600M": {
        "_name_or_path": "/home/patrick/nllb-200-distilled-600M", "activation_dropout": 0.0,
        "activation_function": "relu", "architectures": ["M2M100ForConditionalGeneration"],
        "attention_dropout": 0.1, "bos_token_id": 0, "d_model": 1024,
        "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layerdrop": 0,
        "decoder_layers": 12, "decoder_start_token_id": 2, "dropout": 0.1,
        "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0,
        "encoder_layers": 12, "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True,
        "max_length": 200, "max_position_embeddings": 1024, "model_type": "m2m_100",
        "num_hidden_layers": 12, "pad_token_id": 1, "scale_embedding": True,
        "tokenizer_class": "NllbTokenizer", "torch_dtype": "float32",
        "transformers_version": "4.21.0.dev0", "use_cache": True, "vocab_size": 256206},
    "opus-mt-en-de": {
        "_name_or_path": "/tmp/Helsinki-NLP/opus-mt-en-de", "_num_labels": 3,
        "activation_dropout": 0.0, "activation_function": "swish", "add_bias_logits": False,
        "add_final_layer_norm": False, "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0, "bad_words_ids": [[58100]], "bos_token_id": 0,
        "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": 512,
        "decoder_attention_heads": 8, "decoder_ffn_dim": 2048, "decoder_layerdrop": 0.0,
        "decoder_layers": 6, "decoder_start_token_id": 58100, "decoder_vocab_size": 58101,
        "dropout": 0.1, "encoder_attention_heads": 8, "encoder_ffn_dim": 2048,
        "encoder_layerdrop": 0.0, "encoder_layers": 6, "eos_token_id": 0,
        "extra_pos_embeddings": 58101, "forced_eos_token_id": 0, "gradient_checkpointing": False,
        "id2label": _LABELS3[0], "init_std": 0.02, "is_encoder_decoder": True,
        "label2id": _LABELS3[1], "max_length": 512, "max_position_embeddings": 512,
        "model_type": "marian", "normalize_before": False, "normalize_embedding": False,
        "num_beams": 4, "num_hidden_layers": 6, "pad_token_id": 58100, "scale_embedding": True,
        "share_encoder_decoder_embeddings": True, "static_position_embeddings": True,
        "transformers_version": "4.22.0.dev0", "use_cache": True, "vocab_size": 58101},
    # Helsinki-NLP/opus-mt-tc-big-en-tr: 57,060 entries, </s> 43741, <pad> 57059
    "opus-mt-tc-big-en-tr": _opus_tc_big(57060, 43741, "opus-mt-tc-big-en-tr"),
    "pegasus-xsum": {
        "_name_or_path": "google/pegasus-xsum", "activation_dropout": 0.1,
        "activation_function": "relu", "add_bias_logits": False, "add_final_layer_norm": True,
        "architectures": ["PegasusForConditionalGeneration"], "attention_dropout": 0.1,
        "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": 1024,
        "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layerdrop": 0.0,
        "decoder_layers": 16, "decoder_start_token_id": 0, "dropout": 0.1,
        "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0.0,
        "encoder_layers": 16, "eos_token_id": 1, "extra_pos_embeddings": 0,
        "force_bos_token_to_be_generated": False, "forced_eos_token_id": 1,
        "gradient_checkpointing": False, "id2label": _LABELS3[0], "init_std": 0.02,
        "is_encoder_decoder": True, "label2id": _LABELS3[1], "length_penalty": 0.6,
        "max_length": 64, "max_position_embeddings": 512, "model_type": "pegasus",
        "normalize_before": True, "normalize_embedding": False, "num_beams": 8,
        "num_hidden_layers": 16, "pad_token_id": 0, "scale_embedding": True,
        "static_position_embeddings": True,
        "task_specific_params": {"summarization_xsum": {"length_penalty": 0.6, "max_length": 64,
                                                        "max_position_embeddings": 512}},
        "transformers_version": "4.5.0.dev0", "use_cache": True, "vocab_size": 96103},
}
_FLAN_GENERATION = {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0,
                    "transformers_version": "4.26.0.dev0"}
_BART_GENERATION = {"_from_model_config": True, "bos_token_id": 0, "decoder_start_token_id": 2,
                    "early_stopping": True, "eos_token_id": 2, "forced_bos_token_id": 0,
                    "forced_eos_token_id": 2, "no_repeat_ngram_size": 3, "num_beams": 4,
                    "pad_token_id": 1, "transformers_version": "4.27.0.dev0"}
HUB_GENERATION = {
    "t5-small": _T5_GENERATION, "t5-base": _T5_GENERATION,
    "flan-t5-small": _FLAN_GENERATION, "flan-t5-base": _FLAN_GENERATION,
    "flan-t5-large": _FLAN_GENERATION,
    "bart-base": _BART_GENERATION, "bart-large": _BART_GENERATION,
    "bart-large-cnn": {"_from_model_config": True, "bos_token_id": 0,
                       "decoder_start_token_id": 2, "early_stopping": True, "eos_token_id": 2,
                       "forced_bos_token_id": 0, "forced_eos_token_id": 2, "length_penalty": 2.0,
                       "max_length": 142, "min_length": 56, "no_repeat_ngram_size": 3,
                       "num_beams": 4, "pad_token_id": 1, "transformers_version": "4.27.0.dev0"},
    "distilbart-cnn-12-6": {"_from_model_config": True, "bos_token_id": 0,
                            "decoder_start_token_id": 2, "early_stopping": True,
                            "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
                            "length_penalty": 2.0, "max_length": 142, "min_length": 56,
                            "no_repeat_ngram_size": 3, "num_beams": 4, "pad_token_id": 1,
                            "transformers_version": "4.27.0.dev0"},
    "mbart-large-50": {"_from_model_config": True, "bos_token_id": 0,
                       "decoder_start_token_id": 2, "early_stopping": True, "eos_token_id": 2,
                       "forced_eos_token_id": 2, "max_length": 200, "num_beams": 5,
                       "pad_token_id": 1, "transformers_version": "4.27.0.dev0"},
    "m2m100_418M": {"_from_model_config": True, "bos_token_id": 0, "decoder_start_token_id": 2,
                    "early_stopping": True, "eos_token_id": 2, "max_length": 200,
                    "num_beams": 5, "pad_token_id": 1, "transformers_version": "4.27.0.dev0"},
    "nllb-200-distilled-600M": {"_from_model_config": True, "bos_token_id": 0,
                                "decoder_start_token_id": 2, "eos_token_id": 2,
                                "max_length": 200, "pad_token_id": 1,
                                "transformers_version": "4.27.0.dev0"},
    "opus-mt-en-de": {"bad_words_ids": [[58100]], "bos_token_id": 0,
                      "decoder_start_token_id": 58100, "eos_token_id": 0,
                      "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4,
                      "pad_token_id": 58100, "renormalize_logits": True,
                      "transformers_version": "4.32.0.dev0"},
    # as "Adding generation config file(s)" wrote it (no renormalize_logits commit followed)
    "opus-mt-tc-big-en-tr": {"_from_model_config": True, "bad_words_ids": [[57059]],
                             "bos_token_id": 0, "decoder_start_token_id": 57059,
                             "eos_token_id": 43741, "forced_eos_token_id": 43741,
                             "max_length": 512, "num_beams": 4, "pad_token_id": 57059,
                             "transformers_version": "4.27.0.dev0"},
    "pegasus-xsum": {"bos_token_id": 0, "decoder_start_token_id": 0, "eos_token_id": 1,
                     "forced_eos_token_id": 1, "length_penalty": 0.6, "max_length": 64,
                     "num_beams": 8, "pad_token_id": 0, "transformers_version": "4.27.0.dev0"},
}
HUB = {"t5-small": "google-t5/t5-small", "t5-base": "google-t5/t5-base",
       "flan-t5-small": "google/flan-t5-small", "flan-t5-base": "google/flan-t5-base",
       "flan-t5-large": "google/flan-t5-large", "bart-base": "facebook/bart-base",
       "bart-large": "facebook/bart-large", "bart-large-cnn": "facebook/bart-large-cnn",
       "distilbart-cnn-12-6": "sshleifer/distilbart-cnn-12-6",
       "mbart-large-50": "facebook/mbart-large-50", "m2m100_418M": "facebook/m2m100_418M",
       "nllb-200-distilled-600M": "facebook/nllb-200-distilled-600M",
       "opus-mt-en-de": "Helsinki-NLP/opus-mt-en-de",
       "opus-mt-tc-big-en-tr": "Helsinki-NLP/opus-mt-tc-big-en-tr",
       "pegasus-xsum": "google/pegasus-xsum"}
# The benchmarked folders: name -> (the hub model it is, its tokenizer's kind, dtype saved,
# weight files: "safetensors", model.safetensors as transformers 5 saves it; "tf", the hub's
# Marian layout: tf_model.h5 written by transformers 4 + TensorFlow and pytorch_model.bin, no
# model.safetensors).
BENCH_MODELS = {
    "opus-mt-en-de": ("opus-mt-en-de", "marian", "float32", "safetensors"),
    "opus-mt-tc-big-en-tr": ("opus-mt-tc-big-en-tr", "marian", "float16", "safetensors"),
    "t5-small": ("t5-small", "t5", "float32", "safetensors"),
    "flan-t5-small": ("flan-t5-small", "t5", "float32", "safetensors"),
    "flan-t5-large": ("flan-t5-large", "t5", "float32", "safetensors"),
    "t5-base": ("t5-base", "t5", "float32", "safetensors"),
    "flan-t5-base": ("flan-t5-base", "t5", "float32", "safetensors"),
    "bart-base": ("bart-base", "bart", "float32", "safetensors"),
    "bart-large": ("bart-large", "bart", "float32", "safetensors"),
    "bart-large-cnn": ("bart-large-cnn", "bart", "float32", "safetensors"),
    "distilbart-cnn-12-6": ("distilbart-cnn-12-6", "bart", "float32", "safetensors"),
    "mbart-large-50": ("mbart-large-50", "mbart50", "float32", "safetensors"),
    "nllb-200-distilled-600M": ("nllb-200-distilled-600M", "nllb", "float32", "safetensors"),
    "m2m100_418M": ("m2m100_418M", "m2m100", "float32", "safetensors"),
    "pegasus-xsum": ("pegasus-xsum", "pegasus", "float32", "safetensors"),
    # the other stored forms: bfloat16 weights; the Marian repositories' own weight files
    "bart-large-cnn-bf16": ("bart-large-cnn", "bart", "bfloat16", "safetensors"),
    "opus-mt-en-de-tf": ("opus-mt-en-de", "marian", "float32", "tf"),
    "opus-mt-tc-big-en-tr-tf": ("opus-mt-tc-big-en-tr", "marian", "float16", "tf"),
}
# --models takes these names for a list: "default" what `make bench` runs, "all" the 15
# checkpoints, "forms" the other stored forms, "everything" both.
SELECTIONS = {
    "default": ("t5-base", "flan-t5-base", "bart-large-cnn", "bart-large-cnn-bf16",
                "nllb-200-distilled-600M", "pegasus-xsum"),
    "all": tuple(name for name in BENCH_MODELS if name in HUB),
    "forms": tuple(name for name in BENCH_MODELS if name not in HUB),
}
SELECTIONS["everything"] = SELECTIONS["all"] + SELECTIONS["forms"]
# The tokenizer entries each kind has in the real checkpoint (len(tokenizer)); Marian's are its
# config's vocab_size.
TOKENIZER_ENTRIES = {"t5": 32100, "bart": 50265, "pegasus": 96103, "nllb": 256204,
                     "mbart50": 250054, "m2m100": 128004}
DEFAULT_HF4_PYTHON = "/work/hf4env/bin/python"  # transformers 4 + TensorFlow: writes tf_model.h5


# ============================================================ the build (transformers' Python)
def english_lines(limit: int = 60_000) -> list[str]:
    """English sentences: the docstrings of Python's standard library, in a fixed order."""
    import ast
    import re
    import sysconfig

    lines, seen = [], set()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        parts = set(path.relative_to(stdlib).parts)
        if {"site-packages", "dist-packages", "test", "tests"} & parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node) or ""
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                words = sentence.split()
                if 5 <= len(words) <= 40 and sentence not in seen and \
                        sum(c.isalpha() or c == " " for c in sentence) > 0.85 * len(sentence):
                    seen.add(sentence)
                    lines.append(sentence)
                    if len(lines) >= limit:
                        return lines
    return lines


def _synthetic(i: int, prefix: str = "zq") -> str:
    """A word no English text holds: prefix ('zq') then i in base 26."""
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters = chr(97 + r) + letters
        if not i:
            return prefix + letters


def train_spm(lines: list[str], vocab_size: int, model_type: str, **ids) -> bytes:
    """A SentencePiece model trained on lines (one thread, seed 0, nmt_nfkc as the real ones)."""
    import io

    import sentencepiece as spm

    writer = io.BytesIO()
    spm.set_random_generator_seed(0)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=writer, model_type=model_type,
        vocab_size=vocab_size, character_coverage=1.0, num_threads=1, hard_vocab_limit=False,
        normalization_rule_name="nmt_nfkc", minloglevel=2, **ids)
    return writer.getvalue()


def pad_spm(model: bytes, pieces: int, prefix: str = "zq") -> bytes:
    """The SentencePiece model with synthetic pieces ('▁zq..', scores below every real one)
    appended up to `pieces` pieces."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    have = {p.piece for p in proto.pieces}
    low = min(p.score for p in proto.pieces) - 1.0
    i = 0
    while len(proto.pieces) < pieces:
        piece = "▁" + _synthetic(i, prefix)
        i += 1
        if piece in have:
            continue
        new = proto.pieces.add()
        new.piece, new.score, new.type = piece, low - i * 1e-4, 1  # NORMAL
    assert len(proto.pieces) == pieces, (len(proto.pieces), pieces)
    return proto.SerializeToString()


def marian_vocab(lines: list[str], out: Path, config: dict) -> dict[str, int]:
    """source.spm and target.spm (SentencePiece unigram, <unk> 0, <s> 1, </s> 2, nmt_nfkc)
    written into out, and opus-mt's shared vocab.json of them at config's vocab_size: every
    piece of both models once (make_marian_fixture.build_vocab), </s> at config's eos_token_id
    (0 in opus-mt-*, inside the pieces in opus-mt-tc-big-*), <unk> first of the rest, <pad>
    last (pad_token_id). Each model is padded to 32,000 pieces (synthetic '▁zq..' in the
    source, '▁zx..' in the target, which no English text holds), the target's padding chosen
    so that the two hold exactly as many distinct pieces as the vocabulary's size leaves."""
    fixture = fixture_module("make_marian_fixture")
    ids = dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    source = pad_spm(train_spm(lines, 8000, "unigram", **ids), 32000)
    target = train_spm(lines[1::2], 6000, "unigram", **ids)
    union = config["vocab_size"] - 3  # less </s>, <unk> and <pad>
    have = set(fixture.spm_pieces(source))
    own = set(fixture.spm_pieces(target)) - have
    target = pad_spm(target, len(fixture.spm_pieces(target)) + 3 + union - len(have | own),
                     prefix="zx")
    order = [k for k in fixture.build_vocab(source, target) if k != "</s>"]
    order.insert(config["eos_token_id"], "</s>")
    vocab = {piece: i for i, piece in enumerate(order)}
    assert len(vocab) == config["vocab_size"] and vocab["<pad>"] == config["pad_token_id"]
    (out / "source.spm").write_bytes(source)
    (out / "target.spm").write_bytes(target)
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2),
                                    encoding="utf-8")
    return vocab


def build_tokenizer(kind: str, out: Path, hub_name: str):
    """The family's tokenizer at the real checkpoint's size, saved into out by transformers'
    class for the family; returns it as reloaded."""
    from transformers import (
        AutoTokenizer,
        BartTokenizerFast,
        MarianTokenizer,
        NllbTokenizerFast,
        PegasusTokenizerFast,
        T5TokenizerFast,
    )

    lines = english_lines()
    config = HUB_CONFIGS[hub_name]
    entries = config["vocab_size"] if kind == "marian" else TOKENIZER_ENTRIES[kind]
    if kind == "bart":
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer(add_prefix_space=False)
        bpe.train_from_iterator(lines, vocab_size=entries - 1, min_frequency=2,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                show_progress=False)
        vocab = dict(sorted(bpe.get_vocab().items(), key=lambda kv: kv[1]))
        assert list(vocab)[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
        i = 0
        while len(vocab) < entries - 1:
            piece = "Ġ" + _synthetic(i)
            i += 1
            vocab.setdefault(piece, len(vocab))
        vocab["<mask>"] = len(vocab)  # as in bart-large: <mask> is the last id
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        merges = json.loads(bpe.to_str())["model"]["merges"]
        text = ["#version: 0.2"] + [m if isinstance(m, str) else " ".join(m) for m in merges]
        (out / "merges.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
        tokenizer = BartTokenizerFast(vocab=str(out / "vocab.json"),
                                      merges=str(out / "merges.txt"))
    elif kind in ("t5", "pegasus"):
        # T5: 32,000 pieces + 100 extra ids; Pegasus: 96,000 pieces after 103 reserved ids.
        pieces = {"t5": 32000, "pegasus": 96000}[kind]
        model = train_spm(lines, 16000, "unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
        (out / "spiece.model").write_bytes(pad_spm(model, pieces))
        cls = T5TokenizerFast if kind == "t5" else PegasusTokenizerFast
        (out / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": cls.__name__.removesuffix("Fast")}))
        tokenizer = cls.from_pretrained(out)
    elif kind == "marian":  # opus-mt: source.spm, target.spm, the shared vocab.json
        source_lang, target_lang = HUB[hub_name].rsplit("-", 2)[1:]
        marian_vocab(lines, out, config)
        tokenizer = MarianTokenizer(str(out / "source.spm"), str(out / "target.spm"),
                                    str(out / "vocab.json"), source_lang=source_lang,
                                    target_lang=target_lang, model_max_length=512)
    elif kind == "m2m100":  # vocab.json (fairseq's 4 specials, then the pieces) + the model;
        # the 100 language codes follow (M2M100Tokenizer), then 8 <madeupword> rows
        model = pad_spm(train_spm(lines, 12000, "bpe", unk_id=0, bos_id=1, eos_id=2,
                                  pad_id=-1), 128_003)  # 128,000 pieces, <unk>, <s>, </s>
        (out / "sentencepiece.bpe.model").write_bytes(model)
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for piece in fixture_module("make_marian_fixture").spm_pieces(model):
            vocab.setdefault(piece, len(vocab))
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2),
                                        encoding="utf-8")
        (out / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "M2M100Tokenizer", "src_lang": "en", "tgt_lang": "fr",
             "language_codes": "m2m100", "num_madeup_words": 8}))
        tokenizer = AutoTokenizer.from_pretrained(out)
        assert (tokenizer.get_lang_id("en"), tokenizer.get_lang_id("fr")) == (128022, 128028)
    elif kind == "mbart50":  # sentencepiece.bpe.model (250,000 pieces) in fairseq's ids, the
        # 52 language codes, <mask>: MBart50Tokenizer's 250,054
        model = train_spm(lines, 12000, "unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
        (out / "sentencepiece.bpe.model").write_bytes(pad_spm(model, 250_000))
        (out / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "MBart50Tokenizer", "src_lang": "en_XX", "tgt_lang": "ro_RO"}))
        tokenizer = AutoTokenizer.from_pretrained(out)
        assert tokenizer.convert_tokens_to_ids("<mask>") == len(tokenizer) - 1
    else:  # NLLB-200: sentencepiece.bpe.model, fairseq's ids, the language codes, <mask>
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

        model = train_spm(lines, 12000, "bpe", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
        (out / "sentencepiece.bpe.model").write_bytes(pad_spm(model, 256000))
        (out / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "NllbTokenizer", "src_lang": "eng_Latn", "tgt_lang": "fra_Latn",
             "extra_special_tokens": FAIRSEQ_LANGUAGE_CODES}))
        NllbTokenizerFast.from_pretrained(out).save_pretrained(out)
        nllb_layout = fixture_module("make_m2m100_fixture").nllb_layout  # facebook/nllb-200's ids
        data = nllb_layout(json.loads((out / "tokenizer.json").read_text(encoding="utf-8")))
        (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False),
                                            encoding="utf-8")
        tokenizer = NllbTokenizerFast.from_pretrained(out)
        assert tokenizer.convert_tokens_to_ids("<mask>") == len(tokenizer) - 1
    tokenizer.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert len(tokenizer) == entries, (kind, len(tokenizer), entries)
    return tokenizer


def _stage(name: str, where: Path) -> Path:
    """A folder holding the hub's config.json and generation_config.json of `name`."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.json").write_text(json.dumps(HUB_CONFIGS[name], indent=2) + "\n")
    (where / "generation_config.json").write_text(
        json.dumps(HUB_GENERATION[name], indent=2) + "\n")
    return where


# Run by HF4_PYTHON (transformers 4 + TensorFlow): tf_model.h5 written as the hub's "Add TF
# weights" commits wrote it (TFMarianMTModel from the PyTorch weights, save_pretrained), then
# read back into transformers 4's PyTorch class as from_tf=True reads it: the names whose values
# differ.
TF_SAVE = r"""
import json, sys
import torch
from transformers import MarianConfig, MarianMTModel, TFMarianMTModel
from transformers.modeling_tf_pytorch_utils import load_tf2_checkpoint_in_pytorch_model
stage, saved = sys.argv[1:3]
TFMarianMTModel.from_pretrained(stage, from_pt=True).save_pretrained(saved)
read = MarianMTModel(MarianConfig.from_pretrained(saved)).eval()  # what from_tf=True runs
read = load_tf2_checkpoint_in_pytorch_model(read, saved + "/tf_model.h5").state_dict()
given = torch.load(stage + "/pytorch_model.bin", weights_only=True)
both = [key for key in given if key in read]
print(json.dumps({"compared": len(both),
                  "differ": [key for key in both if not torch.equal(read[key], given[key])]}))
"""


def write_tf_copy(model, base: Path, out: Path, dtype: str) -> dict:
    """out/tf_model.h5 (float32) written from model's weights by transformers 4 + TensorFlow
    (HF4_PYTHON, by default DEFAULT_HF4_PYTHON: TF_SAVE) and out/pytorch_model.bin, model's
    state dict in dtype (tied weights stored once) without the sinusoid tables, which
    transformers 4 never saved there (MarianMTModel's _keys_to_ignore_on_save; the hub's
    opus-mt-tc-big-en-tr and -en-fr bins are 587 and 570 MB, their weights without them):
    a Helsinki-NLP repository's weight files. Returns TF_SAVE's check (the weights compared,
    none differing)."""
    import tempfile

    import torch

    state = model.state_dict()
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".tf-") as tmp:
        stage, saved = Path(tmp) / "stage", Path(tmp) / "saved"
        stage.mkdir()
        shutil.copy(base / "config.json", stage / "config.json")
        torch.save(state, stage / "pytorch_model.bin")  # float32
        python = os.environ.get("HF4_PYTHON") or DEFAULT_HF4_PYTHON
        done = subprocess.run([python, "-c", TF_SAVE, str(stage), str(saved)],
                              capture_output=True, text=True,
                              env={**os.environ, "TRANSFORMERS_VERBOSITY": "error"})
        if done.returncode:
            raise RuntimeError(f"{python} could not write tf_model.h5:\n{done.stderr[-3000:]}")
        check = json.loads(done.stdout.strip().splitlines()[-1])
        assert check["compared"] and not check["differ"], check
        shutil.move(saved / "tf_model.h5", out / "tf_model.h5")
    once = {}  # the tied embedding stored once, as torch.save keeps one storage
    torch.save({key: once.setdefault(value.data_ptr(), value.to(getattr(torch, dtype)))
                for key, value in state.items() if "embed_positions" not in key},
               out / "pytorch_model.bin")
    return check


def build_folder(name: str, out: Path) -> dict:
    """The folder of BENCH_MODELS[name] (see the docstring), checked by reloading it."""
    import tempfile

    import torch
    from transformers import (
        AutoConfig,
        AutoModelForSeq2SeqLM,
        AutoTokenizer,
        GenerationConfig,
    )

    hub_name, kind, dtype, form = BENCH_MODELS[name]
    tf_check = None
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if name != hub_name:  # another form of the hub model's folder: its weights saved again
        base = out.parent / hub_name
        if not (out.parent / f"{hub_name}.built.json").exists():
            build_folder(hub_name, base)
        model = AutoModelForSeq2SeqLM.from_pretrained(base, dtype=torch.float32).eval()
        if form == "tf":
            tf_check = write_tf_copy(model, base, out, dtype)
        else:
            model.to(getattr(torch, dtype)).save_pretrained(out)
        for file in base.iterdir():  # the tokenizer's files as they are
            if file.name not in ("config.json", "generation_config.json", "model.safetensors"):
                shutil.copy(file, out / file.name)
    else:
        tokenizer = build_tokenizer(kind, out, hub_name)
        with tempfile.TemporaryDirectory() as tmp:
            stage = _stage(hub_name, Path(tmp))
            config = AutoConfig.from_pretrained(stage)  # as a download is read
            generation = GenerationConfig.from_pretrained(stage)
        torch.manual_seed(0)
        model = AutoModelForSeq2SeqLM.from_config(config).eval()
        if HUB_CONFIGS[hub_name].get("tie_word_embeddings") is False:
            # T5 v1.1 / flan-T5 hold an lm_head of their own; transformers 5 ties it on init
            # (T5Config forces tie_word_embeddings), so it is drawn here as _init_weights draws
            # an untied one: N(0, initializer_factor).
            factor = config.initializer_factor
            generator = torch.Generator().manual_seed(1)
            model.lm_head.weight = torch.nn.Parameter(torch.normal(
                0.0, factor, model.lm_head.weight.shape, generator=generator))
        model.generation_config = generation
        model.to(getattr(torch, dtype)).save_pretrained(out)  # model.safetensors
    _stage(hub_name, out)  # the hub's own config.json and generation_config.json
    weights = "tf_model.h5" if form == "tf" else "model.safetensors"
    assert (out / weights).exists(), sorted(p.name for p in out.iterdir())
    # transformers reads it back (a tf copy: its pytorch_model.bin)
    tokenizer = AutoTokenizer.from_pretrained(out)
    again = AutoModelForSeq2SeqLM.from_pretrained(out, dtype=torch.float32).eval()
    want = dict(model.float().named_parameters())
    computed = HUB_CONFIGS[hub_name].get("static_position_embeddings")  # sinusoids, never read
    for key, value in again.named_parameters():
        if not (computed and "embed_positions" in key):
            assert torch.equal(value, want[key].to(value.dtype)), key
    ids = tokenizer(SOURCE)["input_ids"]
    info = {"name": name, "hub": HUB[hub_name], "dtype": dtype, "weights": weights,
            "hub_files": True, "class": type(again).__name__,
            "tokenizer": type(tokenizer).__name__, "tokenizer_entries": len(tokenizer),
            "vocab_size": again.config.vocab_size,
            "parameters": sum(p.numel() for p in again.parameters()),
            "source_pieces": len(ids), "files": {p.name: p.stat().st_size
                                                  for p in sorted(out.iterdir())}}
    if tf_check:
        info["tf_model_h5_read_back"] = tf_check
    if hasattr(again, "lm_head") and hasattr(again, "shared"):
        info["lm_head_tied"] = again.lm_head.weight.data_ptr() == again.shared.weight.data_ptr()
    (out.parent / f"{name}.built.json").write_text(json.dumps(info, indent=1))
    return info


def write_configs(where: Path) -> None:
    """where/<name>/config.json and generation_config.json as transformers saves a model read
    from the hub's files (hub_config.json, hub_generation_config.json beside them)."""
    import tempfile

    import torch
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, GenerationConfig

    for name in HUB_CONFIGS:
        out = where / name
        if out.exists():
            shutil.rmtree(out)
        with tempfile.TemporaryDirectory() as tmp:
            stage = _stage(name, Path(tmp) / "stage")
            config = AutoConfig.from_pretrained(stage)
            generation = GenerationConfig.from_pretrained(stage)
            with torch.device("meta"):
                model = AutoModelForSeq2SeqLM.from_config(config)
            model = model.to_empty(device="cpu").eval()  # no values: only the files' config
            model.generation_config = generation
            model.save_pretrained(Path(tmp) / "saved")
            out.mkdir(parents=True)
            for file in ("config.json", "generation_config.json"):
                shutil.copy(Path(tmp) / "saved" / file, out / file)
        (out / "hub_config.json").write_text(json.dumps(HUB_CONFIGS[name], indent=2) + "\n")
        (out / "hub_generation_config.json").write_text(
            json.dumps(HUB_GENERATION[name], indent=2) + "\n")
        print(f"wrote {out}", file=sys.stderr)


# ========================================================================== the measurement
COMMON = CHILD_PRELUDE

OURS = COMMON + r"""
import dataclasses
import transformer  # its options for TensorFlow, set before TensorFlow loads (as a user's import)
t = now(); import tensorflow; tf_in = now() - t  # Keras comes with it
from transformer import load_checkpoint; r["import"] = now() - t
from tensorflow.python.util import _pywrap_util_port
r["onednn"] = bool(_pywrap_util_port.IsMklEnabled())  # off, as the package sets it
r["rss_import"] = rss()
# (the end of the import: tests/bench runs the script to here)
# where our time goes (printed as "ours, where the time goes"): each stage's own function timed
# where the load and the first translation call it (a wrapper each: microseconds)
phases = r["phases"] = {"import: TensorFlow and Keras": tf_in,
                        "import: ours": r["import"] - tf_in}
# and where our memory goes (printed as "ours, where the memory goes"): per stage, the bytes it
# left resident (VmRSS after - before) and the peak so far over the import's (VmHWM)
memory = r["memory"] = {}
def time_stage(module, name, label):
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        t, before = now(), vm("VmRSS")
        try:
            return real(*args, **kwargs)
        finally:
            phases[label] = phases.get(label, 0.0) + now() - t
            kept, peak = memory.get(label, (0, 0))
            memory[label] = (kept + vm("VmRSS") - before,
                             max(peak, vm("VmHWM") - r["rss_import"]))
    setattr(module, name, wrapper)
import transformer.checkpoint.format as _format
import transformer.checkpoint.safetensors as _safetensors
import transformer.model.bounds as _bounds
import transformer.tokenizers.hf_pair as _pair
from transformer.inference import compiled as _compiled
for module, name, label in ((_pair, "tokenizer_pair", "load: tokenizers"),
                            (_safetensors, "arrays", "load: weights mapped, checked finite"),
                            (_bounds, "check_weight_bounds", "load: bounds proof"),
                            (_format, "_build_model", "load: Keras model built"),
                            (_format, "assign_weights", "load: weights copied in"),
                            (_format, "_check_finite", "load: probe")):
    time_stage(module, name, label)
t = now()
try:
    ckpt = load_checkpoint(%(folder)r)  # the folder as it is: no conversion
except Exception as err:
    r["refused"] = f"{type(err).__name__}: {err}"
    done()
r["load"], r["rss_load"] = now() - t, rss()
r["rss_load_kept"] = vm("VmRSS") - r["rss_import"]
phases["load: the rest"] = r["load"] - sum(v for k, v in phases.items() if k.startswith("load"))
untimed_trace = _compiled.SharedFunction.trace
time_stage(_compiled.SharedFunction, "trace", "first translation: tracing the loop")
from transformer.inference.generation_config import read_generation_config
base = ckpt.generation or read_generation_config(None, ckpt.config)
settings = dataclasses.replace(base.greedy(), max_length=%(new)d + 1, min_length=%(new)d + 1)
r["notes"] = list(settings.notes)
def translate():
    return ckpt.generate(%(source)r, settings, seconds=math.inf)
try:
    t = now(); out = translate(); r["first"], r["rss_first"] = now() - t, rss()
    _compiled.SharedFunction.trace = untimed_trace  # the maps' trace is not the translation's
    phases["first translation: the rest (its first run)"] = (
        r["first"] - phases.get("first translation: tracing the loop", 0.0))
    r["ids"], r["stopped_by"] = [int(i) for i in out.token_ids], out.stopped_by
    r["warm"] = median(translate)
    r["maps_first"] = timed(lambda: ckpt.attention(%(source)r, %(target)r))
    r["maps"] = median(lambda: ckpt.attention(%(source)r, %(target)r))
    # the decode step (issue 40, item 5): a translation of twice the tokens, warm; the marginal
    # seconds per token are the difference over the tokens added
    longer = dataclasses.replace(settings, max_length=2 * %(new)d + 1,
                                 min_length=2 * %(new)d + 1)
    twice = lambda: ckpt.generate(%(source)r, longer, seconds=math.inf)
    twice()  # a longer decode may prepare its cache's larger size once
    r["warm_twice"] = median(twice)
except Exception as err:
    r["failed"] = f"{type(err).__name__}: {err}"
    done()
# equality (after every timing): the teacher-forced logits of SOURCE with TARGET, and generate
# with the folder's generation_config.json as saved, max_new_tokens capped to N
import numpy as np
try:
    from transformer.inference.forward import forward
    src, out_ids = ckpt.encode_source(%(source)r), ckpt.encode_target(%(target)r)
    dec = [ckpt.config.start_id] + out_ids[:-1]
    r["tf_source_ids"], r["tf_decoder_ids"], r["tf_output_ids"] = src, dec, out_ids
    logits = ckpt.model((np.asarray([src], np.int32), np.asarray([dec], np.int32)))  # eager
    np.save(%(logits)r, np.asarray(logits, np.float32)[0])  # (T, V)
    # the compiled pass the pages use: the log-probability of each output id (float64)
    r["tf_log_probs"] = forward(ckpt.model, [src], [dec], [out_ids])["log_probs"][0].tolist()
except Exception as err:
    r["logits_failed"] = f"{type(err).__name__}: {err}"
try:
    from pathlib import Path
    from transformer.importers.hf import hub
    where = hub.resolve(%(folder)r)  # the folder, or the cached snapshot a hub name names
    r["read_from"] = str(where)
    saved = read_generation_config(Path(where, "generation_config.json").read_bytes(),
                                   ckpt.config, beam_budget=ckpt.step_budget)  # its budgets
    beam = dataclasses.replace(saved, max_length=%(new)d + 1,  # max_new_tokens=N wins
                               min_length=min(saved.min_length, %(new)d + 1))
    r["beam_method"], r["beam_notes"] = beam.method, list(beam.notes)
    t = now(); out = ckpt.generate(%(source)r, beam, seconds=math.inf)
    r["beam_seconds"] = now() - t
    r["beam_ids"], r["beam_stopped_by"] = [int(i) for i in out.token_ids], out.stopped_by
except Exception as err:
    r["beam_failed"] = f"{type(err).__name__}: {err}"
# what one decode step must read (issue 40, item 5): every decoder layer's weights but the
# cross-attention's keys and values (computed once from the encoder's output and kept), and the
# output projection (the tied embedding where it is tied); and the bandwidth NumPy streams
# memory at in this process (the median of np.add.reduce over 1 GiB, one thread)
from transformer.model import weights as names
c = ckpt.config
table = names.token_embedding("source" if c.share_embeddings else "target")
def streamed(path):
    if path.startswith("decoder_layer_"):
        return not any(f"/cross_attention/{k}/" in path for k in ("key", "value"))
    return path.startswith(names.OUTPUT_PROJECTION) or (c.tie_output and path == table)
r["step_bytes"] = sum(int(np.prod(w.shape)) * 4 for w in ckpt.model.weights
                      if streamed(names.relative_path(ckpt.model, w)))
# what limits the step: the same matrices alone, one row each, in the step's order, each
# product feeding the next one's input, in one compiled call (TensorFlow's matmul at the step's
# shapes, nothing else: no attention over the cache, no search over the vocabulary)
from bench.kernel_layout import chained
from transformer.inference.compiled import unrewritten
mats = [(w, c.tie_output and names.relative_path(ckpt.model, w) == table)  # the tied output
        for w in ckpt.model.weights  # projection as the model computes it, (E x^T)^T
        if len(w.shape) == 2 and streamed(names.relative_path(ckpt.model, w))]
matmuls = chained(mats)
with unrewritten():  # as the decode loop runs
    matmuls()
    r["step_matmuls"] = median(lambda: matmuls().numpy())
r["step_matrices"] = len(mats)
r["step_matrix_bytes"] = sum(int(np.prod(w.shape)) * 4 for w, _ in mats)
del ckpt, mats, matmuls
block = np.ones(2**28, np.float32)  # 1 GiB, its pages touched
r["bandwidth"] = block.nbytes / median(lambda: np.add.reduce(block))
done()
"""

THEIRS = COMMON + r"""
t = now(); import torch; from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
r["import"] = now() - t
r["rss_import"] = rss()
torch.set_grad_enabled(False)
t = now()
model = AutoModelForSeq2SeqLM.from_pretrained(%(folder)r, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(%(folder)r)
r["load"], r["rss_load"] = now() - t, rss()
start = model.generation_config.decoder_start_token_id
if start is None:
    start = model.config.decoder_start_token_id
def translate():
    inputs = tok(%(source)r, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=%(new)d, min_new_tokens=%(new)d, num_beams=1,
                         do_sample=False)
    tok.decode(out[0], skip_special_tokens=True)
    return out[0].tolist()
t = now(); ids = translate(); r["first"], r["rss_first"] = now() - t, rss()
assert ids[0] == start, (ids[0], start)
r["ids"], r["source_ids"] = ids[1:], tok(%(source)r)["input_ids"]
r["warm"] = median(translate)
# generate with the folder's generation_config.json as saved, max_new_tokens capped to N
inputs = tok(%(source)r, return_tensors="pt")
t = now(); beam = model.generate(**inputs, max_new_tokens=%(new)d)[0].tolist()
r["beam_seconds"] = now() - t
assert beam[0] == start, (beam[0], start)
r["beam_ids"] = beam[1:]
r["beam_num_beams"] = model.generation_config.num_beams
model.set_attn_implementation("eager")  # sdpa returns no attention weights
def maps():
    src = tok(%(source)r)["input_ids"]
    labels = tok(text_target=%(target)r)["input_ids"]
    out = model(input_ids=torch.tensor([src]),
                decoder_input_ids=torch.tensor([[start] + labels[:-1]]), output_attentions=True)
    [a.numpy() for a in out.encoder_attentions + out.decoder_attentions + out.cross_attentions]
r["maps_first"] = timed(maps)
r["maps"] = median(maps)
# the teacher-forced logits of the maps' pass, float32
import numpy as np
src = tok(%(source)r)["input_ids"]
labels = tok(text_target=%(target)r)["input_ids"]
dec = [start] + labels[:-1]
r["tf_source_ids"], r["tf_decoder_ids"], r["tf_output_ids"] = src, dec, labels
logits = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec])).logits
assert logits.dtype == torch.float32, logits.dtype
np.save(%(logits)r, logits[0].numpy())  # (T, V)
# the same pass in float64: the exact result both sides' float32 rounding is measured against
model.double()
logits = model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([dec])).logits
np.save(%(logits64)r, logits[0].numpy())
done()
"""


def hf_python() -> tuple[str | None, str]:
    """(A Python with torch and transformers, or None; why not)."""
    candidates = [os.environ.get("HF_PYTHON") or DEFAULT_HF_PYTHON, sys.executable]
    for python in dict.fromkeys(candidates):
        if not Path(python).exists():
            continue
        probe = subprocess.run([python, "-c", "import torch, transformers"], capture_output=True)
        if probe.returncode == 0:
            return python, ""
    return None, (f"no Python with torch and transformers (HF_PYTHON, by default "
                  f"{DEFAULT_HF_PYTHON}, nor {sys.executable})")


def run(python: str, script: str, env: dict | None = None, **values) -> dict:
    """The script run by python in a fresh process (env: variables to set, None to unset),
    its RESULT."""
    code = script % {"repeats": REPEATS, "source": SOURCE, "target": TARGET, **values}
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error",
           **(env or {})}
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={key: value for key, value in env.items() if value is not None})
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"failed": f"the measuring process exited {done.returncode}: "
                      f"{done.stderr.strip().splitlines()[-1:] or ''}",
            "stderr": done.stderr[-3000:]}


def ensure_folder(python: str, name: str, keep: Path) -> dict:
    """The built folder's marker (building it first where it is missing). A folder built before
    it held the hub's own config.json and generation_config.json gets them now."""
    marker = keep / f"{name}.built.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if all((keep / name / file).exists() for file in info["files"]):
            if not info.get("hub_files"):
                _stage(BENCH_MODELS[name][0], keep / name)
                info["files"] = {p.name: p.stat().st_size for p in sorted((keep / name).iterdir())}
                info["hub_files"] = True
                marker.write_text(json.dumps(info, indent=1))
            return info
    print(f"building {keep / name} (once; kept for later runs) ...", flush=True)
    subprocess.run([python, "-m", "bench.real_models", "--build", name, "--keep", str(keep)],
                   check=True, cwd=ROOT, env={**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                                  "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error",
                                  "TQDM_DISABLE": "1"})
    return json.loads(marker.read_text())


def _ratio(a, b) -> str:
    return f"{a / b:6.2f}" if a is not None and b else "     -"


def _num(value, fmt="9.3f") -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else f"{'-':>9s}"


def _first_difference(a: list, b: list):
    """The first position where a and b differ (the shorter one's length when one is a prefix
    of the other), or None when they are equal."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                None if len(a) == len(b) else min(len(a), len(b)))


def compare_logits(ours: dict, theirs: dict, paths: dict) -> dict:
    """The teacher-forced pass over SOURCE with TARGET on both sides: the ids each side fed
    (which must be equal), then the max absolute difference of the raw logits and of their
    log-softmax (float64) over every position and id, pass at LOGITS_TOLERANCE on the
    log-softmax; the compiled pass's log-probability of each output id (forward's "log_probs",
    what the pages show) against transformers' log-softmax at those ids; and, where
    paths["float64"] holds transformers' pass in float64, each side's distance from it."""
    import numpy as np

    why = ours.get("logits_failed") or theirs.get("failed") or ours.get("failed") or (
        None if all(Path(paths[side]).exists() for side in ("ours", "theirs"))
        else "no logits written")
    if why:
        return {"error": why}
    for key in ("tf_source_ids", "tf_decoder_ids", "tf_output_ids"):
        if ours[key] != theirs[key]:
            return {"error": f"{key[3:]} differ (ours {ours[key]}, transformers {theirs[key]})"}
    a, b = np.load(paths["ours"]), np.load(paths["theirs"])
    if a.shape != b.shape:
        return {"error": f"logits' shapes differ (ours {a.shape}, transformers {b.shape})"}

    def log_softmax(x):
        x = x.astype(np.float64)
        x = x - x.max(axis=-1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    la, lb = log_softmax(a), log_softmax(b)
    diff = np.abs(la - lb)
    where = np.unravel_index(int(diff.argmax()), diff.shape)
    rows = np.arange(len(theirs["tf_output_ids"]))
    theirs_scored = lb[rows, theirs["tf_output_ids"]]
    reference = {}
    if Path(paths.get("float64", "")).is_file():  # how far each side is from the exact result
        exact = log_softmax(np.load(paths["float64"]))
        reference = {"ours_vs_float64": float(np.abs(la - exact).max()),
                     "theirs_vs_float64": float(np.abs(lb - exact).max())}
    return {**reference, "shape": list(a.shape),
            "raw": float(np.abs(a.astype(np.float64) - b).max()),
            "log_softmax": float(diff.max()), "at": [int(i) for i in where],
            "pass": bool(diff.max() <= LOGITS_TOLERANCE),
            "argmax_equal": bool((a.argmax(-1) == b.argmax(-1)).all()),
            "compiled_log_probs": float(np.abs(np.asarray(ours["tf_log_probs"])
                                               - theirs_scored).max())}


def equality(ours: dict, theirs: dict, paths: dict, tokens: int, indent: str = "  ") -> dict:
    """Greedy ids, teacher-forced logits (compare_logits) and generate with the folder's
    generation_config.json, ours against theirs: printed, and returned as a dict."""
    found = {}
    if "ids" in ours and "ids" in theirs:
        a, b = ours["ids"], theirs["ids"]
        same = a == b
        first_diff = _first_difference(a, b)
        print(f"{indent}greedy ids equal: {'yes' if same else 'NO'} (ours {len(a)}, "
              f"transformers {len(b)} tokens" + ("" if same else
                                                 f"; first difference at step {first_diff}: "
                                                 f"ours {a[first_diff:first_diff + 3]}, "
                                                 f"transformers {b[first_diff:first_diff + 3]}")
              + ")")
        found.update(ids_equal=same, first_difference=first_diff, ours_ids=a, theirs_ids=b)
        if len(a) < tokens:
            print(f"{indent}ours stopped by {ours.get('stopped_by')}")
    else:
        found["ids_equal"] = None
    logits = compare_logits(ours, theirs, paths)
    if "error" in logits:
        print(f"{indent}teacher-forced logits: not compared: {logits['error']}")
        found.update(logits_max_diff=None, logits_pass=None, logits_error=logits["error"])
    else:
        print(f"{indent}teacher-forced logits {tuple(logits['shape'])}, same ids fed: max "
              f"|diff| log-softmax {logits['log_softmax']:.2e} "
              f"({'pass' if logits['pass'] else 'FAIL'} at {LOGITS_TOLERANCE:g}; at position "
              f"{logits['at'][0]}, id {logits['at'][1]}), raw logits {logits['raw']:.2e}, argmax "
              f"equal: {'yes' if logits['argmax_equal'] else 'NO'}; the compiled pass's "
              f"log-probs of the output ids {logits['compiled_log_probs']:.2e}")
        if "ours_vs_float64" in logits:
            print(f"{indent}  each side's log-softmax against transformers' same pass in float64: "
                  f"ours {logits['ours_vs_float64']:.2e}, transformers "
                  f"{logits['theirs_vs_float64']:.2e}")
        found.update(logits_max_diff=logits["log_softmax"], raw_logits_max_diff=logits["raw"],
                     logits_pass=logits["pass"], logits_argmax_equal=logits["argmax_equal"],
                     compiled_log_probs_max_diff=logits["compiled_log_probs"],
                     **{key: logits[key] for key in ("ours_vs_float64", "theirs_vs_float64")
                        if key in logits})
    why = ours.get("beam_failed") or ("no beam ids" if "beam_ids" not in ours else None) or (
        theirs.get("failed") or ("no beam ids" if "beam_ids" not in theirs else None))
    if why:
        print(f"{indent}generate with the folder's generation_config.json: not compared: {why}")
        found.update(beam_ids_equal=None, beam_error=why)
    else:
        a, b = ours["beam_ids"], theirs["beam_ids"]
        same, at = a == b, _first_difference(a, b)
        print(f"{indent}generate with the folder's generation_config.json "
              f"({ours['beam_method']}, at most {tokens} new tokens): ids equal: "
              f"{'yes' if same else 'NO'} (ours {len(a)}, transformers {len(b)} tokens; "
              f"{ours['beam_seconds']:.2f} s, {theirs['beam_seconds']:.2f} s"
              + ("" if same else f"; first difference at step {at}: ours {a[at:at + 3]}, "
                                 f"transformers {b[at:at + 3]}") + ")")
        if ours.get("beam_notes"):
            print(f"{indent}  our settings' notes: " + " ".join(ours["beam_notes"]))
        found.update(beam_ids_equal=same, beam_first_difference=at,
                     beam_method=ours["beam_method"], ours_beam_ids=a, theirs_beam_ids=b)
    return found


def report(name: str, info: dict, ours: dict, theirs: dict, tokens: int, load: list,
           paths: dict, source: str, repeats: int = REPEATS, also: tuple | None = None,
           free: tuple = (0, 0)) -> dict:
    """What the run of both sides on source (the folder, or the hub name) gave, printed; and
    the same as a dict (printed as the JSON line). also: (label, base folder's name, theirs,
    paths) of a second run of transformers that ours is compared with as well."""
    file = info.get("weights", "model.safetensors")
    weights = info["files"][file]
    line = {"model": name, "hub": info["hub"], "dtype": info["dtype"], "opened_as": source,
            "weights_mb": round(weights / 2**20), "new_tokens": tokens}
    by_name = source == info["hub"]
    how = "by hub name, offline from a hub cache" if by_name else "by folder"
    print(f"\n== {name} ({info['hub']}, random weights; {file} {weights / 2**20:.0f} MB "
          f"{info['dtype']}, {info['parameters'] / 1e6:.0f}M parameters; source "
          f"{info['source_pieces']} ids)\n  opened {how}: {source}"
          + (f" (ours read {ours['read_from']})" if by_name and "read_from" in ours else ""))
    totals = {}
    for side, d in (("ours", ours), ("theirs", theirs)):
        if all(k in d for k in ("import", "load", "first")):
            totals[side] = d["import"] + d["load"] + d["first"]
    refused = ours.get("refused") or ours.get("failed")
    if refused:
        what = "refused" if "refused" in ours else "failed"
        print(f"  ours {what}: {refused}")
        line["ours"] = f"{what}: {refused}"
    if theirs.get("failed"):
        print(f"  transformers failed: {theirs['failed']}\n{theirs.get('stderr', '')}")
        line["theirs"] = f"failed: {theirs['failed']}"
    print(f"  {'seconds (each side in a fresh process)':44s} {'ours':>9s} {'transformers':>13s} "
          f"{'ratio':>6s}")
    rows = [("import", "import"), ("load", "load"),
            (f"first translation ({tokens} tokens)", "first"),
            ("files to first translation", None),
            (f"warm translation (median of {repeats})", "warm"),
            ("maps with a typed target, first call", "maps_first"),
            (f"maps with a typed target (median of {repeats})", "maps")]
    for label, key in rows:
        a, b = (totals.get("ours"), totals.get("theirs")) if key is None else (
            ours.get(key), theirs.get(key))
        print(f"  {label:44s} {_num(a)} {_num(b, '13.3f')} {_ratio(a, b)}")
        line[key or "files_to_first"] = {"ours": a, "theirs": b,
                                         "ratio": a / b if a is not None and b else None}
    mem = {}
    for side, d in (("ours", ours), ("theirs", theirs)):
        if "rss_load" in d:
            mem[side] = (d["rss_load"] - d["rss_import"]) / weights
    print(f"  {'load: VmHWM growth / weights on disk':44s} {_num(mem.get('ours'), '9.2f')} "
          f"{_num(mem.get('theirs'), '13.2f')} {_ratio(mem.get('ours'), mem.get('theirs'))}")
    line["load_peak_over_weights"] = {**mem, "ratio": mem["ours"] / mem["theirs"]
                                      if len(mem) == 2 else None}
    # transformers maps model.safetensors: its pages count once touched, by the first translation
    first = {side: (d["rss_first"] - d["rss_import"]) / weights
             for side, d in (("ours", ours), ("theirs", theirs)) if "rss_first" in d}
    print(f"  {'to first translation: VmHWM growth / weights':44s} "
          f"{_num(first.get('ours'), '9.2f')} {_num(first.get('theirs'), '13.2f')} "
          f"{_ratio(first.get('ours'), first.get('theirs'))}")
    line["first_peak_over_weights"] = {**first, "ratio": first["ours"] / first["theirs"]
                                       if len(first) == 2 else None}
    line.update(equality(ours, theirs, paths, tokens))
    line["goals"] = goals(line, ours, info, tokens)
    if also:  # a tf form: ours also against transformers on the folder it was written from
        label, base, theirs_base, paths_base = also
        print(f"  against transformers on {label}:")
        line["against_base"] = {"opened_as": label, "base": base,
                                **equality(ours, theirs_base, paths_base, tokens, "    ")}
    print(f"  load average before ours, before theirs, after: "
          f"{', '.join(f'{x:.2f}' for x in load)} (2 cores; the measured process alone brings it "
          "near 1.5: well above 2 means another process shared them)")
    print(f"  free memory before ours, before theirs: {free[0] / 2**30:.1f}, "
          f"{free[1] / 2**30:.1f} GiB (MemFree, the files in the page cache: where it is short, "
          "the kernel must evict cached pages for every new one, and each GiB a load allocates "
          "costs about a second more; transformers' load maps the file and allocates little)")
    if ours.get("onednn"):  # the package turns oneDNN's kernels off before TensorFlow loads
        print("  WARNING: ours ran with oneDNN's kernels on, unlike a user's import of the "
              "package (TF_ENABLE_ONEDNN_OPTS=1 in the environment?)")
    if ours.get("phases"):  # ours, stage by stage (the import, the load, the first translation)
        print("  ours, where the time goes (s): " + "; ".join(
            f"{label} {seconds:.2f}" for label, seconds in ours["phases"].items()))
        line["ours_phases"] = ours["phases"]
    if ours.get("memory"):  # ours, stage by stage: what each left resident, the peak so far
        print("  ours, where the memory goes (MB; each stage's resident growth / the peak so "
              "far over the import's): " + "; ".join(
                  f"{label.removeprefix('load: ')} {kept / 2**20:+.0f} / {peak / 2**20:.0f}"
                  for label, (kept, peak) in ours["memory"].items()
                  if label.startswith("load"))
              + f"; resident after the load {ours['rss_load_kept'] / 2**20:.0f}, its peak "
              f"{(ours['rss_load'] - ours['rss_import']) / 2**20:.0f}, against the weights' "
              f"float32 bytes {info['parameters'] * 4 / 2**20:.0f}")
        line["ours_memory"] = ours["memory"]
    line["load_average"], line["mem_free"] = load, free
    if ours.get("notes"):
        print("  our generation settings' notes: " + " ".join(ours["notes"]))
    print("JSON " + json.dumps(line))
    return line


# Issue 40's goals: (key, what, the most it may be)
GOALS = (("files_to_first", "files to first translation / transformers'", 1.0),
         ("load_memory", "load's VmHWM growth / the weights' float32 bytes", 1.2),
         ("maps", "maps with a typed target / transformers' forward with attentions", 1.0),
         ("warm", "warm translation / transformers'", 0.8),
         ("step", "decode step / streaming its weights at NumPy's bandwidth", 1.3))


# For a goal not met: where each model's profile is printed above, and what was tried (the
# README's Benchmarks section has each attempt's figures)
LIMITS = {
    "files_to_first": "each model's 'ours, where the time goes' above: importing TensorFlow "
                      "and Keras (0.5-0.8 s more than torch and transformers), building the "
                      "Keras model, and tracing the decode loop at the first translation "
                      "(1,500-2,700 graph nodes at ~0.35 ms each in TensorFlow's Python), none "
                      "of which transformers has; NLLB's load also copies 2.3 GB into new "
                      "memory where transformers maps the file",
    "load_memory": "each model's 'ours, where the memory goes' above: a fixed ~90 MB over the "
                   "weights (the Rust tokenizer ~20-25 MB per vocabulary of 32k-58k pieces, "
                   "TensorFlow's first kernels at the probe ~20-30 MB, the Keras objects "
                   "~10 MB), which only the small models (231-284 MB of weights) feel",
    "maps": "the compiled pass (transformer/inference/forward.py) against transformers' eager "
            "forward: both read every weight once for a few dozen positions",
    "warm": "the same as the decode step below, times the tokens",
    "step": "each model's 'decode step, where the time goes' above: TensorFlow's matmuls "
            "themselves, one row against each matrix, read a small model's 1-4 MB matrices "
            "at well under NumPy's stream (a large model's at about it), and the rest of the "
            "step is attention over the cache, the log-softmax and top-k over the vocabulary. "
            "Part of it is the kernels' layout (bench/kernel_layout.py: one row against "
            "t5-small's decoder matrices, chained): TensorFlow reads our (in, out) kernels at "
            "1.9-2.1x NumPy's stream, the same matrices stored (out, in), Hugging Face's "
            "layout, as W x^T at 1.4-1.65x, and NumPy's own matmul at 0.97-1.22x; at NLLB's "
            "d_model 1.44x, 1.20x and 1.06x. Storing the kernels so is not done: every reader "
            "of a kernel (the analyses, our checkpoint format, training) changes with it",
}
TRIED = {
    "files_to_first": "tracing the decode loop in a thread during the load (the trace holds "
                      "the interpreter the load needs: t5-small's load 1.2 -> 1.8-2.3 s, the "
                      "total unchanged; NLLB's total 9.5 -> 11.4 s); tracing it during the "
                      "load in the same thread (NLLB -0.5 s, the small models none, and a "
                      "wasted trace wherever the first translation is another search); "
                      "decoding the first translation eagerly (t5-small 2.4-2.9 s against "
                      "1.55 s traced); building the variables on the mapped file without a "
                      "copy (safetensors puts no tensor on the 64-byte boundary TensorFlow's "
                      "kernels assume: 0 of NLLB's 509); Grappler's rewrites off (kept: "
                      "bart-large's first translation 2.49 -> 1.93 s); the probe's logits at "
                      "the last position only (kept: NLLB's probe alone 0.95-1.05 -> 0.80-0.86 "
                      "s; 0.93 s inside a load in the next bench run, within its noise); the "
                      "greedy loop's source batch static, so its reshapes build no shape ops "
                      "(kept: t5-small's trace 0.78 -> 0.55 s, NLLB's 1.43 -> 1.09 s)",
    "load_memory": "one tokenizer backend for both sides (NLLB's 256k pieces built once); "
                   "the copies into one block (WeightArena) and the file's pages given back "
                   "as they are copied (peak 2.1-2.5x -> 1.1-1.2x the weights); the probe's "
                   "logits at one position",
    "maps": "the compiled pass padded only under XLA (t5-small 0.065 -> 0.050 s)",
    "warm": "see the decode step",
    "step": "transformers' processors only on the steps they act on and the cache slot "
            "written by a scatter (kept: NLLB's vocabulary-wide selects 5.0 -> 0.5 ms a "
            "step); TensorFlow's single-threaded executor for the loop (t5-small 14.0-17.1 "
            "ms against 13.6-19.4: within noise, not kept); the cache updated in place (the "
            "layers' function calls hold a reference, so the scatter copies it)",
}


def goals(line: dict, ours: dict, info: dict, tokens: int) -> dict:
    """Each of issue 40's goals measured on this model ({key: value or None}), printed with
    whether it is met. The decode step: the marginal seconds per token of a greedy translation
    (twice the tokens against once, warm), against the bytes one step reads (ours["step_bytes"])
    streamed at the bandwidth NumPy measured in the same process."""
    found = {"files_to_first": line["files_to_first"]["ratio"], "maps": line["maps"]["ratio"],
             "warm": line["warm"]["ratio"], "load_memory": None, "step": None}
    if "rss_load" in ours:
        found["load_memory"] = (ours["rss_load"] - ours["rss_import"]) / (info["parameters"] * 4)
    if all(k in ours for k in ("warm_twice", "warm", "step_bytes", "bandwidth")):
        step = (ours["warm_twice"] - ours["warm"]) / tokens
        floor = ours["step_bytes"] / ours["bandwidth"]
        found["step"] = step / floor
        print(f"  decode step: {step * 1e3:.1f} ms a token; its weights "
              f"({ours['step_bytes'] / 2**20:,.0f} MiB) stream in {floor * 1e3:.1f} ms at "
              f"{ours['bandwidth'] / 2**30:.1f} GiB/s (NumPy, one thread)")
        if "step_matmuls" in ours:  # what limits it: TensorFlow's matmuls alone, the rest
            alone = ours["step_matmuls"]
            print(f"  decode step, where the time goes: its {ours['step_matrices']} matrices "
                  f"alone (one row each, in order, one compiled call) {alone * 1e3:.1f} ms "
                  f"({ours['step_matrix_bytes'] / alone / 2**30:.1f} GiB/s, "
                  f"{alone / floor:.2f}x NumPy's stream of the step's weights); the rest of the "
                  f"step (attention over the cache, the search over the vocabulary, the loop) "
                  f"{(step - alone) * 1e3:.1f} ms"
                  + (" (below zero: in a step TensorFlow's two threads run independent "
                     "products, such as the query and the key, side by side)"
                     if step < alone else ""))
            found["step_matmuls"] = alone / floor
    print("  issue 40's goals: " + "; ".join(
        f"{what} {found[key]:.2f} (<= {most}: {'met' if found[key] <= most else 'NOT met'})"
        if found[key] is not None else f"{what}: not measured" for key, what, most in GOALS))
    return found


def mem_free() -> int:
    """/proc/meminfo's MemFree in bytes (0 where it cannot be read)."""
    from transformer.core.limits import meminfo_bytes

    return meminfo_bytes("MemFree") or 0


def in_page_cache(folder: str) -> None:
    """Read every file of the folder once, so that each side finds them in the page cache (as
    a model opened before is): without it the side that runs first paid the disk reads of a
    file the other models' runs had evicted (bart-large-cnn's load 10.5 s, then 1.2 s for
    transformers right after)."""
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            with open(path, "rb") as f:
                while f.read(64 * 2**20):
                    pass


def offline_cache(home: Path, repo: str, folder: Path) -> dict:
    """A Hugging Face cache in home (HF_HOME) holding every file of folder as repo's main
    revision (testkit.hub_cache.lay_out_cache: blobs named by their sha256, hard links to the
    folder's files), and the environment in which both sides find it by name offline."""
    from testkit.hub_cache import lay_out_cache

    lay_out_cache(home / "hub", repo, {p.name: p for p in sorted(folder.iterdir()) if p.is_file()})
    return {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": None,
            "HUGGINGFACE_HUB_CACHE": None, "TRANSFORMERS_CACHE": None}


def _equality_cells(found: dict) -> str:
    """The summary's equality columns of what equality() found."""
    diff = found.get("logits_max_diff")
    logits = "-" if diff is None else f"{diff:.1e} {'pass' if found['logits_pass'] else 'FAIL'}"
    beam = found.get("beam_ids_equal")
    beam = "-" if beam is None else "equal" if beam else f"at {found['beam_first_difference']}"
    exact = "-" if "ours_vs_float64" not in found else \
        f"{found['ours_vs_float64']:.1e}, {found['theirs_vs_float64']:.1e}"
    return f"{str(found['ids_equal']):9s}  {logits:15s}  {beam:10s}  {exact}"


def bench(python: str, names: list[str], keep: Path, tokens: int = NEW_TOKENS,
          hub: bool = False, repeats: int = REPEATS) -> None:
    """Both sides on each model's folder (hub: on its hub name, from a cache laid out in a
    temporary HF_HOME, offline), reported, then the summary."""
    keep.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f}; folders in {keep}; transformers' side: "
          f"{python}; opened by {'hub name' if hub else 'folder'}; sentence "
          f"({len(SOURCE.split())} words): {SOURCE!r}")
    import tempfile

    lines = []
    for name in names:
        info = ensure_folder(python, name, keep)
        folder = str(keep / name)
        # each side's teacher-forced logits (and the hub cache: on the folders' file system,
        # where its blobs can be hard links)
        with tempfile.TemporaryDirectory(dir=keep, prefix=".run-") as tmp:
            paths = {side: str(Path(tmp) / f"{side}.npy")
                     for side in ("ours", "theirs", "float64")}
            source, env = folder, None
            if hub:
                source, env = info["hub"], offline_cache(Path(tmp) / "hf-home", info["hub"],
                                                         Path(folder))
            load = [os.getloadavg()[0]]
            in_page_cache(folder)
            free = [mem_free()]
            ours = run(sys.executable, OURS, env, folder=source, new=tokens,
                       logits=paths["ours"], repeats=repeats)
            load.append(os.getloadavg()[0])
            in_page_cache(folder)
            free.append(mem_free())
            theirs = run(python, THEIRS, env, folder=source, new=tokens, logits=paths["theirs"],
                         logits64=paths["float64"], repeats=repeats)
            load.append(os.getloadavg()[0])
            also = None
            if BENCH_MODELS[name][3] == "tf":  # transformers on the weights the file holds
                base = keep / BENCH_MODELS[name][0]
                ensure_folder(python, base.name, keep)
                base_paths = {**paths, "theirs": str(Path(tmp) / "base.npy"),
                              "float64": str(Path(tmp) / "base64.npy")}
                label, base_env = str(base), None
                if hub:
                    label = f"{info['hub']} (a cache of {base.name}: model.safetensors)"
                    base_env = offline_cache(Path(tmp) / "hf-home-base", info["hub"], base)
                in_page_cache(str(base))
                also = (label, base.name,
                        run(python, THEIRS, base_env, folder=source if hub else str(base),
                            new=tokens, logits=base_paths["theirs"],
                            logits64=base_paths["float64"], repeats=repeats), base_paths)
            lines.append(report(name, info, ours, theirs, tokens, load, paths, source,
                                repeats, also, free))
    print(f"\nsummary: ratios ours / transformers ({tokens} new tokens, greedy)")
    print(f"{'model':26s} {'files->1st':>10s} {'warm':>7s} {'maps':>7s} {'load mem':>9s} "
          f"{'1st mem':>8s}  ids equal  logits max diff  beam ids    vs float64: ours, theirs")
    widths = (10, 7, 7, 9, 8)
    for line in lines:
        if "ours" in line:  # refused or failed
            print(f"{line['model']:26s} {line['ours'][:110]}")
            continue
        cells = [line[k]["ratio"] for k in ("files_to_first", "warm", "maps")]
        cells += [line["load_peak_over_weights"]["ratio"], line["first_peak_over_weights"]["ratio"]]
        rows = [(line["model"], cells, line)]
        if "against_base" in line:  # a tf form against transformers on its base folder
            rows.append((f"  vs {line['against_base']['base']}", [None] * len(widths),
                         line["against_base"]))
        for model, cells, found in rows:
            print(f"{model[:26]:26s} " + " ".join(
                f"{c:{w}.2f}" if c is not None else f"{'-':>{w}s}" for c, w in zip(cells, widths))
                + f"  {_equality_cells(found)}")
    print("\nissue 40's goals (met: value <= the most): "
          + "; ".join(f"{key} <= {most}" for key, _, most in GOALS))
    print(f"{'model':26s} " + " ".join(f"{key:>14s}" for key, _, _ in GOALS))
    met = {key: 0 for key, _, _ in GOALS}
    measured = [line for line in lines if "goals" in line]
    for line in measured:
        cells = []
        for key, _, most in GOALS:
            value = line["goals"].get(key)
            if value is None:
                cells.append(f"{'-':>14s}")
                continue
            met[key] += value <= most
            cells.append(f"{value:9.2f} {'met' if value <= most else 'NOT':>4s}")
        print(f"{line['model'][:26]:26s} " + " ".join(cells))
    print(f"{'met on':26s} " + " ".join(f"{f'{met[k]} of {len(measured)}':>14s}"
                                         for k, _, _ in GOALS))
    for key, what, most in GOALS:  # a goal not met: how far, what limits it, what was tried
        missed = [(line["model"], line["goals"][key]) for line in measured
                  if line["goals"].get(key) is not None and line["goals"][key] > most]
        if missed:
            print(f"\n{key} ({what}) not met on "
                  f"{', '.join(f'{m} ({v:.2f})' for m, v in missed)} "
                  f"(<= {most}).\n  what limits it: {LIMITS[key]}\n  tried: {TRIED[key]}")
    print(f"load average {os.getloadavg()[0]:.2f}")


# ============================================================== --configs: what readers say
def _reader(model_type: str):
    from transformer.importers import HF_FAMILIES

    return HF_FAMILIES[model_type].config


def refusals(config: dict) -> list[str]:
    """Every error our reader refuses config with: the field an error names is dropped and
    the reader run again, until it reads the config or names no field of it."""
    import re

    from transformer.checkpoint.format import CheckpointError

    config, said = dict(config), []
    reader = _reader(config.get("model_type"))
    for _ in range(50):
        try:
            reader(config, "the model")
            return said
        except CheckpointError as err:
            sentence = str(err)
            said.append(sentence)
            named = re.search(r"field '([^']+)'|sets (\w+) to|gives (\w+)|"
                              r"describes (architectures)", sentence)
            key = next((g for g in (named.groups() if named else ()) if g), None)
            if key not in config:
                return said
            del config[key]
    return said


def diff(hub: dict, saved: dict) -> dict:
    return {"added": {k: saved[k] for k in sorted(set(saved) - set(hub))},
            "dropped": sorted(set(hub) - set(saved)),
            "changed": {k: [hub[k], saved[k]] for k in sorted(set(hub) & set(saved))
                        if hub[k] != saved[k]}}


def configs(python: str, where: Path) -> None:
    subprocess.run([python, "-m", "bench.real_models", "--write-configs", str(where)],
                   check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONWARNINGS": "ignore", "TRANSFORMERS_VERBOSITY": "error",
                        "TQDM_DISABLE": "1"})
    version = subprocess.run([python, "-c", "import transformers; print(transformers.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    for name in HUB_CONFIGS:
        hub = json.loads((where / name / "hub_config.json").read_text())
        saved = json.loads((where / name / "config.json").read_text())
        gen_hub = json.loads((where / name / "hub_generation_config.json").read_text())
        gen_saved = json.loads((where / name / "generation_config.json").read_text())
        print(f"\n== {name} ({HUB[name]}): config.json as transformers {version} saves it, "
              f"against the hub's")
        for what, d in (("config.json", diff(hub, saved)),
                        ("generation_config.json", diff(gen_hub, gen_saved))):
            print(f"  {what}: added {json.dumps(d['added'])}")
            print(f"  {what}: dropped {', '.join(d['dropped']) or '-'}")
            print(f"  {what}: changed {json.dumps(d['changed'])}")
        for label, config in (("the hub's config.json", hub),
                              (f"transformers {version}'s config.json", saved)):
            said = refusals(config)
            print(f"  our reader on {label}: " + ("reads it" if not said else
                                                   f"{len(said)} refusal(s)"))
            for sentence in said:
                print(f"    - {sentence}")
        print("JSON " + json.dumps({"model": name, "config": diff(hub, saved),
                                    "generation_config": diff(gen_hub, gen_saved),
                                    "refusals_hub": refusals(hub),
                                    "refusals_saved": refusals(saved)}))


def selected(text: str) -> list[str]:
    """--models: comma-separated names of BENCH_MODELS or of SELECTIONS, in order, once each."""
    names = []
    for item in (n.strip() for n in text.split(",")):
        names += SELECTIONS.get(item, [item] if item else [])
    return list(dict.fromkeys(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="default",
                        help=f"comma-separated, of {', '.join(SELECTIONS)} (selections: "
                             f"see the docstring) and {', '.join(BENCH_MODELS)}")
    parser.add_argument("--hub", action="store_true",
                        help="open each model by its hub name from a hub cache laid out in a "
                             "temporary HF_HOME, offline, instead of by its folder")
    parser.add_argument("--keep", default=DEFAULT_KEEP, help="where the folders are kept")
    parser.add_argument("--tokens", type=int, default=NEW_TOKENS, help="new tokens per translation")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help="runs each timed median takes")
    parser.add_argument("--configs", help="write the saved config.json of each model here, and "
                                          "say what our readers make of them")
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--write-configs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        return print(json.dumps(build_folder(args.build, Path(args.keep) / args.build)))
    if args.write_configs:
        return write_configs(Path(args.write_configs))
    python, why = hf_python()
    if python is None:
        return print(f"skipped: {why}")
    if args.configs:
        return configs(python, Path(args.configs))
    names = selected(args.models)
    unknown = [n for n in names if n not in BENCH_MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(BENCH_MODELS)}")
    bench(python, names, Path(args.keep), args.tokens, args.hub, args.repeats)


if __name__ == "__main__":
    main()
