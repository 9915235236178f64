"""Compare heads and Head statistics with an uploaded model (issue 26): the two-checkpoint view
starts from the active model and another of its vocabulary, or says why it needs one; the
attention-sink line names the active model's own special tokens."""

import json
from types import SimpleNamespace

import pytest
from conftest import ROOT, uploader
from conftest import open_page as _page

from explorer import state, tokens

FIXTURES = ROOT / "tests" / "fixtures"
COMPARE, STATISTICS = "views/Compare_Heads.py", "views/Head_Statistics.py"


def _upload(at, files: dict[str, bytes]):
    uploader(at).set_value([(n, d, "application/octet-stream") for n, d in files.items()]).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def _files(family: str, **config_changes) -> dict[str, bytes]:
    folder = FIXTURES / family
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    if config_changes:  # another model of the same tokenizer (other bytes: another upload)
        config = json.loads(files["config.json"])
        files["config.json"] = json.dumps({**config, **config_changes}).encode()
    return files


@pytest.fixture(scope="module")
def bart_app():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    return _upload(at, _files("bart"))


def test_an_upload_alone_is_compared_with_itself_and_the_page_says_why(bart_app):
    at = _page(bart_app, COMPARE)
    active = at.session_state[state.MODEL]
    assert active.startswith(f"{state.UPLOADED}:")
    assert at.selectbox(key="cmp_ckpt_a").value == active
    assert at.selectbox(key="cmp_ckpt_b").value == active  # not the bundled dates model
    (info,) = [i.value for i in at.info if i.value.startswith("No other model here reads")]
    assert "the same tokens" in info and "Upload another checkpoint of this model" in info


def test_a_second_upload_of_the_same_vocabulary_is_the_default_partner(bart_app):
    first = bart_app.session_state[state.MODEL]
    at = _upload(bart_app, _files("bart", dropout=0.2))  # the same tokenizer, other files
    second = at.session_state[state.MODEL]
    assert second != first and second.startswith(f"{state.UPLOADED}:")
    at = _page(at, COMPARE)
    assert at.selectbox(key="cmp_ckpt_a").value == second  # the active model
    assert at.selectbox(key="cmp_ckpt_b").value == first  # its partner, not dates
    assert not [i for i in at.info if i.value.startswith("No other model here reads")]
    assert [c for c in at.get("plotly_chart") if c.proto.id.endswith("-cmp_ckpt_diff")]


def test_a_byte_level_model_is_compared_on_its_own_ids(bart_app):
    """Issue 38: BART (its output bytes that make no whole characters) against dates:
    "teacher-forced on the same target text" showed U+FFFD, and B's rows were the bytes of
    U+FFFD. A model is now fed its own translation where the text does not survive the other's
    tokenizer, and the page says so."""
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    at = _page(bart_app, COMPARE)
    at.selectbox(key="cmp_ckpt_b").set_value(state.bundled_default_choice()).run()
    assert not at.exception, at.exception
    [said] = [c.value for c in at.caption if "teacher-forced" in c.value]
    dates = load_checkpoint(DEFAULT_CHECKPOINT)
    own = dates.translate(at.session_state[state.SOURCE]).text
    # the bundled dates tokenizer cannot give back BART's byte-level text as it is
    assert said.startswith("Each checkpoint is teacher-forced on its own translation: A's")
    assert said.endswith(f"so B is fed its own, `'{own}'`.")
    [side] = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-cmp_ckpt_side")]
    assert "\\ufffd" not in side.proto.spec and "\ufffd" not in side.proto.spec
    layout = json.loads(side.proto.spec)["layout"]
    ticks = ["".join(layout[k].get("ticktext", [])) for k in sorted(layout) if k.startswith("yaxis")]
    assert any(own.replace("-", "") in t.replace("-", "") for t in ticks), ticks  # B's own rows


def _sinks_line(at) -> str:
    (line,) = [line for m in at.markdown for line in m.value.splitlines()
               if "**Attention sinks**" in line]
    return line


def test_head_statistics_name_the_models_own_special_tokens(bart_app):
    at = _page(bart_app, STATISTICS)  # BART: <s>, </s>, <pad>, all counted
    assert _sinks_line(at) == ("- **Attention sinks**: the weight on this model's special "
                               "tokens `<s>`, `</s>` and `<pad>`.")
    at = _page(_upload(at, _files("t5")), STATISTICS)  # T5: no start token
    assert _sinks_line(at) == ("- **Attention sinks**: the weight on this model's special "
                               "tokens `</s>` and `<pad>`.")


def _tokenizer(*pieces):
    """A tokenizer whose start, end and pad ids are these pieces."""
    return SimpleNamespace(start_id=0, end_id=1, pad_id=2, id_to_piece=lambda i: pieces[i])


def test_the_sinks_sentence_says_which_special_tokens_are_not_counted():
    nllb = (_tokenizer("eng_Latn", "</s>", "<pad>"), _tokenizer("fra_Latn", "</s>", "<pad>"))
    assert tokens.sinks_sentence(nllb) == (
        "**Attention sinks**: the weight on this model's special tokens `</s>` and `<pad>`; its "
        "`eng_Latn` and `fra_Latn` are not counted (the statistic counts `<s>`, `</s>` and "
        "`<pad>` by name).")
    words = (_tokenizer("[START]", "[END]", ""),) * 2
    assert tokens.sinks_sentence(words) == (
        "**Attention sinks**: the weight on `<s>`, `</s>` and `<pad>`, which this model does "
        "not use: its special tokens `[START]`, `[END]` and the empty piece are not counted, so "
        "the statistic is 0.")
