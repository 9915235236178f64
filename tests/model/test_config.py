"""TransformerConfig: JSON round trip and validation that names the bad field."""

import dataclasses
import json

import pytest

from transformer import TransformerConfig

NON_DEFAULT = dict(
    src_vocab_size=37,
    tgt_vocab_size=41,
    d_model=12,
    num_heads=3,
    dff=20,
    num_encoder_layers=1,
    num_decoder_layers=3,
    dropout_rate=0.25,
    max_len=64,
    positional="sinusoidal_fairseq",
    scale_embeddings=False,
    share_embeddings=False,
    tie_output=True,
    norm_first=True,
    pad_id=3,
    start_id=0,
    end_id=7,
    head_dim=5,
    activation="swish",
    layer_norm_epsilon=1e-5,
    output_bias=False,
    mask_padding=False,
    pad_source_to=20,
    source_start=False,
    source_end=False,
    target_start=True,
    embedding_norm=True,
    norm="rms",
    use_bias=False,
    attention_scale=False,
    feedforward="gated",
    position_offset=2,
    relative_attention=True,
    relative_buckets=8,
    relative_max_distance=20,
    output_scale=0.25,
)


def test_non_default_values_differ_from_defaults():
    # Guards the round-trip tests: every field must actually be exercised.
    default = TransformerConfig().to_dict()
    same = [k for k, v in NON_DEFAULT.items() if default[k] == v and k != "share_embeddings"]
    assert same == []
    assert set(NON_DEFAULT) == {f.name for f in dataclasses.fields(TransformerConfig)}


def test_default_config_is_the_paper_base_model():
    c = TransformerConfig()
    assert (c.d_model, c.num_heads, c.dff, c.num_encoder_layers, c.num_decoder_layers) == (512, 8, 2048, 6, 6)
    assert c.dropout_rate == 0.1 and c.positional == "sinusoidal" and not c.norm_first
    assert c.d_k == 64


@pytest.mark.parametrize("config", [TransformerConfig(), TransformerConfig(**NON_DEFAULT),
                                    TransformerConfig(src_vocab_size=9, tgt_vocab_size=9,
                                                      share_embeddings=True, dropout_rate=0)])
def test_json_round_trip(config):
    text = config.to_json()
    assert isinstance(json.loads(text), dict)
    again = TransformerConfig.from_json(text)
    assert again == config
    assert again.to_dict() == config.to_dict()
    assert TransformerConfig.from_json(text.encode("utf-8")) == config


@pytest.mark.parametrize("config", [TransformerConfig(), TransformerConfig(**NON_DEFAULT)])
def test_dict_round_trip(config):
    data = config.to_dict()
    assert data == {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    assert TransformerConfig.from_dict(data) == config
    assert TransformerConfig.from_dict(json.loads(json.dumps(data))) == config


def test_from_dict_missing_fields_take_defaults():
    c = TransformerConfig.from_dict({"d_model": 16, "num_heads": 4})
    assert c == TransformerConfig(d_model=16, num_heads=4)
    assert c.dff == 2048 and c.d_k == 4


def test_round_trip_detects_a_change():
    a = TransformerConfig(**NON_DEFAULT)
    data = a.to_dict()
    data["dff"] = 21
    assert TransformerConfig.from_dict(data) != a


INVALID = [
    # (overrides, words the message must contain)
    (dict(norm="batch"), ["norm", "batch"]),
    (dict(feedforward="moe"), ["feedforward", "moe"]),
    (dict(position_offset=-1), ["position_offset"]),
    (dict(positional="learned", position_offset=2), ["position_offset", "learned"]),
    (dict(relative_buckets=2), ["relative_buckets"]),
    (dict(relative_buckets=10**6), ["relative_buckets"]),
    (dict(relative_buckets=32, relative_max_distance=8), ["relative_max_distance"]),
    (dict(output_scale=0.0), ["output_scale"]),
    (dict(output_scale=float("nan")), ["output_scale"]),
    (dict(activation="gelu_new"), ["activation", "gelu_new"]),
    (dict(d_model=10, num_heads=3), ["d_model", "num_heads"]),
    (dict(d_model=512, num_heads=7), ["d_model", "num_heads"]),
    (dict(src_vocab_size=0), ["src_vocab_size"]),
    (dict(tgt_vocab_size=-5), ["tgt_vocab_size"]),
    (dict(d_model=0), ["d_model"]),
    (dict(d_model=-8, num_heads=2), ["d_model"]),
    (dict(num_heads=0), ["num_heads"]),
    (dict(num_heads=-8), ["num_heads"]),
    (dict(dff=0), ["dff"]),
    (dict(num_encoder_layers=0), ["num_encoder_layers"]),
    (dict(num_decoder_layers=-1), ["num_decoder_layers"]),
    (dict(max_len=0), ["max_len"]),
    (dict(dropout_rate=1.0), ["dropout_rate"]),
    (dict(dropout_rate=1.5), ["dropout_rate"]),
    (dict(dropout_rate=-0.1), ["dropout_rate"]),
    (dict(dropout_rate=float("nan")), ["dropout_rate"]),
    (dict(positional="rotary"), ["positional"]),
    (dict(positional="Sinusoidal"), ["positional"]),
    (dict(share_embeddings=True, src_vocab_size=100, tgt_vocab_size=101), ["share_embeddings"]),
    (dict(d_model="512"), ["d_model"]),
    (dict(num_heads=2.0), ["num_heads"]),
    (dict(dff=True), ["dff"]),
    (dict(norm_first="yes"), ["norm_first"]),
    (dict(tie_output=1), ["tie_output"]),
    (dict(scale_embeddings=None), ["scale_embeddings"]),
    (dict(dropout_rate="0.1"), ["dropout_rate"]),
    (dict(dropout_rate=True), ["dropout_rate"]),
    (dict(positional=None), ["positional"]),
    (dict(src_vocab_size=10.0), ["src_vocab_size"]),
    (dict(pad_id=-1), ["pad_id"]),
    (dict(pad_id=8000), ["pad_id"]),
    (dict(src_vocab_size=50, tgt_vocab_size=100, pad_id=60), ["pad_id"]),
    (dict(src_vocab_size=100, tgt_vocab_size=50, start_id=50), ["start_id"]),
    (dict(end_id=8000), ["end_id"]),
    (dict(pad_id=1, start_id=2, end_id=1), ["pad_id", "end_id"]),
    (dict(head_dim=0), ["head_dim"]),
    (dict(activation="tanh"), ["activation"]),
    (dict(layer_norm_epsilon=0.0), ["layer_norm_epsilon"]),
    (dict(layer_norm_epsilon=float("nan")), ["layer_norm_epsilon"]),
    (dict(max_len=2), ["max_len"]),
    (dict(pad_source_to=-1), ["pad_source_to"]),
    (dict(max_len=10, pad_source_to=11), ["pad_source_to"]),
    (dict(positional="rotary"), ["positional"]),
    (dict(pad_id=2, start_id=1, end_id=2), ["pad_id", "end_id"]),
]


def _id(case):
    overrides, _ = case
    return ",".join(f"{k}={v!r}" for k, v in overrides.items())


@pytest.mark.parametrize("overrides, words", INVALID, ids=[_id(c) for c in INVALID])
def test_invalid_config_raises_naming_the_field(overrides, words):
    with pytest.raises(ValueError) as info:
        TransformerConfig(**overrides)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not named in {message!r}"


@pytest.mark.parametrize("overrides, words", INVALID, ids=[_id(c) for c in INVALID])
def test_invalid_config_refused_by_from_dict(overrides, words):
    data = TransformerConfig().to_dict()
    data.pop("head_dim")  # resolved from d_model and num_heads unless the case sets it
    data.update(overrides)
    with pytest.raises(ValueError) as info:
        TransformerConfig.from_dict(data)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("field", ["d_modle", "heads", "dropout", "extra_field"])
def test_from_dict_unknown_field_is_named(field):
    data = TransformerConfig().to_dict()
    data[field] = 1
    with pytest.raises(ValueError, match=field):
        TransformerConfig.from_dict(data)


@pytest.mark.parametrize("text", ["[1, 2]", "42", '"d_model"', "null"])
def test_from_json_non_object_raises_value_error(text):
    with pytest.raises(ValueError):
        TransformerConfig.from_json(text)


@pytest.mark.parametrize("text", ["{", "{'d_model': 8}", "", b"\xff\xfe\xfa"])
def test_from_json_invalid_json_raises_value_error(text):
    with pytest.raises(ValueError):
        TransformerConfig.from_json(text)


def test_from_json_wrong_type_names_field():
    data = TransformerConfig().to_dict()
    data["d_model"] = 512.0  # JSON number with a fraction part: not an int
    with pytest.raises(ValueError, match="d_model"):
        TransformerConfig.from_json(json.dumps(data))


@pytest.mark.parametrize(
    "overrides",
    [
        dict(d_model=8, num_heads=8),
        dict(d_model=6, num_heads=3),
        dict(dropout_rate=0.0),
        dict(dropout_rate=0),
        dict(positional="learned"),
        dict(share_embeddings=True, src_vocab_size=30, tgt_vocab_size=30),
        dict(src_vocab_size=3, tgt_vocab_size=3, pad_id=2, start_id=0, end_id=1),
    ],
)
def test_valid_edge_configs_accepted(overrides):
    c = TransformerConfig(**overrides)
    assert TransformerConfig.from_json(c.to_json()) == c


def test_start_id_may_equal_pad_id():
    # Marian starts decoding with its pad id; the decoder never treats position 0 as padding.
    c = TransformerConfig(pad_id=5, start_id=5, end_id=0)
    assert c.start_id == c.pad_id == 5


def test_start_id_may_equal_end_id():
    # BART, mBART-50, M2M100 and NLLB start decoding with </s>: fed, never generated.
    c = TransformerConfig(pad_id=1, start_id=2, end_id=2)
    assert c.start_id == c.end_id == 2


def test_head_dim_defaults_to_d_model_over_heads_and_may_differ():
    assert TransformerConfig(d_model=512, num_heads=8).head_dim == 64
    c = TransformerConfig(d_model=10, num_heads=3, head_dim=10)  # keras key_dim = embed_dim
    assert c.d_k == 10
    # q, k, v project 10 -> 30 and the output 30 -> 10, per layer of each stack.
    small = TransformerConfig(src_vocab_size=5, tgt_vocab_size=5, d_model=10, num_heads=3,
                              head_dim=10, dff=4, num_encoder_layers=1, num_decoder_layers=1,
                              max_len=8, tie_output=True, output_bias=False, share_embeddings=True)
    attention = 3 * (10 * 30 + 30) + 30 * 10 + 10
    ffn = 10 * 4 + 4 + 4 * 10 + 10
    assert small.parameter_count() == 5 * 10 + (attention + ffn + 40) + (2 * attention + ffn + 60)


def test_output_bias_defaults_follow_tying():
    assert TransformerConfig().output_bias is True
    assert TransformerConfig(tie_output=True).output_bias is False
    assert TransformerConfig(tie_output=True, output_bias=True).output_bias is True
