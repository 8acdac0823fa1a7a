from hypothesis import given
from hypothesis import strategies as st

from retrieval.text import sentences, tokenise
from tests.reference import tokens


def test_lowercases_and_splits_on_non_alphanumerics():
    assert tokenise("Attention, Sparsity!") == ["attention", "sparsity"]
    assert tokenise("study 12 result 3") == ["study", "12", "result", "3"]


def test_unicode_letters_stay_in_one_token_and_hyphens_split():
    assert tokenise("naïve Bayes") == ["naïve", "bayes"]
    assert tokenise("GPT-4") == ["gpt", "4"]
    assert tokenise("snake_case") == ["snake", "case"]  # the underscore is not alphanumeric


def test_no_stemming_and_no_stop_words():
    assert tokenise("The models of the model") == ["the", "models", "of", "the", "model"]


def test_empty_and_punctuation_only():
    assert tokenise("") == []
    assert tokenise(" ... --- !!! ") == []


@given(st.text())
def test_matches_the_character_by_character_definition(text):
    assert tokenise(text) == tokens(text)


@given(st.text())
def test_tokens_are_nonempty_alphanumeric_and_lowercase_stable(text):
    for token in tokenise(text):
        assert token and all(ch.isalnum() for ch in token)
    assert tokenise(" ".join(tokenise(text))) == tokenise(text)


def test_sentences_keeps_the_first_n():
    text = "First one. Second one! Third? Fourth."
    assert sentences(text, 3) == ["First one.", "Second one!", "Third?"]
    assert sentences("") == []
