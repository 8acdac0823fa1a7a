"""What a query's text asks beyond its words: ``"a phrase"``, ``-word``, ``author:NAME`` and ``year:RANGE``.

- ``"black hole"``: the words are scored as words, and a paper must contain them in that order (a filter on
  its title or its abstract, each analysed as the index analyses text).
- ``-entropy``: papers containing the word are left out; the word is not scored.
- ``-"black hole"``: papers containing the phrase are left out; its words are not scored.
- ``author:Maldacena``, ``author:"J. Maldacena"``, ``year:1998-2001``: the same filters as ``--author`` and
  ``--year``.
- Any other ``name:word`` is read as the words ``name`` and ``word``, with a warning (there are no other fields).

Only a short query is read this way (at most ``SYNTAX_MAX_WORDS`` words): a pasted abstract or draft is read
as plain words, since its quotes, dashes and colons are prose, not operators (a warning names the fields and
the ``-word`` it searched as words); ``syntax=False`` does the same for any query. Everything unusual is
reported as a warning the CLI prints on stderr.
"""

from __future__ import annotations

import re
from collections import namedtuple

from ..corpus.names import check_author
from ..errors import ConfigError
from ..validate import LIMITS, parse_years, quoted, quoted_list

#: Queries of more words than this are read as plain words (a pasted abstract's quotes are not phrases).
SYNTAX_MAX_WORDS = 32

# A quoted phrase, a field prefix (``name:`` directly followed by a value, quoted or not), or a ``-word``
# at the start of the text or after white space (a word with a letter in it: ``-4d`` is one, ``-1`` a number).
_PART = re.compile(
    r'(?P<field>(?<!\S)(?P<name>[A-Za-z]+):(?:"(?P<fquoted>[^"]*)"|(?P<fvalue>[^\s"/][^\s"]*)))'
    r'|(?P<minus>(?<!\S)-(?P<word>(?=[^\s"]*[^\W\d_])[^\W_][^\s"]*))'
    r'|(?P<nphrase>(?<!\S)-"(?P<nquoted>[^"]*)")'
    r'|(?P<phrase>"(?P<quoted>[^"]*)")'
)
#: What ``plain`` makes a space: a quote, a minus that begins a word, the colon after a field's name.
_SYNTAX_MARKS = re.compile(r'(?<!\\)"|(?<=[A-Za-z]):')  # not TeX's umlaut, \"
_LEADING_MINUS = re.compile(r"(?<!\S)-+")  # once the marks before it are spaces: '"-a' is then ' -a'
FIELDS = ("author", "year")
#: TeX's umlaut (``\\"o``), held as a private-use character while the marks are read, then given back.
_TEX_QUOTE = '\\"'
_HELD = "\ue000"
#: A field with nothing after it (``author:`` at the end, or a space before its value): searched as a word.
_EMPTY_FIELD = re.compile(r"(?<!\S)(author|year):(?=\s|$)", re.IGNORECASE)
_EXAMPLE = {"author": "Maldacena", "year": "1998-2001"}


class Parsed(namedtuple("Parsed", "text exclude phrases authors year warnings exclude_phrases", defaults=((),))):
    """A query's text split into what is scored (``text``) and what filters: words to exclude, phrases, author
    names, a year range (a string, or None), phrases to exclude; ``warnings`` for the user."""

    __slots__ = ()


def parse(text: str, syntax: bool = True) -> Parsed:
    """``text`` as the module docstring says (``syntax`` False: every character is plain text). A backslash
    before a quote (TeX's umlaut, ``Schr\\"odinger``) makes it part of its word, not a phrase's mark."""
    if not syntax or not any(c in text for c in '"-:'):
        return Parsed(text, (), (), (), None, ())
    if len(text.split()) > SYNTAX_MAX_WORDS:
        return Parsed(text, (), (), (), None, _unread(text))
    if _TEX_QUOTE in text and _HELD not in text:
        return _restored(_parse(text.replace(_TEX_QUOTE, _HELD)))
    return _parse(text)


def _unread(text: str) -> tuple[str, ...]:
    """The warning for a long query (read as plain words) that holds what a short one reads as a filter, an
    ``author:``/``year:`` field or a ``-word``: silently searched for, it ranks by what it was to filter out.
    Quotes are left unsaid: a pasted text quotes words as prose does."""
    marks = [
        found.group(0)
        for found in _PART.finditer(text)
        if (found.group("minus") and found.group("word").isalpha())  # not prose's "-3b<5a"
        or (found.group("field") and found.group("name").lower() in FIELDS)
    ]
    if not marks:
        return ()
    return (
        f"the query has more than {SYNTAX_MAX_WORDS} words, so it is read as plain words (a pasted text's dashes "
        f"and colons are prose): {quoted_list(marks)} {'is' if len(marks) == 1 else 'are'} searched as words, not "
        "as filters; give the author and years as --author and --year, or shorten the query",
    )


def _restored(parsed: Parsed) -> Parsed:
    """``parsed`` with every held TeX quote given back."""

    def back(value):
        if isinstance(value, str):
            return value.replace(_HELD, _TEX_QUOTE)
        if isinstance(value, tuple):
            return tuple(back(v) for v in value)
        return value

    return Parsed(*(back(field) for field in parsed))


def _parse(text: str) -> Parsed:
    scored: list[str] = []
    exclude: list[str] = []
    phrases: list[str] = []
    exclude_phrases: list[str] = []
    authors: list[str] = []
    years: list[str] = []
    warnings: list[str] = []
    at = 0
    for found in _PART.finditer(text):
        scored.append(text[at : found.start()])
        at = found.end()
        if found.group("field"):
            name = found.group("name")
            value = found.group("fquoted") if found.group("fquoted") is not None else found.group("fvalue")
            if name.lower() == "author":
                authors.append(value)
            elif name.lower() == "year":
                years.append(value)
            else:
                warnings.append(
                    f"{name}: is not a field (there are author: and year:): {name!r} and {value!r} are searched "
                    "as words of the title and abstract"
                )
                scored.append(f" {name} {value} ")
        elif found.group("minus"):
            word = found.group("word")
            field = word.split(":", 1)[0].lower() if ":" in word else ""
            if field in FIELDS:  # it left out the papers holding the words "author" and the name, silently
                raise ConfigError(
                    f"the query's {quoted(found.group(0))}: a search cannot leave out "
                    + (
                        "an author's papers (only words and phrases): drop it, or keep only their papers with "
                        "author:NAME"
                        if field == "author"
                        else "years (only words and phrases): give the years to keep, such as year:1998-2001"
                    )
                )
            exclude.append(word)
            scored.append(" ")
        elif found.group("nphrase"):  # -"black hole": read as a phrase it was kept for, the opposite of what it asks
            if found.group("nquoted").strip():
                exclude_phrases.append(found.group("nquoted"))
            scored.append(" ")
        else:
            phrase = found.group("quoted")
            if phrase.strip():
                phrases.append(phrase)
            scored.append(f" {phrase} ")
    scored.append(text[at:])
    rest = "".join(scored)
    for empty in _EMPTY_FIELD.finditer(rest):
        name = empty.group(1)
        warnings.append(
            f"{name}: has nothing after it (write {name.lower()}:{_EXAMPLE[name.lower()]}, with no space): "
            f"{name.lower()!r} is searched as a word"
        )
    if rest.count('"') % 2:
        warnings.append('an unmatched " is ignored: close the quote to search for a phrase')
    if len(years) > 1:
        warnings.append(f"year: is given {len(years)} times: the last, {years[-1]!r}, is used")
    if years:
        parse_years(years[-1], "year:")  # a range it cannot read is the query's mistake, said as such
    if len(authors) > LIMITS["authors"]:
        raise ConfigError(
            f"the query filters by at most {LIMITS['authors']} authors (a paper by all of them), got "
            f"{len(authors):,} author: fields: give fewer"
        )
    for name in authors:  # named as the query wrote it, not as the command line's --author
        check_author(name, "the query's author:", "author:Maldacena")
    return Parsed(
        squeezed(rest.replace('"', " ")),  # what is searched, as a result shows it: no runs of spaces
        tuple(exclude),
        tuple(phrases),
        tuple(authors),
        years[-1] if years else None,
        tuple(warnings),
        tuple(exclude_phrases),
    )


def plain(text: str) -> str:
    """``text`` as a query that reads as words only: every mark the syntax reads (a quote other than TeX's
    umlaut, a minus before a word, a field's colon) made a space, which the tokeniser splits on anyway, so the
    words searched are the same. A paper's title searched as a query ("M -theory on AdS_4", "Self -dual ...")
    is then not read as "leave out theory"."""
    return squeezed(_LEADING_MINUS.sub(_space, _SYNTAX_MARKS.sub(_space, text)))


_RUNS = re.compile(r"(\\[^\W\d_]+)?(\s+)")


def squeezed(text: str) -> str:
    """``text`` with each run of whitespace one space and none at its ends, except the spaces after a TeX control
    word, which the tokeniser reads (``\\o N`` is one word): the same words, shown without gaps."""
    return _RUNS.sub(lambda found: found.group(0) if found.group(1) else " ", text).strip()


_CONTROL_WORD_BEFORE = re.compile(r"\\[^\W\d_]+\s*$")  # letters as the tokeniser folds them: \\aé is \\ae


def _space(found: re.Match) -> str:
    """A space for a syntax mark; after a TeX control word (``\\o``) an empty group first, since the space would
    end the control word and join it to the next word (``\\o N`` reads as "on")."""
    before = found.string[max(0, found.start() - 40) : found.start()]
    return "{} " if _CONTROL_WORD_BEFORE.search(before) else " "
