"""Text processing shared by the index writer and the query path.

The analysis is part of the index's contract: the tokeniser's name and version, and the optional stemmer and
stop-word list, are stored in the index (``index_info``), and every text the index reads (a paper it adds, a
query it answers) is analysed exactly as the index was. A search refuses an index written by another tokeniser,
because the same query would silently match different terms.

Version 2 of the tokeniser folds before it splits (``fold``): letters lose their accents (Unicode NFKD, then
the combining diacritical marks dropped), TeX accent escapes become their letters (``Schr\\"odinger``,
``Schr\\"{o}dinger`` and ``Schr{\\"o}dinger`` are ``schrodinger``, as ``Schrödinger`` is), and the letters NFKD
leaves whole are spelled out (ß ss, æ ae, œ oe, ø o, ł l, đ and ð d, þ th, ı i). Version 1 only lowercased.
"""

from __future__ import annotations

import re
import unicodedata

TOKENISER_NAME = "unicode-alnum-lower"
TOKENISER_VERSION = "2"

# ``[^\W_]`` is "a word character but not the underscore": exactly the characters for which
# ``str.isalnum()`` is true, so "naïve" (folded "naive") stays one token and "GPT-4" gives "gpt", "4".
_TOKEN = re.compile(r"[^\W_]+")
# A sentence ends at . ! or ? followed by white space; good enough for abstracts, and deterministic.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

# The combining marks NFKD separates from Latin, Greek and Cyrillic letters: the blocks of combining
# diacritical marks (U+0300-036F and its extensions and supplement, the marks for symbols, the half marks).
# Marks of other scripts (Devanagari's virama, the kana's voicing marks) are part of their letters and stay.
_MARK_BLOCKS = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F))
_MARKS = {cp: None for low, high in _MARK_BLOCKS for cp in range(low, high + 1) if unicodedata.combining(chr(cp))}
# Letters that NFKD does not decompose (or, as ŀ and ŉ, not into ASCII letters), spelled as they are in ASCII
# (lowercase: applied after lowercasing, before NFKD and again after it). The TeX letter commands below give the
# same spellings.
_LETTERS = str.maketrans(
    {"ß": "ss", "æ": "ae", "œ": "oe", "ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "ħ": "h", "ı": "i",
     "ŧ": "t", "ŀ": "l", "ĸ": "k", "ŋ": "ng", "ƒ": "f", "ʼ": "'"}
)  # fmt: skip
# TeX's text accents and special letters, matched on lowercased text (so \H{o} is seen as \h{o}, \AE as \ae):
#   - a symbol accent and a letter, bare or braced: \"o \"{o} \'{\i} (the dotless i and j are letters here,
#     and as control words they end with the spaces after them: \"\i ve);
#   - a letter accent and a braced letter, or a space and a letter: \v{c} \c c \u{g} \h{o} \k{a} \r{a};
#   - a letter command, ending where its name does (\o is not \omega) with TeX's ``{}`` or spaces after it:
#     \ss \o \ae \oe \l \aa \i \j;
# each optionally inside its own braces: {\"o} {\ss}. As in TeX, spaces may come between an accent and its
# letter (``Nordstr\" om``, ``K\" ahler``: 29 times in hepth's abstracts, each an accent).
_ARG = r"[a-z]|\\[ij](?![a-z])"
_TEX = re.compile(  # written to begin with { or \ (not an optional group), so that re skips to those quickly
    r"(?:(\{)\\|\\)(?:"
    rf"[\"'`^~=.][ ]*(?:\{{[ ]*({_ARG})[ ]*\}}|({_ARG})(?:(?<=\\[ij])[ ]+(?=[a-z]))?)"
    rf"|[uvhckr](?:\{{({_ARG})\}}|[ ]([a-z]))"
    r"|(ss|o|ae|oe|l|aa|i|j)(?![a-z])(?:\{\}|[ ]+(?=[a-z]))?"
    r")(?(1)\})"
)
_TEX_LETTERS = {"ss": "ss", "o": "o", "ae": "ae", "oe": "oe", "l": "l", "aa": "a", "i": "i", "j": "j"}


def _tex_letter(match: re.Match) -> str:
    _, a, b, c, d, command = match.groups()
    if command is not None:
        return _TEX_LETTERS[command]
    letter = a or b or c or d
    return letter[-1]  # "\\i" is the dotless i: i


#: The most passes ``_fold_tex`` makes over a text: one per level of accents nested in one another (``\\"\\"o``
#: takes two; the shared corpora's TeX takes one). Each pass reads the whole text: without a bound, a run of
#: thousands of nested accents took time quadratic in its length (20,000 characters: 5 s). Deeper nesting is left
#: as it is past this many levels.
TEX_PASSES = 16


def _fold_tex(text: str) -> str:
    """TeX accents and letters replaced by their letters, until none is left (``\\"\\"oo`` has two), in at most
    ``TEX_PASSES`` passes."""
    for _ in range(TEX_PASSES):
        text, found = _TEX.subn(_tex_letter, text)
        if not found:
            break
    return text


def fold(text: str) -> str:
    """``text`` lowercased, its letters without accents, its TeX accents and letters as plain letters; every
    other character as it was (punctuation and spaces stay, so it serves names too: ``fold("Schrödinger, E.")``
    is ``"schrodinger, e."``). Idempotent (on TeX of at most ``TEX_PASSES`` accents nested in one another). Pure
    ASCII without a backslash is only lowercased (the fast path)."""
    if text.isascii() and "\\" not in text:
        return text.lower()
    text = text.lower()
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text.translate(_LETTERS)).translate(_MARKS)
        # NFKD may give capitals (ℌ is H) and letters NFKD leaves whole (ᴭ is Æ): lowered, then spelled out.
        text = text.lower().translate(_LETTERS)
    if "\\" in text:
        text = _fold_tex(text)
    if not text.isascii():
        # What is left composed again (Hangul syllables, the kana's voiced forms): the terms stay readable.
        text = unicodedata.normalize("NFKC", text)
    return text


def clean(text: str) -> str:
    """``text`` with what cannot be UTF-8 (lone surrogates: bytes that were not UTF-8 on a command line, or
    ``"\\ud800"`` from JSON) replaced by U+FFFD, so it can be stored, printed and bound as a parameter."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def tokenise(text: str) -> list[str]:
    """``fold`` the text, then return its maximal runs of alphanumeric characters (``str.isalnum``).

    No stemming and no stop words (those are an index's ``Analyser``'s): every run counts, digits included.
    """
    return _TOKEN.findall(fold(text))


# Lucene's English stop words (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``, Apache License 2.0): 33 function
# words, short enough that no content word of a scholarly abstract is lost (SMART's 571 include "research",
# "value", "system" ...). Folded tokens are compared with them.
ENGLISH_STOP_WORDS = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
)  # fmt: skip
#: The stop-word lists an index may name.
STOP_WORD_LISTS = {"english": frozenset(ENGLISH_STOP_WORDS)}

#: What a new index is built with unless told otherwise: no stemmer and no stop words, so that the terms are the
#: words as written. English stemming with stop words lifts short keyword queries (CACM's) but not the ranking
#: of abstract-long ones, and on CACM the default ranking over a stemmed index does not beat that index's own
#: BM25 (docs/eval/text-analysis.md has the figures): a choice for the user (``--stem english --stopwords english``).
DEFAULT_STEM: str | None = None
DEFAULT_STOPWORDS: str | None = None
#: The name that asks for no stemmer or no stop-word list (``--stem none``), as None does in Python.
NONE = "none"


def chosen(name: str | None) -> str | None:
    """An analysis option as given (a stemmer's or a stop-word list's name; None, "" or "none" for none) as the
    name an ``Analyser`` keeps: None for none."""
    if name is None or name == "" or name == NONE:
        return None
    return name


def stemmer_names() -> list[str]:
    """The stemmers an index may name: PyStemmer's Snowball algorithms ("english", "porter", "german", ...)."""
    import Stemmer

    return sorted(Stemmer.algorithms())


class Analyser:
    """How an index turns text into terms: ``tokenise``, then the stop words of ``stopwords`` dropped (a list
    of ``STOP_WORD_LISTS``), then each token stemmed by ``stem`` (a Snowball stemmer of PyStemmer). Neither
    when None (or "none"; ``DEFAULT_STEM`` and ``DEFAULT_STOPWORDS`` are what a build uses unless told
    otherwise). The index records the names (``index_info``: ``stemmer``, ``stopwords``), and ``from_info`` gives
    the analyser back, so that papers added later and every query are analysed as the index was.

    Immutable and cheap to pickle (a build's workers get it with each chunk); the stemmer is made on first use.
    """

    __slots__ = ("stem", "stopwords", "_stop", "_stemmer")

    def __init__(self, stem: str | None = None, stopwords: str | None = None) -> None:
        stem = chosen(stem)
        stopwords = chosen(stopwords)
        if stopwords is not None and stopwords not in STOP_WORD_LISTS:
            from .errors import ConfigError

            raise ConfigError(f"no stop-word list {stopwords!r}: the lists are {', '.join(sorted(STOP_WORD_LISTS))}")
        if stem is not None:
            try:
                names = stemmer_names()
            except ImportError:
                from .errors import ConfigError

                raise ConfigError("stemming needs PyStemmer: `pip install PyStemmer`") from None
            if stem not in names:
                from .errors import ConfigError

                raise ConfigError(f"no stemmer {stem!r}: PyStemmer has {', '.join(names)}")
        self.stem = stem
        self.stopwords = stopwords
        self._stop = STOP_WORD_LISTS[stopwords] if stopwords else frozenset()
        self._stemmer = None

    @classmethod
    def from_info(cls, info: dict[str, str]) -> Analyser:
        """The analyser an index's ``index_info`` names (none named: the plain tokeniser)."""
        key = (info.get("stemmer") or None, info.get("stopwords") or None)
        found = _ANALYSERS.get(key)
        if found is None:
            found = _ANALYSERS[key] = cls(*key)
        return found

    def info(self) -> dict[str, str]:
        """What ``index_info`` records of this analyser (``from_info`` reads it back)."""
        return {
            "tokeniser": TOKENISER_NAME,
            "tokeniser_version": TOKENISER_VERSION,
            "stemmer": self.stem or "",
            "stopwords": self.stopwords or "",
        }

    @property
    def plain(self) -> bool:
        """True when the terms are the tokeniser's tokens (no stop words, no stemming)."""
        return self.stem is None and self.stopwords is None

    def describe(self) -> str:
        """One line for ``retrieval stats``: the tokeniser, then the stemmer and stop words, or that there are none."""
        parts = [f"{TOKENISER_NAME} v{TOKENISER_VERSION} (folded)"]
        parts.append(f"stemmer {self.stem}" if self.stem else "no stemming")
        parts.append(f"stop words {self.stopwords} ({len(self._stop)})" if self.stopwords else "no stop words")
        return ", ".join(parts)

    def _stem_words(self, words: list[str]) -> list[str]:
        stemmer = self._stemmer
        if stemmer is None:
            import Stemmer

            stemmer = self._stemmer = Stemmer.Stemmer(self.stem)
        return stemmer.stemWords(words)

    def terms(self, tokens: list[str]) -> list[str]:
        """``tokens`` (the tokeniser's, in order) as this analyser's terms: stop words dropped, then stemmed."""
        if self._stop:
            tokens = [token for token in tokens if token not in self._stop]
        if self.stem is not None and tokens:
            tokens = self._stem_words(tokens)
        return tokens

    def term(self, token: str) -> str | None:
        """One token's term (None for a stop word)."""
        if token in self._stop:
            return None
        return self._stem_words([token])[0] if self.stem is not None else token

    def analyse(self, text: str) -> list[str]:
        """The terms of ``text``, in order (a term repeated counts each time)."""
        return self.terms(tokenise(text))

    def stopped(self, text: str) -> list[str]:
        """The tokens of ``text`` that are stop words, in order (empty when there is no stop-word list)."""
        return [token for token in tokenise(text) if token in self._stop] if self._stop else []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Analyser) and (self.stem, self.stopwords) == (other.stem, other.stopwords)

    def __hash__(self) -> int:
        return hash((self.stem, self.stopwords))

    def __reduce__(self):
        return (Analyser, (self.stem, self.stopwords))

    def __repr__(self) -> str:
        return f"Analyser(stem={self.stem!r}, stopwords={self.stopwords!r})"


_ANALYSERS: dict[tuple[str | None, str | None], Analyser] = {}
#: The analyser of an index built with no options: the tokeniser alone.
DEFAULT_ANALYSER = Analyser()


def sentences(text: str, limit: int | None = None) -> list[str]:
    """Split ``text`` into sentences on ``.``, ``!`` or ``?`` followed by white space; keep at most ``limit``."""
    parts = [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    return parts if limit is None else parts[:limit]
