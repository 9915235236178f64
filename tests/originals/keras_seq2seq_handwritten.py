"""The widely copied notebook variant of the Keras example, with a hand-written MultiHeadAttention.

Same PositionalEmbedding, encoder and decoder shapes as the keras.io example (post-LayerNorm,
dense_proj = Dense(relu) + Dense), but attention is its own layer: q_linear, k_linear, v_linear and
concat_linear Dense layers of embed_dim units, d_k = embed_dim // heads per head, scores scaled by
sqrt(d_k), the decoder's self-attention blocked by a look-ahead mask, and no padding mask at all.
"""

import keras
import tensorflow as tf
from keras import layers


class MultiHeadAttention(layers.Layer):
    def __init__(self, embed_dim, heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.heads = heads
        self.d_k = embed_dim // heads
        self.q_linear = layers.Dense(embed_dim)
        self.k_linear = layers.Dense(embed_dim)
        self.v_linear = layers.Dense(embed_dim)
        self.concat_linear = layers.Dense(embed_dim)

    def split_heads(self, x, batch_size):
        x = tf.reshape(x, (batch_size, -1, self.heads, self.d_k))
        return tf.transpose(x, perm=[0, 2, 1, 3])

    def attention(self, q, k, v, mask=None):
        scores = tf.matmul(q, k, transpose_b=True) / tf.math.sqrt(tf.cast(self.d_k, tf.float32))
        if mask is not None:
            scores += (1.0 - mask) * -1e9
        weights = tf.nn.softmax(scores, axis=-1)
        return tf.matmul(weights, v), weights

    def call(self, q, k, v, mask=None):
        batch_size = tf.shape(q)[0]
        q = self.split_heads(self.q_linear(q), batch_size)
        k = self.split_heads(self.k_linear(k), batch_size)
        v = self.split_heads(self.v_linear(v), batch_size)
        output, weights = self.attention(q, k, v, mask)
        output = tf.transpose(output, perm=[0, 2, 1, 3])
        concat = tf.reshape(output, (batch_size, -1, self.embed_dim))
        return self.concat_linear(concat)


class PositionalEmbedding(layers.Layer):
    def __init__(self, sequence_length, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.token_embeddings = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.position_embeddings = layers.Embedding(input_dim=sequence_length, output_dim=embed_dim)
        self.sequence_length = sequence_length
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim

    def call(self, inputs):
        length = tf.shape(inputs)[-1]
        positions = tf.range(start=0, limit=length, delta=1)
        return self.token_embeddings(inputs) + self.position_embeddings(positions)


class TransformerEncoder(layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.attention = MultiHeadAttention(embed_dim, num_heads)
        self.dense_proj = keras.Sequential(
            [layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()

    def call(self, inputs):
        attention_output = self.attention(inputs, inputs, inputs)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)


class TransformerDecoder(layers.Layer):
    def __init__(self, embed_dim, latent_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.attention_1 = MultiHeadAttention(embed_dim, num_heads)
        self.attention_2 = MultiHeadAttention(embed_dim, num_heads)
        self.dense_proj = keras.Sequential(
            [layers.Dense(latent_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()
        self.layernorm_3 = layers.LayerNormalization()

    def call(self, inputs, encoder_outputs):
        causal_mask = self.get_causal_attention_mask(inputs)
        attention_output_1 = self.attention_1(inputs, inputs, inputs, mask=causal_mask)
        out_1 = self.layernorm_1(inputs + attention_output_1)
        attention_output_2 = self.attention_2(out_1, encoder_outputs, encoder_outputs)
        out_2 = self.layernorm_2(out_1 + attention_output_2)
        proj_output = self.dense_proj(out_2)
        return self.layernorm_3(out_2 + proj_output)

    def get_causal_attention_mask(self, inputs):
        sequence_length = tf.shape(inputs)[1]
        i = tf.range(sequence_length)[:, tf.newaxis]
        j = tf.range(sequence_length)
        return tf.cast(i >= j, dtype=tf.float32)[tf.newaxis, tf.newaxis]  # (1, 1, T, T)


def build_transformer(vocab_size, sequence_length, embed_dim, latent_dim, num_heads,
                      target_vocab_size=None):
    target_vocab_size = target_vocab_size or vocab_size
    encoder_inputs = keras.Input(shape=(None,), dtype="int64", name="encoder_inputs")
    x = PositionalEmbedding(sequence_length, vocab_size, embed_dim)(encoder_inputs)
    encoder_outputs = TransformerEncoder(embed_dim, latent_dim, num_heads)(x)

    decoder_inputs = keras.Input(shape=(None,), dtype="int64", name="decoder_inputs")
    x = PositionalEmbedding(sequence_length, target_vocab_size, embed_dim)(decoder_inputs)
    x = TransformerDecoder(embed_dim, latent_dim, num_heads)(x, encoder_outputs)
    x = layers.Dropout(0.5)(x)
    decoder_outputs = layers.Dense(target_vocab_size, activation="softmax")(x)
    return keras.Model([encoder_inputs, decoder_inputs], decoder_outputs, name="transformer")
