"""explorer.about: what a model does and expects, from its metadata; where it came from; and
which inputs are far from its training data (issue 17 item 5)."""

from types import SimpleNamespace

import pytest

from explorer import about
from transformer.tokenizers.word import WordTokenizer


@pytest.fixture(scope="module")
def dates():
    from transformer import DEFAULT_CHECKPOINT, load_checkpoint

    return load_checkpoint(DEFAULT_CHECKPOINT)


def words_model(metadata=None):
    """A real word-level tokenizer (TextVectorization's vocabulary) in a checkpoint's place: the
    checks read only the metadata and the source tokenizer."""
    vocabulary = ("\n".join(["", "[UNK]", "the", "cat", "sat", "on", "mat"]) + "\n").encode()
    return SimpleNamespace(metadata=metadata or {},
                           source_tokenizer=WordTokenizer.from_vocabulary(vocabulary))


def test_the_dates_model_says_it_turns_dates_into_iso_dates(dates):
    described = about.about_checkpoint(dates, ["5 july 1987"])
    assert "turns dates written by people into ISO dates" in described.does
    assert described.training.startswith(f"{dates.metadata['train_examples']:,} generated")
    assert "day, month and year" in described.inputs
    assert described.examples == ["5 july 1987"]


@pytest.mark.parametrize("sentence", ["Friday, March 5, 2021", "5th of march 2021", "05.03.2021",
                                      "2021/03/05", "5 SEP 1999"])
def test_dates_as_trained_give_no_warning(dates, sentence):
    assert about.input_warnings(dates, sentence) == []


def test_a_sentence_without_digits_or_date_parts_may_give_nonsense(dates):
    no_digit, = about.input_warnings(dates, "hello there")
    assert "no digit" in no_digit and "may be nonsense" in no_digit
    no_date, = about.input_warnings(dates, "42 bananas")
    assert "no month name and no date in digits" in no_date
    assert about.input_warnings(dates, "   ") == []  # nothing typed: nothing to warn about


def test_many_unknown_pieces_may_give_nonsense_for_any_model():
    model = words_model()
    assert about.input_warnings(model, "the cat sat on the mat") == []
    assert about.input_warnings(model, "the cat sat on a hat") == []  # 2 of 6: a third, not more
    warning, = about.input_warnings(model, "the cat ate my hat")  # 3 of 5 unknown
    assert warning.startswith("3 of the 5 source pieces are unknown") and "[UNK]" in warning


def test_a_converted_model_names_its_recipe_and_languages():
    marian = about.describe({"source": {"recipe": "marian", "model": "Helsinki-NLP/opus-mt-en-fr",
                                        "source_lang": "en", "target_lang": "fr"}})
    assert marian.does == "It translates English into French."
    assert marian.languages == "English → French"
    assert "opus-mt-en-fr" in marian.training
    tutorial = about.describe({"source": {"recipe": "tf-tutorial"}})
    assert "converted from a model trained with the TensorFlow tutorial" in tutorial.does
    assert "Portuguese into English" in tutorial.does  # what the recipe usually translates
    assert tutorial.training.startswith("Not recorded")


def test_a_corpus_model_and_a_model_without_metadata():
    corpus = about.describe({"corpus": "fra.txt", "train_examples": 1000},
                            {"lang": "en"}, {"lang": "fr"}, ["Hello."])
    assert corpus.does == "It translates English into French, trained on fra.txt."
    assert corpus.training == "1,000 sentence pairs of fra.txt."
    assert about.describe({}).does.startswith("The checkpoint does not say")


def test_origin_of_our_own_and_of_converted_checkpoints(dates):
    own = about.origin(dates.metadata)
    assert own.how.startswith("Trained by this project") and own.command == dates.metadata["command"]
    converted = about.origin({"source": {
        "recipe": "keras-seq2seq", "form": "handwritten-mha", "command": "python -m x",
        "files": [{"role": "weights", "name": "m.weights.h5", "sha256": "ab" * 32}]}})
    assert converted.how.startswith("Converted from a model trained with the Keras seq2seq "
                                    "example (the hand-written attention form)")
    assert converted.files == [{"file": "m.weights.h5", "role": "weights", "sha256": "ab" * 8}]
    assert converted.command == "python -m x"
    assert about.origin({}).how == "The checkpoint does not record how it was made."


def test_a_hugging_face_model_is_said_opened_as_it_is_with_the_clis_line():
    """A family of the registry (asks nothing): not "converted", not "a translator" unless its
    files give a language pair, and the CLI's own line for its folder (the generic hf where the
    family has no subcommand of its own)."""
    bart = {"recipe": "bart", "source": {"recipe": "bart", "model": "facebook/bart-base",
                                         "files": [{"name": "config.json", "sha256": "cd" * 32}]}}
    came = about.origin(bart)
    assert came.how.startswith("Opened from a BART model's own files (facebook/bart-base)")
    assert "no conversion" in came.how and "Converted" not in came.how
    assert came.command == "python -m transformer.convert hf --model-dir MODEL_DIR --out model.ckpt"
    told = about.describe(bart)
    assert "translator" not in told.does and "sequence-to-sequence" in told.does
    marian = about.origin({"source": {"recipe": "marian", "command": "python -m y"}})
    assert marian.command == "python -m y"  # a recorded command is kept
    assert about.origin({"source": {"recipe": "marian"}}).command.startswith(
        "python -m transformer.convert marian --model-dir")


def test_the_from_scratch_notebooks_model_is_named_as_such():
    metadata = {"source": {"recipe": "keras-seq2seq", "form": "from-scratch-notebook"}}
    told = about.describe(metadata)
    assert "Transformer from scratch" in told.does and "English into French" in told.does
    assert "Spanish" not in told.does
    assert "English-to-French notebook" in about.origin(metadata).how
    # A form that is no string (a hand-edited file) is the recipe's.
    odd = about.describe({"source": {"recipe": "keras-seq2seq", "form": ["x"]}})
    assert "English-to-Spanish" in odd.does
