"""Author names as a search matches them: folded (case, accents and TeX escapes), split into words, with the
surname picked out.

A stored name gets a ``surname`` (the part before a comma in "Maldacena, Juan", else the last word) and a ``key``
(every word of the name, folded, space-separated; the surname last). ``--author NAME`` matches a paper when one
of its authors has NAME's surname and NAME's other words agree with the author's: the same word, or an initial
of it ("J. Maldacena" and "Juan Maldacena" match "Juan M. Maldacena"; "Maldacena" alone matches all three).
"""

from __future__ import annotations

import re

from ..text import fold

_WORD = re.compile(r"[^\W_]+")


def name_words(name: str) -> list[str]:
    """The folded words of ``name``, the surname last ("Maldacena, Juan M." -> juan, m, maldacena)."""
    if "," in name:
        surname, _, given = name.partition(",")
        family = _WORD.findall(fold(surname))
        if family:  # "van der Berg, Jan": jan van der berg
            return _WORD.findall(fold(given)) + family
    return _WORD.findall(fold(name))


def name_key(name: str) -> tuple[str, str]:
    """``(surname, key)`` of a stored author name (both empty when the name has no letter or digit)."""
    words = name_words(name)
    return (words[-1], " ".join(words)) if words else ("", "")


def _agrees(asked: str, given: str) -> bool:
    if asked == given:
        return True
    return (len(asked) == 1 or len(given) == 1) and asked[0] == given[0]


#: Folded words that follow a surname ("Curtis G. Callan Jr.", "Carr III, J. W."): a stored key may end with one
#: (its ``surname`` is then the suffix), and a filter matches the word before it.
SUFFIXES = ("jr", "sr", "ii", "iii", "iv")


def asked_words(name: str) -> list[str]:
    """The words of a name a filter asks for (``name_words``), without a suffix after the surname: "Callan Jr"
    asks for Callan."""
    words = name_words(name)
    return words[:-1] if len(words) > 1 and words[-1] in SUFFIXES else words


def matches(asked: list[str], key: str) -> bool:
    """Whether the name whose words are ``asked`` (surname last, as ``name_words``) names the author of ``key``:
    the same surname, and each other asked word agrees with a different given word (equal, or an initial). A key
    that ends with a suffix is matched without it (``asked_words`` leaves it out of what is asked)."""
    words = key.split()
    if len(words) > 1 and words[-1] in SUFFIXES:
        words = words[:-1]
    if not asked or not words or asked[-1] != words[-1]:
        return False
    given = words[:-1]
    for word in asked[:-1]:
        for i, candidate in enumerate(given):
            if _agrees(word, candidate):
                del given[i]
                break
        else:
            return False
    return True


def check_author(name: str, option: str = "--author", example: str = "--author Maldacena") -> None:
    """Refuse (``ConfigError``) an author name no paper's author can match, one without letters, naming it as
    ``option`` names it (the command line's ``--author``, the HTTP API's ``author``)."""
    from ..errors import ConfigError
    from ..validate import LIMITS, quoted

    if len(str(name)) > LIMITS["author_chars"]:
        raise ConfigError(
            f"{option} {quoted(str(name))} is {len(str(name)):,} characters long (an author's name is at most "
            f"{LIMITS['author_chars']}): give a surname, such as {example}"
        )
    words = name_words(str(name))
    if not words:
        raise ConfigError(f"{option} {quoted(str(name))} has no letters: give a surname, such as {example}")
    if len(words) == 1 and words[0] in SUFFIXES:  # it matched every "... Jr" of the index
        raise ConfigError(
            f"{option} {quoted(str(name))} is a suffix, not a surname: give the surname (with it if you like: "
            f"Callan Jr), such as {example}"
        )
