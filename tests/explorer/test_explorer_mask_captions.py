"""explorer.mask_captions: the Masks page's words on the batch's two sides name only the special
tokens the model has (issue 24, item 5): Marian frames a source with </s> alone and starts the
decoder with its pad token, so no <s> is named for it."""

from pathlib import Path

from explorer.mask_captions import sides_caption
from transformer import DEFAULT_CHECKPOINT, load_checkpoint

MARIAN = Path(__file__).resolve().parents[1] / "fixtures" / "marian"


def test_our_model_frames_sources_with_its_start_and_end_tokens():
    ckpt = load_checkpoint(DEFAULT_CHECKPOINT)
    cfg = ckpt.config
    text = sides_caption(ckpt, 12, 11)
    assert f"`'<s>'` (id {cfg.start_id}) first and `'</s>'` (id {cfg.end_id}) last" in text
    assert f"the start token `'<s>'` (id {cfg.start_id}), then" in text
    assert "N = 12" in text and "T = 11" in text and "no separate start token" not in text
    assert "typed target" not in text
    assert "translation (row 0: your typed target, as every page feeds it)" in sides_caption(
        ckpt, 12, 11, typed=True)


def test_a_marian_model_is_never_said_to_have_a_start_token_it_lacks():
    ckpt = load_checkpoint(MARIAN)
    cfg = ckpt.config
    assert cfg.start_id == cfg.pad_id and not cfg.source_start
    text = sides_caption(ckpt, 9, 7)
    assert "<s>'" not in text  # no <s>: neither side has one
    assert f"pieces with `'</s>'` (id {cfg.end_id}) last, padded" in text
    assert (f"the start token `'<pad>'` (id {cfg.pad_id}), the pad id: this model has no "
            "separate start token") in text
