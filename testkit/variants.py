"""Small random models of the bundled checkpoint's vocabularies, for oracle tests: a config
changed as asked, every weight drawn from N(0, 0.5) so that attention is far from uniform."""
from __future__ import annotations

import dataclasses

SMALL = dict(d_model=16, num_heads=2, dff=32, head_dim=None, num_encoder_layers=2,
             num_decoder_layers=2)


def random_variant(base, seed: int = 0, **overrides):
    """An OpenedModel with `base`'s tokenizers and config (its vocabulary sizes, ids, options),
    made SMALL and then changed by `overrides`, with random weights from `seed`."""
    import keras
    import numpy as np

    from transformer import Transformer
    from transformer.inference.session import OpenedModel

    config = dataclasses.replace(base.config, **{**SMALL, **overrides})
    keras.utils.set_random_seed(seed)
    model = Transformer(config).build_weights()
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype(np.float32))
    return OpenedModel(config, model, base.source_tokenizer, base.target_tokenizer)
