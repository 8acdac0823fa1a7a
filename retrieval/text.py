"""Text processing shared by the index writer and the query path.

The tokeniser is part of the index's contract: its name and version are stored in the index, and a search
refuses an index written by another tokeniser, because the same query would silently match different terms.
"""

from __future__ import annotations

import re

TOKENISER_NAME = "unicode-alnum-lower"
TOKENISER_VERSION = "1"

# ``[^\W_]`` is "a word character but not the underscore": exactly the characters for which
# ``str.isalnum()`` is true, so "naïve" stays one token and "GPT-4" gives "gpt", "4".
_TOKEN = re.compile(r"[^\W_]+")
# A sentence ends at . ! or ? followed by white space; good enough for abstracts, and deterministic.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


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
    """Lowercase ``text``, then return its maximal runs of alphanumeric characters (``str.isalnum``).

    No stemming and no stop words: every run counts, digits included.
    """
    return _TOKEN.findall(text.lower())


def sentences(text: str, limit: int | None = None) -> list[str]:
    """Split ``text`` into sentences on ``.``, ``!`` or ``?`` followed by white space; keep at most ``limit``."""
    parts = [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    return parts if limit is None else parts[:limit]
