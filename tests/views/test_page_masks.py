"""views/Masks.py through AppTest, for every recipe a model can come from: every mask drawn is
the mask the model applies (its own source_mask / target_mask on the batch's padded ids), and
the masked row drawn is the model's attention row, with the NumPy softmax check passing for each
kind. The page says what this model masks (no padding mask, a start token with the pad id)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import open_page, plotly_array, set_widget, uploader

from explorer import state
from explorer.widgets import quoted
from transformer.core.kinds import KINDS
from transformer.core.masking import pad_ids

PAGE = "views/Masks.py"
OTHERS = ["5 Mar 2021", "Wednesday, September 22, 1999"]  # the page's default batch
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
D_MODEL, HEADS, DFF, SEQ_LEN = 16, 2, 32, 8


# ------------------------------------------------------------------ one builder per recipe
# Each takes a temporary folder and returns the OpenedModel a user of that recipe opens.
def _vocab(path: Path, tokens: list[str]) -> Path:
    path.write_text("\n".join(tokens) + "\n")
    return path


def own_checkpoint(tmp: Path):
    """Ours: the bundled default the app opens on."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def keras_example_checkpoint(tmp: Path):
    """The Keras example (tests/originals/keras_seq2seq.py) saved as .weights.h5: no padding
    mask, sources fed at a fixed length."""
    import keras
    from originals import keras_seq2seq

    from transformer.importers.keras_seq2seq import convert_keras_seq2seq

    words = ["friday", "march", "5", "2021", "mar", "wednesday", "september", "22", "1999"]
    source = ["", "[UNK]", *words, *(f"w{i}" for i in range(19))]
    target = ["", "[UNK]", "[start]", "[end]", *(f"s{i}" for i in range(16))]
    keras.utils.set_random_seed(1)
    model = keras_seq2seq.build_transformer(len(source), SEQ_LEN, D_MODEL, DFF, HEADS,
                                            target_vocab_size=len(target))
    model.save_weights(tmp / "translator.weights.h5")
    return convert_keras_seq2seq(tmp / "translator.weights.h5", _vocab(tmp / "eng.txt", source),
                                 _vocab(tmp / "spa.txt", target))


def seed_notebook_checkpoint(run: Path):
    """The seed notebook (tests/originals/keras_from_scratch.py), trained and saved by its own
    code under tf_keras (conftest's from_scratch_run): the folder its ModelCheckpoint wrote. No
    padding mask, sources fed at sequence_length, [start] / [end]."""
    from transformer.importers.keras_seq2seq import convert_keras_seq2seq

    return convert_keras_seq2seq(run / "checkpoint", run / "eng_vocab.txt", run / "fra_vocab.txt",
                                 num_heads=4)


def tf_tutorial_checkpoint(tmp: Path):
    """The TF tutorial (tests/originals/tf_tutorial.py) saved with save_weights: padding masked,
    WordPiece vocabularies, [sin | cos] positions."""
    import keras
    from originals import tf_tutorial

    from transformer.importers.tf_tutorial import convert_tf_tutorial

    reserved = ["[PAD]", "[UNK]", "[START]", "[END]"]
    source = _vocab(tmp / "pt_vocab.txt", reserved + [f"p{i}" for i in range(25)] + ["##s"])
    target = _vocab(tmp / "en_vocab.txt", reserved + [f"e{i}" for i in range(15)] + ["##s"])
    keras.utils.set_random_seed(3)
    model = tf_tutorial.Transformer(num_layers=2, d_model=D_MODEL, num_heads=HEADS, dff=DFF,
                                    input_vocab_size=30, target_vocab_size=20, dropout_rate=0.1)
    model((np.array([[2, 5, 3]]), np.array([[2, 7]])))  # build, as the tutorial does
    model.save_weights(tmp / "tutorial.weights.h5")
    # max_len: the tutorial's 2048 positions would let a random model decode for 2048 steps.
    return convert_tf_tutorial(tmp / "tutorial.weights.h5", source, target, max_len=SEQ_LEN)


def marian_checkpoint(tmp: Path):
    """A Marian (opus-mt) model, tests/fixtures/marian: its start token has the pad id."""
    from transformer.importers.hf import marian

    return marian.FAMILY.convert(FIXTURES / "marian")


RECIPES = {
    "own": own_checkpoint,
    "keras example": keras_example_checkpoint,
    "seed notebook": seed_notebook_checkpoint,
    "tf tutorial": tf_tutorial_checkpoint,
    "marian": marian_checkpoint,
}


@pytest.fixture(scope="module", params=list(RECIPES))
def recipe(request, tmp_path_factory):
    """(recipe name, its OpenedModel)."""
    where = (request.getfixturevalue("from_scratch_run") if request.param == "seed notebook"
             else tmp_path_factory.mktemp(request.param))
    return request.param, RECIPES[request.param](where)


@pytest.fixture
def page(app, recipe):
    """The Masks page with the recipe's model active: the bundled default as it opens, any other
    uploaded as a .ckpt, the way a user opens it."""
    from transformer.checkpoint.format import checkpoint_bytes

    name, ckpt = recipe
    if name != "own":
        data = checkpoint_bytes(ckpt.model, ckpt.source_tokenizer, ckpt.target_tokenizer,
                                ckpt.metadata)
        uploader(app).upload(f"{name}.ckpt", data).run()
        assert not app.exception, app.exception
        assert app.session_state[state.MODEL].startswith(f"{state.UPLOADED}:")
    return open_page(app, PAGE)


# ------------------------------------------------------------------ reading the page
def charts(at) -> list[dict]:
    """The page's figures, in order: source and target padding masks of the batch, then the
    look-ahead, decoder and memory masks of one row, then the masked row."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 6, [s["layout"]["title"]["text"] for s in specs]
    return specs


def drawn_ids(chart: dict) -> np.ndarray:
    """The padded ids a batch mask chart draws (its hover data holds each cell's id)."""
    return np.array([[int(cell[0]) for cell in row] for row in chart["data"][0]["customdata"]],
                    np.int32)


def vector(value) -> np.ndarray:
    """A 1-D Plotly JSON array (a list, or a typed array) as floats."""
    return plotly_array(value) if isinstance(value, dict) else plotly_array([value])[0]


def success_line(at) -> str:
    assert not at.error, [e.value for e in at.error]
    (line,) = [s.value for s in at.success]
    assert line.startswith("softmax(masked scores) computed here in NumPy equals")
    return line


def test_every_mask_drawn_is_the_models(page, recipe):
    name, ckpt = recipe
    cfg, model = ckpt.config, ckpt.model
    specs = charts(page)
    source_ids, target_ids = drawn_ids(specs[0]), drawn_ids(specs[1])
    sources = [state.DEFAULT_SOURCE, *OTHERS]
    np.testing.assert_array_equal(source_ids, pad_ids([ckpt.encode_source(s) for s in sources],
                                                      cfg.pad_id))
    assert (target_ids[:, 0] == cfg.start_id).all()
    source_mask = np.asarray(model.source_mask(source_ids))  # (B, 1, 1, N)
    target_mask = np.asarray(model.target_mask(target_ids))  # (B, 1, T, T)
    np.testing.assert_array_equal(plotly_array(specs[0]["data"][0]["z"]), source_mask[:, 0, 0])
    # The target's padding: the keys its last query may see (every key but padding).
    np.testing.assert_array_equal(plotly_array(specs[1]["data"][0]["z"]), target_mask[:, 0, -1])
    look_ahead, decoder, memory = (plotly_array(s["data"][0]["z"]) for s in specs[2:5])
    T = target_ids.shape[1]
    np.testing.assert_array_equal(look_ahead, np.tril(np.ones((T, T))))
    np.testing.assert_array_equal(decoder, target_mask[0, 0])  # row 0, the sidebar's
    np.testing.assert_array_equal(memory, np.broadcast_to(source_mask[0, 0], memory.shape))
    # What makes each recipe differ is in the batch, so a mask made from the ids would differ.
    if not cfg.mask_padding:
        assert (source_ids == cfg.pad_id).any() and source_mask.all()
    if cfg.start_id == cfg.pad_id:
        assert (target_mask[:, 0, :, 0] == 1).all()  # the start token, never padding
    if name == "own":
        assert not source_mask.all()  # the default batch pads row 0's source


def test_masked_row_is_the_models_for_every_kind(page, recipe):
    _, ckpt = recipe
    cfg = ckpt.config
    specs = charts(page)
    source_ids, target_ids = drawn_ids(specs[0]), drawn_ids(specs[1])
    out = ckpt.model((source_ids, target_ids), return_attention=True)
    masks = {"source": np.asarray(out["source_mask"])[0, 0, 0],  # (N,)
             "target": np.asarray(out["target_mask"])[0, 0]}  # (T, T)
    at = page
    for kind in KINDS.values():
        set_widget(at, "radio", "mask_kind", kind.label)
        layers = cfg.num_encoder_layers if kind.name == "encoder" else cfg.num_decoder_layers
        set_widget(at, "selectbox", "mask_layer", layers - 1)
        set_widget(at, "selectbox", "mask_head", cfg.num_heads - 1)
        queries = len(at.selectbox(key="mask_query").options)
        for query in sorted({0, queries // 2, queries - 1}):
            set_widget(at, "selectbox", "mask_query", query)
            line = success_line(at)
            fig = json.loads(at.get("plotly_chart")[-1].proto.spec)
            assert fig["layout"]["title"]["text"].startswith(
                f"{kind.label}, layer {layers - 1}, head {cfg.num_heads - 1}, query {query} ")
            expected = np.asarray(out[f"{kind.name}_attention"])[layers - 1, 0, cfg.num_heads - 1,
                                                                 query]
            (weights,) = [t for t in fig["data"] if t["name"] == "softmax weight"]
            np.testing.assert_allclose(vector(weights["y"]), expected, atol=1e-6)
            mask = masks["source"] if kind.key_side == "source" else masks["target"][query]
            (blocked,) = [t for t in fig["data"] if t["name"] == "blocked"]
            assert list(vector(blocked["x"])) == list(np.flatnonzero(mask == 0))
            shown = re.search(r"blocked keys: (\d+) of (\d+)", line).groups()
            assert tuple(map(int, shown)) == (int((mask == 0).sum()), len(mask))


def test_the_page_says_what_this_model_masks(page, recipe):
    _, ckpt = recipe
    cfg = ckpt.config
    told = " ".join([m.value for m in page.markdown] + [c.value for c in page.caption])
    start = ckpt.target_tokenizer.id_to_piece(cfg.start_id)
    assert f"the start token {quoted(start)} (id {cfg.start_id})" in told
    assert "`<s>`" not in told or start == "<s>"
    assert ("applies no padding mask**: every key is visible, padding included" in told) is (
        not cfg.mask_padding)
    assert ("position 0 of every target is the start token, **not padding**" in told) is (
        cfg.start_id == cfg.pad_id)


def test_other_rows_of_a_model_that_never_ends_are_cut_and_said_to_be(app):
    """An untrained model decodes every sentence to its step budget: the batch's other rows are
    decoded together for at most OTHER_ROW_STEPS tokens (their padding is what they show) and
    the page says which were cut; row 0 is the sidebar's whole translation."""
    import importlib

    from explorer import results
    from testkit.tiny import tiny_checkpoint_bytes
    from transformer import load_checkpoint

    steps = importlib.import_module("views.Masks").OTHER_ROW_STEPS
    data = tiny_checkpoint_bytes("never-ends", weight_seed=6, max_len=64)  # ends on none
    ckpt = load_checkpoint(data)
    whole = ckpt.translate(state.DEFAULT_SOURCE)
    assert whole.stopped_by == "length" and len(whole.token_ids) == 64 > steps
    uploader(app).upload("never-ends.ckpt", data).run()
    at = open_page(app, PAGE)
    target_ids = drawn_ids(charts(at)[1])
    lengths = (target_ids != ckpt.config.pad_id).sum(axis=1)  # the start token + the pieces
    others = results.batch_translations(ckpt, OTHERS, steps)
    assert [d.token_ids for d in others] == [ckpt.translate(s, max_len=steps).token_ids
                                             for s in OTHERS]  # decoded together, as alone
    assert all(len(d.token_ids) == steps and d.stopped_by == "length" for d in others)
    texts = [whole.text] + [d.text for d in others]  # row 0: the sidebar's whole translation
    # Each row: the start token + the text's pieces (encode_target adds an end, not fed).
    assert list(lengths) == [len(ckpt.encode_target(t)) for t in texts]
    assert lengths[0] > max(lengths[1:])
    told = " ".join(c.value for c in at.caption)
    assert f"Rows 1 and 2: the translation is cut at {steps} tokens without its end token" in told
