"""The encoder-decoder Transformer (Vaswani et al. 2017) that returns every attention map."""

from __future__ import annotations

import keras
import tensorflow as tf

from transformer.core.kinds import KIND_NAMES, layer_counts
from transformer.model.attention import dense, leading_dims
from transformer.model.config import TransformerConfig
from transformer.model.layers import DecoderLayer, EncoderLayer, PositionalEmbedding, make_norm
from transformer.model.masks import look_ahead_mask, padding_mask
from transformer.model.relative import RelativePositionBias

ATTENTION_KINDS = KIND_NAMES  # ("encoder", "decoder", "cross")
# Inside a compiled function shared by every model of a config (transformer.inference.compiled.
# SharedFunction: the weights are inputs, mapped in a keras.StatelessScope), a stack of at least this
# many layers runs every layer through one function traced once with the first layer as its
# template and each layer's weights as arguments, called once per layer and never inlined: the
# time to trace and compile no longer grows with the depth (24 + 24 layers traced as 1 + 1). Below
# it the layers are traced one by one, which costs a few ms per layer but keeps a decode step of
# a small model free of call overhead.
SHARED_LAYER_MIN = 4


class Transformer(keras.Model):
    """encode(source) -> memory; decode(target, memory) -> logits; call((source, target)).

    Attention maps, hidden states and Q/K/V are returned by calls when asked, never stored on the
    layers, so one model object can serve many users at once.
    """

    def __init__(self, config: TransformerConfig, **kwargs):
        kwargs.setdefault("name", "transformer")
        super().__init__(**kwargs)
        config.validate()
        self.config = config
        c = config
        self.source_token_embedding = keras.layers.Embedding(
            c.src_vocab_size, c.d_model, name="source_token_embedding")
        if c.share_embeddings:
            self.target_token_embedding = self.source_token_embedding
        else:
            self.target_token_embedding = keras.layers.Embedding(
                c.tgt_vocab_size, c.d_model, name="target_token_embedding")
        embedding = dict(position_offset=c.position_offset)
        self.source_embedding = PositionalEmbedding(
            self.source_token_embedding, c.d_model, c.max_len, c.positional, c.scale_embeddings,
            norm=self._norm("embedding_norm") if c.embedding_norm else None,
            name="source_embedding", **embedding)
        self.target_embedding = PositionalEmbedding(
            self.target_token_embedding, c.d_model, c.max_len, c.positional, c.scale_embeddings,
            norm=self._norm("embedding_norm") if c.embedding_norm else None,
            name="target_embedding", **embedding)
        self.source_dropout = keras.layers.Dropout(c.dropout_rate)
        self.target_dropout = keras.layers.Dropout(c.dropout_rate)
        # T5: one relative position bias per stack, shared by its self-attention layers.
        self.encoder_position_bias = self.decoder_position_bias = None
        if c.relative_attention:
            bias = dict(num_heads=c.num_heads, num_buckets=c.relative_buckets,
                        max_distance=c.relative_max_distance, max_len=c.max_len)
            self.encoder_position_bias = RelativePositionBias(
                bidirectional=True, name="encoder_position_bias", **bias)
            self.decoder_position_bias = RelativePositionBias(
                bidirectional=False, name="decoder_position_bias", **bias)
        block = dict(head_dim=c.head_dim, activation=c.activation,
                     layer_norm_epsilon=c.layer_norm_epsilon, norm=c.norm, use_bias=c.use_bias,
                     attention_scale=c.attention_scale, feedforward=c.feedforward)
        self.encoder_layers = [
            EncoderLayer(c.d_model, c.num_heads, c.dff, c.dropout_rate, c.norm_first,
                         name=f"encoder_layer_{i}", **block)
            for i in range(c.num_encoder_layers)
        ]
        self.decoder_layers = [
            DecoderLayer(c.d_model, c.num_heads, c.dff, c.dropout_rate, c.norm_first,
                         name=f"decoder_layer_{i}", **block)
            for i in range(c.num_decoder_layers)
        ]
        # Pre-LN stacks end with a LayerNorm: their residual stream is never normalised otherwise.
        if c.norm_first:
            self.encoder_norm = self._norm("encoder_norm")
            self.decoder_norm = self._norm("decoder_norm")
        if not c.tie_output:
            self.output_projection = keras.layers.Dense(
                c.tgt_vocab_size, use_bias=c.output_bias, name="output_projection")
        elif c.output_bias:  # tied embeddings with a bias of their own (Marian's final_logits_bias)
            self.output_bias = self.add_weight(shape=(c.tgt_vocab_size,), initializer="zeros",
                                               name="output_bias")

    def _norm(self, name: str):
        return make_norm(self.config.norm, self.config.layer_norm_epsilon, name)

    def build(self, input_shape=None):
        """Every variable, from the config alone: each layer builds its own weights from
        d_model (no forward pass, which would trace the whole model symbolically). A layer that
        a call already built (model.encode on a fresh model builds the encoder's) is kept."""
        shape = (None, None, self.config.d_model)
        biases = (self.encoder_position_bias, self.decoder_position_bias)
        for layer in (self.source_embedding, self.target_embedding, *self.encoder_layers,
                      *self.decoder_layers, *(b for b in biases if b is not None)):
            if not layer.built:
                layer.build()
        for layer in ((self.encoder_norm, self.decoder_norm) if self.config.norm_first else ()) \
                + (() if self.config.tie_output else (self.output_projection,)):
            if not layer.built:
                layer.build(shape)
        self.built = True

    def build_weights(self) -> "Transformer":
        """Create every variable (see build); returns the model."""
        if not self.built:
            self.build()
        return self

    # ---------------------------------------------------------------- masks
    def source_mask(self, source_ids):
        """(B, N) ids -> (B, 1, 1, N): 1 where a key is a real token (all 1 when the config does
        not mask padding)."""
        source_ids = tf.convert_to_tensor(source_ids)
        if not self.config.mask_padding:
            return tf.ones_like(source_ids, tf.float32)[:, tf.newaxis, tf.newaxis, :]
        return padding_mask(source_ids, self.config.pad_id)

    def target_mask(self, target_ids):
        """(B, T) ids -> (B, 1, T, T): look-ahead AND padding. Padding is found by id; when the
        start id is the pad id (Marian), position 0 holds the start token and is never padding."""
        target_ids = tf.convert_to_tensor(target_ids)
        causal = look_ahead_mask(tf.shape(target_ids)[1])[tf.newaxis, tf.newaxis]  # (1, 1, T, T)
        if not self.config.mask_padding:
            return tf.ones_like(target_ids, tf.float32)[:, tf.newaxis, tf.newaxis, :] * causal
        real = padding_mask(target_ids, self.config.pad_id)  # (B, 1, 1, T)
        if self.config.start_id == self.config.pad_id:
            real = tf.maximum(real, tf.one_hot(0, tf.shape(target_ids)[1], dtype=real.dtype))
        return real * causal

    # ---------------------------------------------------------------- one layer of a stack
    def _run_layer(self, stack: str, i: int, *args, **kwargs):
        """Layer i of `stack` ("encoder" or "decoder") on these inputs. Inside a shared compiled
        function (weights mapped in a keras.StatelessScope, graph mode) and for a stack of at
        least SHARED_LAYER_MIN layers: through the stack's one layer function (see
        SHARED_LAYER_MIN), with layer i's weight values as its arguments."""
        from keras.src.backend.common.stateless_scope import get_stateless_scope

        layers = self.encoder_layers if stack == "encoder" else self.decoder_layers
        scope = get_stateless_scope()
        if scope is None or len(layers) < SHARED_LAYER_MIN or not tf.inside_function():
            return layers[i](*args, **kwargs)
        functions = self.__dict__.setdefault("_layer_functions", {})
        if stack not in functions:
            template = layers[0]

            def run(weights, args, kwargs):
                with keras.StatelessScope(list(zip(template.weights, weights))):
                    return template(*args, **kwargs)

            functions[stack] = tf.function(run, autograph=False,
                                           experimental_attributes={"_noinline": True})
        weights = [scope.get_current_value(w) for w in layers[i].weights]
        return functions[stack](weights, args, kwargs)

    # ---------------------------------------------------------------- encoder
    def encode(self, source_ids, training=False, head_mask=None, return_hidden_states=False,
               return_qkv=False, source_vectors=None, qkv_layer=None):
        """source_ids (B, N) -> dict:
        "memory" (B, N, d_model), "mask" (B, 1, 1, N), "attention" (L_enc, B, H, N, N);
        with return_hidden_states "hidden_states" (L_enc + 1, B, N, d_model) (the embedded input,
        then each layer's output); with return_qkv "q", "k", "v" (L_enc, B, H, N, d_k) and
        "scores" (L_enc, B, H, N, N) (scaled, before masking).
        head_mask: (L_enc, H), 0 silences a head. source_vectors: (B, N, d_model) token
        vectors in place of the embedding's rows (the masks still come from the ids).
        qkv_layer (an int, or an int32 scalar tensor): with return_qkv, that layer's q, k, v and
        scores alone, (1, B, H, ...) (see _pick_qkv).
        """
        source_ids = tf.convert_to_tensor(source_ids)
        mask = self.source_mask(source_ids)  # (B, 1, 1, N)
        x = self.source_dropout(self.source_embedding(source_ids, token_vectors=source_vectors),
                                training=training)
        bias = None
        if self.encoder_position_bias is not None:
            positions = tf.range(tf.shape(source_ids)[1])
            bias = self.encoder_position_bias(positions, positions)  # (1, H, N, N)
        hidden, layer_results = [x], []
        for i in range(len(self.encoder_layers)):
            result = self._run_layer("encoder", i, x, attention_mask=mask,
                                     head_mask=_row(head_mask, i), training=training,
                                     return_qkv=return_qkv, position_bias=bias)
            x = result["output"]
            hidden.append(x)
            layer_results.append(result)
        if self.config.norm_first:
            x = self.encoder_norm(x)
            hidden[-1] = x
        out = {"memory": x, "mask": mask,
               "attention": tf.stack([r["weights"] for r in layer_results])}
        if return_hidden_states:
            out["hidden_states"] = tf.stack(hidden)
        if return_qkv:
            out.update(_pick_qkv(layer_results, qkv_layer))
            if bias is not None:
                out["position_bias"] = bias  # (1, H, N, N): every layer adds this one
        return out

    # ---------------------------------------------------------------- decoder
    def decode(self, target_ids, memory, memory_mask, training=False, self_head_mask=None,
               cross_head_mask=None, return_hidden_states=False, return_qkv=False,
               target_vectors=None, qkv_layers=(None, None), cross_masks=None,
               logits_at=None):
        """target_ids (B, T), memory (B, N, d_model), memory_mask (B, 1, 1, N) -> dict:
        "logits" (B, T, tgt_vocab), "self_attention" (L_dec, B, H, T, T),
        "cross_attention" (L_dec, B, H, T, N), "mask" (B, 1, T, T) (the self-attention mask);
        optional "hidden_states" (L_dec + 1, B, T, d_model),
        "self_q"/"self_k"/"self_v"/"self_scores", "cross_q"/"cross_k"/"cross_v"/"cross_scores".
        target_vectors: (B, T, d_model) token vectors in place of the embedding's rows.
        qkv_layers: (self's, cross's) layer whose details return_qkv hands out alone (each None:
        every layer's; see encode's qkv_layer).
        cross_masks: one cross-attention mask per decoder layer, each broadcastable to (B, H, T,
        N), in place of memory_mask (attention knockout: edges a layer's heads may not use).
        logits_at: one position (an int, -1 the last): "logits" (B, 1, tgt_vocab) of that
        position alone (the load's probe: the output projection over the vocabulary once, not
        at every position).
        """
        target_ids = tf.convert_to_tensor(target_ids)
        self_mask = self.target_mask(target_ids)  # (B, 1, T, T)
        x = self.target_dropout(self.target_embedding(target_ids, token_vectors=target_vectors),
                                training=training)
        bias = None
        if self.decoder_position_bias is not None:
            positions = tf.range(tf.shape(target_ids)[1])
            bias = self.decoder_position_bias(positions, positions)  # (1, H, T, T)
        hidden, self_results, cross_results = [x], [], []
        for i in range(len(self.decoder_layers)):
            result = self._run_layer("decoder", i, x, memory, self_mask=self_mask,
                                     cross_mask=memory_mask if cross_masks is None
                                     else cross_masks[i],
                                     self_head_mask=_row(self_head_mask, i),
                                     cross_head_mask=_row(cross_head_mask, i), training=training,
                                     return_qkv=return_qkv, position_bias=bias)
            x = result["output"]
            hidden.append(x)
            self_results.append(result["self"])
            cross_results.append(result["cross"])
        x = self.final_norm(x)
        hidden[-1] = x
        projected = x if logits_at is None else x[:, logits_at:][:, :1]  # (B, T or 1, d_model)
        out = {"logits": self.project(projected), "mask": self_mask,
               "self_attention": tf.stack([r["weights"] for r in self_results]),
               "cross_attention": tf.stack([r["weights"] for r in cross_results])}
        if return_hidden_states:
            out["hidden_states"] = tf.stack(hidden)
        if return_qkv:
            for name, results, layer in (("self", self_results, qkv_layers[0]),
                                         ("cross", cross_results, qkv_layers[1])):
                out.update({f"{name}_{k}": v for k, v in _pick_qkv(results, layer).items()})
            if bias is not None:
                out["position_bias"] = bias  # (1, H, T, T): every self-attention adds it
        return out

    def final_norm(self, x):
        """The decoder stack's closing LayerNorm (pre-LN only)."""
        return self.decoder_norm(x) if self.config.norm_first else x

    def project(self, x):
        """(B, T, d_model) -> logits (B, T, tgt_vocab) (x times output_scale first: T5 v1.0's
        tied output)."""
        x = tf.convert_to_tensor(x)
        if self.config.output_scale != 1.0:
            x = x * self.config.output_scale
        if not self.config.tie_output:
            return dense(self.output_projection, x)
        # Tied: x E^T computed as (E x^T)^T. TensorFlow's CPU matmul with the big (V, d_model)
        # operand transposed cost 43 ms for 16 rows of opus-mt-en-fr's 59,514 x 512 embedding,
        # the other way round 14 ms (the small operand is transposed instead).
        embeddings = self.target_token_embedding.embeddings  # (V, d_model)
        rows = tf.reshape(x, [-1, embeddings.shape[1]])  # (rows, d_model)
        logits = tf.transpose(tf.matmul(embeddings, rows, transpose_b=True))  # (rows, V)
        logits = tf.reshape(logits, leading_dims(x) + [embeddings.shape[0]])  # (..., V)
        return logits + self.output_bias if self.config.output_bias else logits

    # ---------------------------------------------------------------- cached decoding
    def init_cache(self, memory, max_len):
        """The decoder's caches for decoding up to max_len tokens over memory (B, N, d_model):
        {"self": per layer (k, v) zeros (B, H, max_len, head_dim), written step by step;
         "cross": per layer (k, v) (B, H, N, head_dim), the encoder output's keys and values,
         computed once}."""
        c = self.config
        shape = (tf.shape(memory)[0], c.num_heads, max_len, c.head_dim)
        return {"self": [(tf.zeros(shape), tf.zeros(shape)) for _ in self.decoder_layers],
                "cross": [layer.cross_attention.project_key_value(memory)
                          for layer in self.decoder_layers]}

    def decode_step(self, token_ids, index, cache, memory_mask, self_head_mask=None,
                    cross_head_mask=None):
        """The decoder on new tokens only, reusing the cache: token_ids (B, n) sit at positions
        index .. index + n - 1 and attend to every earlier position through cache["self"].

        Returns {"logits" (B, n, V), "self_attention" (L_dec, B, H, n, max_len) (slots after the
        token's own position are blocked: weight 0), "cross_attention" (L_dec, B, H, n, N),
        "cache" (the updated cache)}. The same arithmetic as `decode` on the whole prefix: the
        rows of the new positions.
        """
        x = self.target_embedding(token_ids, offset=index)
        size = tf.shape(cache["self"][0][0])[2]
        positions = index + tf.range(tf.shape(token_ids)[1])  # (n,)
        visible = tf.cast(tf.range(size)[tf.newaxis, :] <= positions[:, tf.newaxis], x.dtype)
        visible = visible[tf.newaxis, tf.newaxis]  # (1, 1, n, max_len)
        bias = None
        if self.decoder_position_bias is not None:  # the new positions against every slot
            bias = self.decoder_position_bias(positions, tf.range(size))  # (1, H, n, max_len)
        self_cache, self_weights, cross_weights = [], [], []
        for i in range(len(self.decoder_layers)):
            result = self._run_layer("decoder", i, x, self_mask=visible, cross_mask=memory_mask,
                                     self_head_mask=_row(self_head_mask, i),
                                     cross_head_mask=_row(cross_head_mask, i),
                                     self_cache=cache["self"][i], cross_cache=cache["cross"][i],
                                     cache_update_index=index, position_bias=bias)
            x = result["output"]
            self_cache.append(result["self"]["cache"])
            self_weights.append(result["self"]["weights"])
            cross_weights.append(result["cross"]["weights"])
        return {"logits": self.project(self.final_norm(x)),
                "self_attention": tf.stack(self_weights), "cross_attention": tf.stack(cross_weights),
                "cache": {"self": self_cache, "cross": cache["cross"]}}

    # ---------------------------------------------------------------- both
    def call(self, inputs, training=False, head_mask=None, return_attention=False,
             return_hidden_states=False, return_qkv=False, qkv_layers=None):
        """inputs = (source_ids (B, N), target_ids (B, T)); target_ids start with start_id.

        Returns logits (B, T, tgt_vocab), or with any return_* flag a dict with "logits",
        "encoder_attention" (L_enc, B, H, N, N), "decoder_attention" (L_dec, B, H, T, T),
        "cross_attention" (L_dec, B, H, T, N), the masks they used, "source_mask" (B, 1, 1, N)
        (encoder and cross keys) and "target_mask" (B, 1, T, T), and the requested extras, prefixed
        "encoder_",
        "decoder_" (self-attention) and "cross_"; with return_qkv and T5's relative attention also
        "encoder_position_bias" (1, H, N, N) and "decoder_position_bias" (1, H, T, T), the bias
        every layer's scores include.
        head_mask: {"encoder": (L_enc, H), "decoder": (L_dec, H), "cross": (L_dec, H)}, any subset;
        0 silences a head's output. qkv_layers: {"encoder": i, "decoder": j, "cross": k} (ints
        or int32 scalar tensors): with return_qkv, each kind's q, k, v and scores of that layer
        alone, (1, B, H, ...), without holding every layer's (a page showing one layer).
        """
        source_ids, target_ids = inputs
        qkv_layers = qkv_layers or {}
        head_mask = head_mask or {}
        unknown = set(head_mask) - set(ATTENTION_KINDS)
        if unknown:
            raise ValueError(f"head_mask keys must be among {ATTENTION_KINDS}, got {sorted(unknown)}")
        c = self.config
        layers = layer_counts(c)
        for kind, mask in head_mask.items():
            if mask is not None and tuple(mask.shape) != (layers[kind], c.num_heads):
                raise ValueError(f"head_mask[{kind!r}] must have shape "
                                 f"{(layers[kind], c.num_heads)} (layers, heads), got {tuple(mask.shape)}")
        enc = self.encode(source_ids, training=training, head_mask=head_mask.get("encoder"),
                          return_hidden_states=return_hidden_states, return_qkv=return_qkv,
                          qkv_layer=qkv_layers.get("encoder"))
        dec = self.decode(target_ids, enc["memory"], enc["mask"], training=training,
                          self_head_mask=head_mask.get("decoder"),
                          cross_head_mask=head_mask.get("cross"),
                          return_hidden_states=return_hidden_states, return_qkv=return_qkv,
                          qkv_layers=(qkv_layers.get("decoder"), qkv_layers.get("cross")))
        if not (return_attention or return_hidden_states or return_qkv):
            return dec["logits"]
        out = {"logits": dec["logits"], "encoder_attention": enc["attention"],
               "decoder_attention": dec["self_attention"], "cross_attention": dec["cross_attention"],
               "source_mask": enc["mask"], "target_mask": dec["mask"]}
        if return_hidden_states:
            out["encoder_hidden_states"] = enc["hidden_states"]
            out["decoder_hidden_states"] = dec["hidden_states"]
        if return_qkv:
            for name in ("q", "k", "v", "scores"):
                out[f"encoder_{name}"] = enc[name]
                out[f"decoder_{name}"] = dec[f"self_{name}"]
                out[f"cross_{name}"] = dec[f"cross_{name}"]
            if self.config.relative_attention:  # T5: the bias each stack's scores include
                out["encoder_position_bias"] = enc["position_bias"]  # (1, H, N, N)
                out["decoder_position_bias"] = dec["position_bias"]  # (1, H, T, T)
        return out

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(TransformerConfig.from_dict(config["config"]), name=config.get("name"))


def _row(head_mask, layer):
    """Row `layer` of an optional (layers, heads) head mask."""
    if head_mask is None:
        return None
    return tf.convert_to_tensor(head_mask, tf.float32)[layer]


def _pick_qkv(layer_results, layer=None):
    """{"q", "k", "v", "scores"} of the layers' results: every layer's stacked, (L, B, H, ...),
    or with `layer` that layer's alone, (1, B, H, ...). The pick is a running tf.where, each
    layer's folded in as it is made, so that a compiled pass never holds every layer's at
    once (a stack would: for a 12-layer encoder over 512 positions, 200 MB of scores)."""
    names = ("q", "k", "v", "scores")
    if layer is None:
        return {name: tf.stack([r[name] for r in layer_results]) for name in names}
    picked = {}
    for name in names:
        chosen = layer_results[0][name]
        for i, result in enumerate(layer_results[1:], start=1):
            chosen = tf.where(tf.equal(layer, i), result[name], chosen)
        picked[name] = chosen[None]
    return picked
