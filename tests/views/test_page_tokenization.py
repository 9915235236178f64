"""views/Tokenization.py through AppTest: the pieces and ids the model reads, on the source
side and on the target side (the model's translation, or the target typed for teacher forcing)."""

import pytest
from conftest import open_page, set_widget

from explorer import state

PAGE = "views/Tokenization.py"


@pytest.fixture(scope="module")
def ckpt():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def id_tables(at) -> list:
    """The pieces-and-ids tables shown: the source's, then the target's."""
    tables = [d.value for d in at.dataframe if list(d.value.columns[:2]) == ["piece", "id"]]
    assert len(tables) == 2, [list(d.value.columns) for d in at.dataframe]
    return tables


def test_source_and_translation_ids_are_the_models(shared_app, ckpt):
    at = shared_app.page(PAGE)
    source, target = id_tables(at)
    source_ids = ckpt.encode_source(state.DEFAULT_SOURCE)
    assert list(source["id"]) == source_ids
    assert list(source["vocabulary piece"]) == ckpt.source_tokenizer.ids_to_pieces(source_ids)
    translation = ckpt.translate(state.DEFAULT_SOURCE)
    assert list(target["id"]) == [ckpt.config.start_id] + list(translation.token_ids)
    assert any(f"The model's own translation, `{translation.text!r}`" in c.value
               for c in at.caption)


def test_typed_target_is_used_for_teacher_forcing(app, ckpt):
    typed = "1999-12-31"
    set_widget(app, "radio", state.TARGET_MODE, state.TARGET_TYPED)
    set_widget(app, "text_input", state.TARGET, typed)
    at = open_page(app, PAGE)
    assert (f"The target you typed, `{typed!r}`, as the decoder reads it (teacher forcing)."
            in [c.value for c in at.caption])
    tok = ckpt.target_tokenizer
    expected_ids = [tok.start_id] + tok.encode(typed, add_end=True, max_len=ckpt.config.max_len)
    own_ids = [tok.start_id] + list(ckpt.translate(state.DEFAULT_SOURCE).token_ids)
    assert expected_ids != own_ids  # so the table below tells the two apart
    target = id_tables(at)[1]
    assert list(target["id"]) == expected_ids
    assert list(target["piece"]) == ["<s>", *tok.pieces(typed), "</s>"]
