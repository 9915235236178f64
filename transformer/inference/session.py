"""The runtime of one opened model: its tokenizers, the model, and what the pages ask of it
(translations with every step's attention, the maps of a sentence, how long a text may be).

OpenedModel.open(data) builds the model from a CheckpointData (from our checkpoint file, or from
an importer that mapped another program's files on load): the weights are copied once, into the
model's variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer.checkpoint.format import CheckpointData, build_model, read_checkpoint
from transformer.core import limits
from transformer.inference.decoded import Decoding
from transformer.inference.maps import attention_maps
from transformer.inference.outputs import AttentionMaps, LayerPredictions, TokenContributions
from transformer.inference.search_ours import beam_search, greedy_decode, greedy_decode_batch
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.tokenizers.base import Tokenizer

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets" / "checkpoints"
DEFAULT_CHECKPOINT = ASSETS / "dates.ckpt"


@dataclass
class OpenedModel:
    """A model opened to run: its config, the built model, its tokenizers and metadata, and what
    it computes for the pages (translate, generate, attention, contributions, layer_predictions).
    The file it was opened from is transformer.checkpoint's format (or another program's files,
    mapped by transformer.importers); load_checkpoint opens one."""

    config: TransformerConfig
    model: Transformer
    source_tokenizer: Tokenizer
    target_tokenizer: Tokenizer
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""  # sha256 of the file's bytes: the cache key for everything derived
    metadata_warnings: list[str] = field(default_factory=list)  # what the metadata schema dropped
    # How the original decodes it: its generation_config.json read (GenerationSettings), or None
    # for a model without one (ours: greedy, translate's default).
    generation: Any = None
    # Who gave it (core.limits.Budgets): a stranger's upload (UPLOAD) or a model the person
    # running the server named (limits.named_budgets()): the length and time budgets follow it.
    budgets: limits.Budgets = limits.UPLOAD

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or self.metadata.get("task") or "checkpoint")

    @property
    def source_len(self) -> int:
        """The most ids a source may have: max_len, or the fixed length a model is fed, cut to
        the length budget of typed text (limits.token_budget: the source is padded back to a
        fixed length, which the load checked against the budget of the attention maps)."""
        return min(self.config.pad_source_to or self.config.max_len,
                   limits.token_budget(self.config, self.budgets))

    @property
    def target_len(self) -> int:
        """The most ids a typed target may have (its pieces and </s>): max_len, cut to the
        length budget of typed text (limits.token_budget)."""
        return min(self.config.max_len, limits.token_budget(self.config, self.budgets))

    def pieces_cut(self, text: str, side: str = "source") -> int:
        """How many pieces of `text` do not fit (source_len or target_len), cut on encoding."""
        c = self.config
        if side == "source":  # [<s>] pieces [</s>]
            specials = int(c.source_start) + int(c.source_end)
            return max(0, len(self.source_tokenizer.pieces(text)) + specials - self.source_len)
        if side == "target":  # pieces </s> (the decoder's inputs are <s> pieces)
            return max(0, len(self.target_tokenizer.pieces(text)) + 1 - self.target_len)
        raise ValueError(f"side must be 'source' or 'target', got {side!r}")

    def length_limit(self, side: str = "source") -> str:
        """What cuts a text of this side, as the end of a sentence the sidebar shows ("the
        model's max_len (64 tokens)", "the length budget of typed text (512 tokens; the model's
        max_len is 16384)"): the model's own length, or the budget when it is less."""
        c = self.config
        if side not in ("source", "target"):
            raise ValueError(f"side must be 'source' or 'target', got {side!r}")
        limit = self.source_len if side == "source" else self.target_len
        if side == "source" and limit == c.pad_source_to:
            return f"the source length the model is fed ({limit} tokens)"
        if limit == c.max_len:
            return f"the model's max_len ({limit} tokens)"
        if limit == self.budgets.input_tokens:
            return (f"the length budget of typed text ({limit} tokens; the model's max_len is "
                    f"{c.max_len})")
        return (f"the length budget of typed text for a model of this size ({limit} tokens: "
                f"the attention maps of one request must fit in "
                f"{self.budgets.maps_bytes // limits.MB} MB)")

    def encode_source(self, text: str) -> list[int]:
        """The encoder's input ids: <s> pieces </s> (each special as the config says), cut to
        fit source_len (keeping the specials), then padded to pad_source_to when the model is
        fed a fixed length. The cut is the tokenizer's: no tensor of the full text exists."""
        c = self.config
        ids = self.source_tokenizer.encode(text, add_start=c.source_start, add_end=c.source_end,
                                           max_len=self.source_len)
        return ids + [c.pad_id] * (c.pad_source_to - len(ids))

    def encode_target(self, text: str) -> list[int]:
        """A typed target's output ids as teacher forcing scores them: pieces </s>, cut to fit
        target_len (keeping </s>). The decoder is fed <s> and all but the last."""
        return self.target_tokenizer.encode(text, add_start=self.config.target_start,
                                            add_end=True, max_len=self.target_len)

    def step_budget(self, beam_width: int = 1) -> int:
        """The most tokens one translation may emit (limits.step_budget)."""
        return limits.step_budget(self.config, beam_width, self.budgets)

    def translate(self, source: str, max_len: int | None = None, use_cache: bool = True,
                  head_mask=None, beam_width: int = 1, stop_at_end: bool = True,
                  seconds: float | None = None) -> Decoding:
        """Translation with every step's attention; .text is the translation.

        beam_width=1 decodes greedily; more runs beam search (a BeamDecoding, with the beam).
        max_len: the most tokens to emit, at most the step budget (step_budget: the model's
        max_len, limits.MAX_DECODE_STEPS and the memory of the attention maps), which is the
        default. seconds: the time budget, by default limits.MAX_DECODE_SECONDS (math.inf:
        none); the result's stopped_by says "end", "length" or "time" (see stopped_by_budget)."""
        if seconds is None:
            seconds = self.budgets.decode_seconds
        budget = self.step_budget(beam_width)
        max_len = budget if max_len is None else min(max_len, budget)
        if beam_width != 1:
            return beam_search(self.model, self.encode_source(source), beam_width=beam_width,
                               max_len=max_len, use_cache=use_cache, head_mask=head_mask,
                               tokenizer=self.target_tokenizer, seconds=seconds)
        return greedy_decode(self.model, self.encode_source(source), max_len=max_len,
                             use_cache=use_cache, stop_at_end=stop_at_end, head_mask=head_mask,
                             tokenizer=self.target_tokenizer, seconds=seconds)

    def stopped_by_budget(self, result: Decoding) -> str | None:
        """Why a translation stopped without its end token, as the end of a sentence the page
        shows ("the step budget of one translation (512 tokens)"), or None when it ended, or
        stopped at a max_len the user chose below the step budget."""
        if result.stopped_by == "stopped":  # a watched decode (compiled.Watch) the user stopped
            return "the Stop you pressed"
        if result.stopped_by == "time":
            return f"the time budget of one translation ({self.budgets.decode_seconds:g} s)"
        if result.stopped_by == "banned":  # transformers' search: generation.generate
            return ("a step at which the generation config banned every token (its "
                    "suppress_tokens, bad_words_ids or minimum length left none to choose)")
        budget = self.step_budget(getattr(result, "beam_width", 1))
        if result.stopped_by == "length" and len(result.token_ids) >= budget:
            if budget == self.budgets.decode_steps:
                return f"the step budget of one translation ({budget} tokens)"
            if budget == self.config.max_len:
                return f"the model's max_len ({budget} tokens)"
            return (f"the step budget of one translation for a model of this size ({budget} "
                    f"tokens: the attention maps of one request must fit in "
                    f"{self.budgets.maps_bytes // limits.MB} MB)")
        return None

    def attention(self, source: str, target: str | None = None, head_mask=None,
                  details: bool | tuple[str, int] = False, output_ids=None) -> AttentionMaps:
        """Every attention map of one teacher-forced pass, as NumPy arrays (the keys are listed
        in transformer.inference.maps): the maps of each kind, their masks, the tokens and ids of each
        side and the log-probability of each output token; details=True adds Q, K, V and the
        scores before masking of every layer, details=(kind, layer) those of one layer of one
        kind (each (1, H, ...), and "detail_of": what a page showing one layer needs).
        With target=None the target is the model's own greedy translation; a typed one is
        cut to target_len (and the source to source_len) as it is tokenized.
        output_ids (with target=None): the translation's ids when the caller has them already
        (translate(source).token_ids), so that the maps are those of the very translation it
        shows; by default they are decoded here.
        """
        if target is None and output_ids is not None:
            output_ids = [int(i) for i in output_ids]
        elif target is None:  # the translation's ids only: its steps' attention is not kept
            output_ids = self._translation_ids(source, head_mask)
        else:
            output_ids = self.encode_target(target)
        detail_of = tuple(details) if isinstance(details, (tuple, list)) else None
        return attention_maps(self, [self.encode_source(source)], [output_ids], head_mask,
                              bool(details), detail_of=detail_of)[0]

    def contributions(self, source: str, target: str | None = None,
                      method: str = "value_norm", **options
                      ) -> AttentionMaps | TokenContributions:
        """What each token contributed, by `method` (transformer.inference.contributions.METHODS;
        ValueError for another name). "value_norm" (Kobayashi et al. 2020): what `attention`
        returns, with each kind's "encoder"/"decoder"/"cross" (layers, heads, queries, keys)
        holding ||alpha^h_ij f_h(x_j)||, f_h(x) = (x W_V^h + b_V^h) W_O^h, plus "<kind>_summed"
        (layers, queries, keys), the norm of the sum over heads, and "<kind>_norms" (layers,
        heads, keys), ||f_h(x_j)||; options: head_mask, output_ids (as for `attention`).
        "alti" (ALTI+, Ferrando et al. 2022), "saliency", "input_x_gradient",
        "integrated_gradients" (steps=): "source_tokens", "target_tokens" (the decoder's
        inputs), "output_tokens", "source" (T, N) and "target" (T, T), row t output token t's
        contributions (target columns after t are 0); "alti" also "source_share" (T,), each
        layer's own contributions and the rollouts (transformer.inference.alti_inputs). The
        gradient methods take foil= (one id per output token, None for a step without one):
        each row then attributes log p(token) - log p(foil), "why this token rather than that
        one" (transformer.inference.gradients has the keys it adds)."""
        from transformer.inference.contributions import contributions

        return contributions(self, source, target, method, **options)

    def layer_predictions(self, source: str, target: str | None = None, k: int = 5,
                          head_mask=None, output_ids=None) -> LayerPredictions:
        """The logit lens: every decoder layer's output through the final norm and the output
        projection, per step the top-k (token, probability) and the rank of the token chosen
        (the translation's, or the typed target's); the dict is described in
        transformer.inference.logit_lens.layer_predictions."""
        from transformer.inference.logit_lens import layer_predictions

        return layer_predictions(self, source, target, k, head_mask, output_ids)

    def decoder_lens(self, source: str, target: str | None = None, output_ids=None,
                     max_steps: int | None = None, on_progress=None) -> dict:
        """DecoderLens: the decoder reading encoder layer k's output instead of the last, for
        every k (0: the embedded source), its greedy translation and the log-probability of
        each output token (the translation's, or the typed target's); the dict is described
        in transformer.inference.decoder_lens."""
        from transformer.inference.decoder_lens import decoder_lens

        return decoder_lens(self, source, target, output_ids=output_ids, max_steps=max_steps,
                            on_progress=on_progress)

    def knockout(self, source: str, target: str | None = None, *, step: int, layers,
                 source_positions, heads=None, output_ids=None,
                 max_steps: int | None = None) -> dict:
        """Attention knockout: decoder step `step` may not cross-attend to `source_positions`
        in `layers` and `heads` (default every head); the step's probabilities without and
        with it and the translation that follows (transformer.inference.knockout)."""
        from transformer.inference.knockout import knockout

        return knockout(self, source, target, step=step, layers=layers,
                        source_positions=source_positions, heads=heads, output_ids=output_ids,
                        max_steps=max_steps)

    def patch(self, clean: str, corrupted: str | None = None, target: str | None = None, *,
              corrupt_positions=None, step: int | None = None, foil: int | str | None = None,
              sites=None, output_ids=None, on_progress=None) -> dict:
        """Activation patching: each site (a layer's output at a position, a head's output) of
        `sites` (default every kind) restored from the clean run into the corrupted one, and an
        output step's score (log p, or the logit difference with a foil) per site
        (transformer.inference.patching)."""
        from transformer.inference.patching import SITES, patch

        return patch(self, clean, corrupted, target, corrupt_positions=corrupt_positions,
                     step=step, foil=foil, sites=SITES if sites is None else tuple(sites),
                     output_ids=output_ids, on_progress=on_progress)

    def translate_plain(self, source: str, head_mask=None) -> Decoding:
        """translate(source, head_mask=head_mask) without the steps' attention (their tokens
        and log-probabilities only), from the decode loop that keeps none: for callers that
        need the ids and text alone."""
        return greedy_decode_batch(self.model, [self.encode_source(source)],
                                   max_len=self.step_budget(), head_mask=head_mask,
                                   tokenizer=self.target_tokenizer, capture=False,
                                   seconds=self.budgets.decode_seconds)[0]

    def _translation_ids(self, source: str, head_mask=None) -> list[int]:
        """translate(source, head_mask=head_mask).token_ids (the maps come from one
        teacher-forced pass over them)."""
        return self.translate_plain(source, head_mask).token_ids

    @classmethod
    def open(cls, data: CheckpointData, where: str = "the checkpoint") -> "OpenedModel":
        """The model `data` describes, built with its weights (CheckpointError if they do not
        fit or do not compute finite numbers). `data.weights` is emptied: the model holds them."""
        from transformer.inference.generation_config import read_generation_config

        generation = (None if data.generation_config is None else
                      read_generation_config(
                          data.generation_config, data.config,
                          beam_budget=lambda beams: limits.step_budget(data.config, beams,
                                                                       data.budgets)))
        model = build_model(data.config, data.weights, where, data.budgets)
        data.weights = {}
        data.settle()  # the files' hashes, computed while the model was built
        return cls(data.config, model, data.source_tokenizer, data.target_tokenizer,
                   data.metadata, data.content_hash, data.metadata_warnings, generation,
                   data.budgets)

    def generate(self, source: str, settings=None, head_mask=None,
                 seconds: float | None = None) -> Decoding:
        """The translation as the original program decodes it: transformers' greedy or beam
        search with `settings` (a GenerationSettings; by default the model's generation config,
        else greedy with transformers' defaults), every step's attention kept (a BeamDecoding
        with its hypotheses for a beam). seconds: the time budget, limits.MAX_DECODE_SECONDS by
        default."""
        from transformer.inference.generation_config import read_generation_config
        from transformer.inference.search_transformers import generate

        if settings is None:
            settings = self.generation or read_generation_config(None, self.config)
        return generate(self.model, self.encode_source(source), settings,
                        tokenizer=self.target_tokenizer, head_mask=head_mask,
                        seconds=self.budgets.decode_seconds if seconds is None else seconds)


def load_checkpoint(source) -> OpenedModel:
    """Load a checkpoint from a path, bytes or a binary file object. Raises CheckpointError."""
    return OpenedModel.open(read_checkpoint(source))


Checkpoint = OpenedModel  # its name until issue 39 (the file format is transformer.checkpoint)
