"""The converter's command line: python -m transformer.convert RECIPE ... --out OUT.ckpt

    python -m transformer.convert keras-seq2seq --weights W --source-vocab S --target-vocab T \
        [--num-heads H] --out OUT.ckpt
    python -m transformer.convert tf-tutorial --weights W --source-vocab S --target-vocab T \
        [--num-heads H] --out OUT.ckpt
    python -m transformer.convert marian --model-dir D --out OUT.ckpt   (or --hub NAME)
    python -m transformer.convert hf --model-dir D --out OUT.ckpt   (any Hugging Face family
        the registry reads, by config.json's model_type: transformer.importers.HF_FAMILIES)
    python -m transformer.convert upgrade IN.ckpt --out OUT.ckpt   (version 1 -> 2; no model built)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from transformer.checkpoint.format import CheckpointError, write_checkpoint
from transformer.importers import hf_family
from transformer.importers.hf.marian import REQUIRED_FILES as MARIAN_FILES
from transformer.importers.keras_seq2seq import convert_keras_seq2seq
from transformer.importers.tf_tutorial import TUTORIAL_POSITIONS, convert_tf_tutorial
from transformer.inference.session import OpenedModel

# ------------------------------------------------------------------ CLI
HF_COMMANDS = ("marian",)  # the Hugging Face families with a subcommand of their own; "hf" reads any


def hf_argv(recipe: str, model_dir: str, out: str) -> list[str]:
    """The command line that writes a Hugging Face model's folder as our checkpoint: its
    family's own subcommand where it has one (marian), else the generic hf."""
    command = recipe if recipe in HF_COMMANDS else "hf"
    return ["python", "-m", "transformer.convert", command, "--model-dir", model_dir,
            "--out", out]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer.convert",
        description="Convert a translator trained with someone else's code into a checkpoint.")
    sub = parser.add_subparsers(dest="recipe", required=True)
    for recipe, text in (("keras-seq2seq", "the Keras English-to-Spanish example (either form) "
                                           "or the 'Transformer from scratch' English-to-French "
                                           "notebook"),
                         ("tf-tutorial", "the TensorFlow 'Transformer and Keras' tutorial")):
        p = sub.add_parser(recipe, help=text)
        p.add_argument("--weights", required=True,
                       help=".weights.h5, .keras, or a TF checkpoint's .index file (or its prefix, "
                            "or the folder ModelCheckpoint wrote it in)")
        p.add_argument("--source-vocab", required=True, help="source vocabulary file")
        p.add_argument("--target-vocab", required=True, help="target vocabulary file")
        p.add_argument("--num-heads", type=int, default=None,
                       help="number of attention heads (needed when the weights do not tell)")
        p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
        if recipe == "tf-tutorial":
            p.add_argument("--max-len", type=int, default=None,
                           help=f"positions covered (default {TUTORIAL_POSITIONS}, the tutorial's)")
            p.add_argument("--mask-padding", choices=("yes", "no"), default=None,
                           help="mask padded keys (default yes, as the tutorial's mask_zero intends)")
    p = sub.add_parser("marian", help="a Hugging Face MarianMT model")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--model-dir", help="a folder with config.json, the weights and vocabularies")
    where.add_argument("--hub", help="a model name on the Hugging Face Hub (downloads it)")
    p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
    p = sub.add_parser("hf", help="a Hugging Face model of any family read here (its "
                                  "config.json's model_type tells which)")
    p.add_argument("--model-dir", required=True,
                   help="the model's folder (or a .zip of it) with config.json, "
                        "model.safetensors and its tokenizer's files")
    p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
    p = sub.add_parser("upgrade", help="rewrite a checkpoint of version 1 (weights.npz) as "
                                       "version 2 (weights.safetensors), everything else kept")
    p.add_argument("checkpoint", help="the checkpoint to read (.ckpt)")
    p.add_argument("--out", required=True, help="the checkpoint to write (.ckpt)")
    return parser


def upgrade(source, out) -> str:
    """Rewrite the checkpoint `source` as the current version at `out`: read and checked
    (read_checkpoint: config, tokenizers, metadata, every weight finite), then written with the
    same weights, config, tokenizers and metadata; no model is built. Returns what it did, as a
    sentence. Raises CheckpointError."""
    from transformer.checkpoint.format import FORMAT_VERSION, WEIGHTS_MEMBER, read_checkpoint

    data = read_checkpoint(source)
    before = Path(source).stat().st_size
    write_checkpoint(out, data)
    after = Path(out).stat().st_size
    was = data.format_version
    what = (f"upgraded {source} (version {was}, {WEIGHTS_MEMBER[was]}) to" if was < FORMAT_VERSION
            else f"{source} is already version {was}; rewrote it as")
    values = sum(w.size for w in data.weights.values())
    repaired = (f" (the metadata as read, repaired: {'; '.join(data.metadata_warnings)})"
                if data.metadata_warnings else "")
    return (f"{what} {out} (version {FORMAT_VERSION}, {WEIGHTS_MEMBER[FORMAT_VERSION]} stored "
            f"uncompressed): {len(data.weights)} weights ({values:,} float32 values), the "
            f"config, both tokenizers and the metadata kept{repaired}; "
            f"{before / 2**20:.1f} MB -> {after / 2**20:.1f} MB.")


def _download_marian(name: str) -> str:
    """The five files of a Marian model from the Hugging Face Hub (needs the network)."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, allow_patterns=list(MARIAN_FILES))
    except Exception as err:  # noqa: BLE001 - offline, unknown name, no huggingface_hub...
        raise CheckpointError(
            f"Could not download {name!r} from the Hugging Face Hub ({type(err).__name__}). "
            f"Offline, download {', '.join(MARIAN_FILES)} from the model's page and use "
            "--model-dir.") from None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    try:
        _run(args, "python -m transformer.convert " + shlex.join(argv))
    except CheckpointError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # reading past the readers' own errors, or writing --out
        print(f"error: {_os_error(err)}", file=sys.stderr)
        return 2
    return 0


def _os_error(err: OSError) -> str:
    """An OSError as an error message: the file and what the system said, no traceback."""
    where = f" {str(err.filename)!r}" if err.filename is not None else ""
    return f"could not read or write{where}: {err.strerror or type(err).__name__}."


def _run(args, command: str) -> None:
    """The conversion args ask for; raises CheckpointError (or OSError) on failure."""
    if args.recipe == "upgrade":
        print(upgrade(args.checkpoint, args.out))
        return
    if args.recipe == "keras-seq2seq":
        checkpoint = convert_keras_seq2seq(args.weights, args.source_vocab, args.target_vocab,
                                           args.num_heads, command=command)
    elif args.recipe == "hf":
        # The family's own mapping (the registry's data), written as it is with its
        # generation_config.json, no model built (as marian below); the file is checked like
        # any other when it is opened.
        data = hf_family(args.model_dir).data(args.model_dir, command=command)
        write_checkpoint(args.out, data)
        _say_wrote(args.out, data.config)
        return
    elif args.recipe == "tf-tutorial":
        mask = None if args.mask_padding is None else args.mask_padding == "yes"
        checkpoint = convert_tf_tutorial(args.weights, args.source_vocab, args.target_vocab,
                                         args.num_heads, max_len=args.max_len,
                                         mask_padding=mask, command=command)
    else:
        from transformer.importers.hf.marian import FAMILY  # imported only when asked

        model_dir = args.model_dir
        if args.hub:
            model_dir = _download_marian(args.hub)
        # The export builds no model: the mapped weights (checked, finite) are written as
        # they are; the file is checked like any other when it is opened.
        data = FAMILY.data(model_dir, command=command)
        write_checkpoint(args.out, data)
        _say_wrote(args.out, data.config)
        return
    _write(checkpoint, args.out)
    _say_wrote(args.out, checkpoint.config)


def _say_wrote(out, c) -> None:
    print(f"wrote {out}: {c.num_encoder_layers} encoder and {c.num_decoder_layers} decoder "
          f"layers, d_model {c.d_model}, {c.num_heads} heads of {c.head_dim}, dff {c.dff}, "
          f"vocabularies {c.src_vocab_size} / {c.tgt_vocab_size}")


def _write(checkpoint: OpenedModel, out) -> None:
    from transformer.checkpoint.format import save_checkpoint

    save_checkpoint(out, checkpoint.model, checkpoint.source_tokenizer, checkpoint.target_tokenizer,
                    checkpoint.metadata)


if __name__ == "__main__":
    raise SystemExit(main())

