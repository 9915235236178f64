"""Reading a Hugging Face config.json against one family's allow-list: every field is either
read, ignored (it changes nothing at inference) or refused by name, so a model whose math we do
not implement never opens as something it is not.

`ConfigReader(hf_config, where, family)` checks the model type, the architecture and every
field, then hands out typed values (`integer`, `same`, `boolean`, `choice`) whose refusals are
errors naming the field and the value."""

from __future__ import annotations

import json

from transformer.checkpoint.format import CheckpointError
from transformer.core import limits

__all__ = ["ConfigReader", "IGNORED_FIELDS"]

# Fields that do not change what the model computes at inference: training (dropout, layerdrop,
# init), generation defaults (generation_config.json is read on its own), bookkeeping.
IGNORED_FIELDS = frozenset({
    "_name_or_path", "_num_labels", "activation_dropout", "attention_dropout", "classif_dropout",
    "classifier_dropout", "encoder_layerdrop", "decoder_layerdrop", "init_std", "use_cache",
    "gradient_checkpointing", "id2label", "label2id", "num_labels", "torch_dtype", "dtype",
    "transformers_version", "bad_words_ids", "num_beams", "max_length", "min_length",
    "forced_eos_token_id", "forced_bos_token_id", "bos_token_id", "unk_token_id", "sep_token_id",
    "tokenizer_class", "prefix", "task_specific_params", "problem_type", "output_past",
    "output_attentions", "output_hidden_states", "return_dict", "extra_pos_embeddings",
    "early_stopping", "length_penalty", "no_repeat_ngram_size", "num_return_sequences",
    "do_sample", "temperature", "top_k", "top_p", "repetition_penalty", "max_new_tokens",
    "chunk_size_feed_forward", "pruned_heads", "torchscript", "use_bfloat16", "finetuning_task",
    "tf_legacy_loss", "keys_to_ignore_at_inference",
    "encoder_no_repeat_ngram_size", "num_beam_groups", "diversity_penalty", "typical_p",
    "remove_invalid_values", "return_dict_in_generate", "output_scores",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder",
    "_attn_implementation_autoset", "_commit_hash", "force_bos_token_to_be_generated",
    "dropout", "dropout_rate",
    # distillation bookkeeping (sshleifer/distilbart-*): how the student was made from its teacher
    "replacing_rate", "student_encoder_layers", "student_decoder_layers",
})


class ConfigReader:
    """One family's reading of config.json (parsed). allowed: {field: the values allowed, or
    None for any value of the right type, read through this reader}; meanings: {field: what a
    refused value would mean}."""

    def __init__(self, hf_config: dict, where: str, family: str, model_types: tuple[str, ...],
                 architectures: tuple[str, ...], allowed: dict, meanings: dict | None = None):
        self.config, self.where, self.family = hf_config, where, family
        model_type = hf_config.get("model_type")
        found_architectures = hf_config.get("architectures")
        if model_type not in model_types:
            found = f"model_type {model_type!r}" if model_type is not None else "no model_type"
            named = (f" (its architectures: {json.dumps(found_architectures)[:80]})"
                     if found_architectures else "")
            raise CheckpointError(f"{where} describes {found}, not a {family} model{named}; "
                                  f"only {', '.join(architectures)} is read here.")
        if found_architectures is not None and (
                not isinstance(found_architectures, list) or
                any(a not in architectures for a in found_architectures)):
            raise CheckpointError(
                f"{where} describes architectures {json.dumps(found_architectures)[:80]}; only "
                f"{', '.join(architectures)} (the model with its output layer) is read here.")
        for key, value in hf_config.items():
            if key in IGNORED_FIELDS or key in ("model_type", "architectures"):
                continue
            if key not in allowed:
                raise CheckpointError(
                    f"{where} has the field {key!r}, which this converter does not know; it "
                    "cannot promise to compute what transformers computes for it, so the model "
                    "is refused.")
            if allowed[key] is not None and value not in allowed[key]:
                meaning = (meanings or {}).get(key, "something this converter does not "
                                                    "implement")
                raise CheckpointError(f"{where} sets {key} to {json.dumps(value)[:80]}: "
                                      f"{meaning}.")

    def integer(self, key: str, default=None, low: int = 1, high: int | None = None) -> int:
        value = self.config.get(key, default)
        if value is None:
            raise CheckpointError(f"{self.where} does not give {key}.")
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # eos_token_id may be a one-element list
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise CheckpointError(f"{self.where} gives {key} as {json.dumps(value)[:80]}; it "
                                  f"must be a whole number of at least {low}.")
        if high is not None and value > high:
            raise CheckpointError(f"{self.where} gives {key} {value}; the limit is {high}.")
        return value

    def same(self, first: str, *others: str, default=None, high: int | None = None) -> int:
        """One value given under several names (encoder_layers, num_hidden_layers): all equal."""
        value = self.integer(first, default, high=high)
        for other in others:
            if other in self.config and self.integer(other) != value:
                raise CheckpointError(
                    f"{self.where} gives {first} {value} but {other} {self.config[other]}; "
                    f"this model has one value for both.")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise CheckpointError(f"{self.where} gives {key} as {json.dumps(value)[:80]}; it "
                                  "must be true or false.")
        return value

    def choice(self, key: str, default: str, choices: dict) -> str:
        """A string field mapped through choices ({their value: ours})."""
        value = self.config.get(key, default)
        if not isinstance(value, str) or value not in choices:
            raise CheckpointError(f"{self.where} gives {key} {json.dumps(value)[:80]}; only "
                                  f"{', '.join(choices)} are implemented here.")
        return choices[value]

    def token_id(self, key: str, default: int, vocab_size: int) -> int:
        value = self.integer(key, default, low=0)
        if value >= vocab_size:
            raise CheckpointError(f"{self.where} gives {key} {value}, outside the vocabulary "
                                  f"of {vocab_size}.")
        return value

    def sizes(self) -> dict:
        """The encoder-decoder sizes every BART-style config gives, within the limits."""
        heads = self.same("encoder_attention_heads", "decoder_attention_heads",
                          "num_attention_heads", high=limits.MAX_HEADS)
        d_model = self.same("d_model", "hidden_size")
        if d_model % heads:
            raise CheckpointError(f"{self.where} gives d_model {d_model} and {heads} heads; "
                                  f"{self.family}'s heads split d_model evenly.")
        return dict(
            d_model=d_model, num_heads=heads,
            dff=self.same("encoder_ffn_dim", "decoder_ffn_dim"),
            num_encoder_layers=self.same("encoder_layers", "num_hidden_layers",
                                         high=limits.NAMED_MAX_LAYERS),
            num_decoder_layers=self.integer("decoder_layers", high=limits.NAMED_MAX_LAYERS))
