"""A real, tiny, untrained checkpoint with dates tokenizers: for upload tests and the load bench."""
from __future__ import annotations

from transformer.tokenizers.bpemb import BPEmbTokenizer


def tiny_checkpoint_bytes(name: str = "tiny-upload", weight_seed: int = 0, max_len: int = 40
                          ) -> bytes:
    """The tokenizers are always the same; weight_seed changes the weights (and the bytes);
    max_len the positions it reads (512: a long-sequence model)."""
    import keras

    from transformer import Transformer, TransformerConfig
    from transformer.checkpoint.format import checkpoint_bytes
    from transformer.training.data import date_pairs

    keras.utils.set_random_seed(0)
    pairs = date_pairs(300, seed=1)
    source = BPEmbTokenizer.train([s for s, _ in pairs], 80, lowercase=True)
    target = BPEmbTokenizer.train([t for _, t in pairs], 20, lowercase=True)
    config = TransformerConfig(
        src_vocab_size=source.vocab_size, tgt_vocab_size=target.vocab_size, d_model=16,
        num_heads=2, dff=32, num_encoder_layers=1, num_decoder_layers=1, max_len=max_len,
        pad_id=target.pad_id, start_id=target.start_id, end_id=target.end_id)
    keras.utils.set_random_seed(weight_seed)
    model = Transformer(config).build_weights()
    return checkpoint_bytes(model, source, target, {"name": name, "task": "dates"})
