"""Filters applied before the top k: a year range, authors, words a paper must not contain, phrases it must
contain. A filtered search returns the best k papers that pass, never the survivors of an unfiltered top k.

``passing`` turns a ``Filters`` into the set of papers that pass, in one snapshot, as the smaller of two lists:
the papers that pass (``allowed``), or those that do not (``rejected``, when most pass). The lexical pass then
either drops the papers that fail from an unfiltered top m, or scores the papers that pass
(``retrieval.search.lexical.filtered_top_papers``).

- ``years``: ``(first, last)``, either None for an open end; a paper without a year fails a year filter.
- ``authors``: names, each matched as ``retrieval.corpus.names`` says (surname, then given names or
  initials; case and accents aside); several names: papers by all of them.
- ``exclude``: words (``-word`` in a query); a paper containing any of them, as the index analyses text, fails.
- ``phrases``: word sequences (``"a phrase"`` in a query); a paper passes when its title and abstract, analysed
  as the index does, contain each sequence in order.
- ``exclude_phrases``: word sequences (``-"a phrase"``); a paper that contains any of them fails.
"""

from __future__ import annotations

import json
from collections import namedtuple

from ..corpus.names import SUFFIXES, asked_words, check_author, matches
from ..errors import ConfigError
from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from ..validate import LIMITS, YEAR_RANGE, quoted, shown_value, year_range

YEAR_DOCS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.doc_id
FROM papers AS p
{d.cross_join} doc_len AS dl ON dl.paper_id = p.id
WHERE p.year BETWEEN :first AND :last"""
    )
)

YEAR_COUNT_SQL = statement("""\
SELECT count(*)
FROM papers AS p
WHERE p.year BETWEEN :first AND :last""")

YEAR_OUTSIDE_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.doc_id
FROM papers AS p
{d.cross_join} doc_len AS dl ON dl.paper_id = p.id
WHERE p.year < :first
   OR p.year > :last
   OR p.year IS NULL"""
    )
)

AUTHOR_DOCS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.doc_id,
       a.name_key
FROM paper_authors AS a
{d.cross_join} doc_len AS dl ON dl.paper_id = a.paper_id
WHERE a.surname = :surname
   OR (a.surname IN ({", ".join(f"'{suffix}'" for suffix in SUFFIXES)})
       AND ' ' || a.name_key LIKE :before_suffix)"""
    )
)

TERM_DOCS_SQL = statement(
    lambda d: (
        f"""\
SELECT tf.doc_id
FROM doc_freq AS d
{d.cross_join} term_freq AS tf ON tf.term_id = d.term_id
WHERE d.term = :term"""
    )
)

DOC_TEXTS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.doc_id,
       p.title,
       p.abstract
FROM {d.numbered_rows("doc_ids", "j")}
{d.cross_join} doc_len AS dl ON dl.doc_id = {d.typed("j.value", "integer")}
{d.cross_join} papers AS p ON p.id = dl.paper_id{d.in_list_order("j")}"""
    )
)

ALL_DOCS_SQL = statement("""\
SELECT dl.doc_id
FROM doc_len AS dl
ORDER BY dl.doc_id""")

AUTHOR_PAPERS_SQL = statement("""\
SELECT count(DISTINCT a.paper_id)
FROM paper_authors AS a
WHERE a.surname = :surname""")


def author_names(value: object) -> tuple[str, ...]:
    """An ``authors`` filter as a program may give it, one name or a list of names, as a tuple of names; anything
    else is a ``ConfigError``."""
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(name, str) for name in value):
        raise ConfigError(f"authors must be a name or a list of names, got {shown_value(value)}")
    return tuple(value)


class Filters(
    namedtuple("Filters", "years authors exclude phrases exclude_phrases typed", defaults=(None, (), (), (), (), None))
):
    """What a paper must satisfy to be ranked at all (see the module docstring): ``exclude``, ``phrases`` and
    ``exclude_phrases`` hold terms as the index analyses text (stems, no stop words), ``typed`` the same three
    as the user wrote them, which ``to_dict`` shows (None: shown as the terms)."""

    __slots__ = ()

    @classmethod
    def make(cls, year=None, authors=(), exclude=(), phrases=(), exclude_phrases=(), typed=None) -> Filters:
        """Filters from option values: ``year`` a range string or ``(first, last)``, ``authors`` names;
        ``typed``: the words of ``exclude``, ``phrases`` and ``exclude_phrases`` as written, three lists."""
        years = year_range(year)
        authors = author_names(authors)
        if len(authors) > LIMITS["authors"]:
            raise ConfigError(
                f"a search filters by at most {LIMITS['authors']} authors (a paper by all of them), got "
                f"{len(authors):,}: give fewer"
            )
        for name in authors:
            check_author(name)
        phrases, exclude_phrases = (tuple(tuple(p) for p in listed) for listed in (phrases, exclude_phrases))
        typed = None if typed is None else tuple(tuple(words) for words in typed)
        return cls(years, tuple(authors), tuple(exclude), phrases, exclude_phrases, typed)

    def __bool__(self) -> bool:
        return bool(self.years or self.authors or self.exclude or self.phrases or self.exclude_phrases)

    def to_dict(self) -> dict:
        """The filters as the user gave them: the words as written, not the index's terms (``entropy``, not
        ``entropi``)."""
        if self.typed is not None:
            exclude, phrases, exclude_phrases = (list(words) for words in self.typed)
        else:
            exclude = list(self.exclude)
            phrases = [" ".join(p) for p in self.phrases]
            exclude_phrases = [" ".join(p) for p in self.exclude_phrases]
        return {
            "year": None if not self.years else list(self.years),
            "authors": list(self.authors),
            "exclude": exclude,
            "phrases": phrases,
            "exclude_phrases": exclude_phrases,
        }


class Passing(namedtuple("Passing", "allowed rejected count")):
    """The papers that pass: ``allowed`` (sorted doc ids) or, when most pass, ``rejected`` (sorted doc ids of
    those that do not; ``allowed`` is then None); ``count`` papers pass."""

    __slots__ = ()


def _docs(snap: Snapshot, name: str, sql: str, params: dict) -> set[int]:
    return {row[0] for row in snap.rows(name, sql, params)}


def contains(tokens: list[str], phrase: tuple[str, ...]) -> bool:
    """Whether ``phrase`` occurs in ``tokens`` as consecutive tokens."""
    n = len(phrase)
    if n == 0:
        return True
    first = phrase[0]
    return any(tokens[i : i + n] == list(phrase) for i, token in enumerate(tokens) if token == first)


def passing(snap: Snapshot, filters: Filters, analyse=None) -> Passing:
    """The papers of the snapshot that pass ``filters``, whose words (``exclude``, ``phrases``) are analysed as
    the index analyses text; a phrase is checked in the texts analysed by ``analyse`` (default: the index's
    analyser)."""
    n = snap.stats.n_papers
    analyse = snap.stats.analyser.analyse if analyse is None else analyse
    allowed: set[int] | None = None

    def narrow(docs: set[int]) -> None:
        nonlocal allowed
        allowed = docs if allowed is None else allowed & docs

    rejected: set[int] = set()
    if filters.years:
        lo, hi = filters.years
        years = {"first": YEAR_RANGE[0] if lo is None else lo, "last": YEAR_RANGE[1] if hi is None else hi}
        # Whichever side is smaller is listed (counted first on the year index): most papers pass "1995-".
        if snap.rows("filter: papers of the years, counted", YEAR_COUNT_SQL, years)[0][0] <= n // 2:
            narrow(_docs(snap, "filter: papers of the years", YEAR_DOCS_SQL, years))
        else:
            rejected |= _docs(snap, "filter: papers outside the years", YEAR_OUTSIDE_SQL, years)
    for name in filters.authors:
        words = asked_words(name)
        params = {"surname": words[-1], "before_suffix": f"% {words[-1]} %"}  # "callan jr": a suffix stored last
        rows = snap.rows("filter: papers by an author", AUTHOR_DOCS_SQL, params)
        narrow({doc for doc, key in rows if matches(words, key)})

    def with_phrase(phrase: tuple[str, ...]) -> set[int]:
        """The papers (among those still passing) whose title or abstract holds ``phrase``: papers with all its
        words, whose texts are read and analysed where the phrase has more than one word."""
        words = tuple(w for w in phrase if w)
        having: set[int] | None = None
        for word in dict.fromkeys(words):
            docs = _docs(snap, "filter: papers with a phrase's word", TERM_DOCS_SQL, {"term": word})
            having = docs if having is None else having & docs
        if allowed is not None:
            having &= allowed
        having = (having or set()) - rejected
        if len(words) == 1:  # a word's papers are those whose title or abstract holds it: nothing to read
            return having
        texts = snap.rows("filter: texts to check a phrase in", DOC_TEXTS_SQL, {"doc_ids": json.dumps(sorted(having))})
        # In the title or in the abstract: the last word of one and the first of the other are not a phrase.
        return {
            doc
            for doc, title, abstract in texts
            if contains(analyse(title), words) or contains(analyse(abstract), words)
        }

    # Each phrase once: a query repeating one read its papers' texts again for every copy.
    for phrase in dict.fromkeys(filters.phrases):
        if any(phrase):
            narrow(with_phrase(phrase))
    for word in filters.exclude:
        rejected |= _docs(snap, "filter: papers with an excluded word", TERM_DOCS_SQL, {"term": word})
    for phrase in dict.fromkeys(filters.exclude_phrases):
        if any(phrase):
            rejected |= with_phrase(phrase)
    if allowed is not None:
        allowed -= rejected
        if len(allowed) <= n // 2:
            return Passing(sorted(allowed), None, len(allowed))
        rejected = set(every_doc(snap)) - allowed
    return Passing(None, sorted(rejected), n - len(rejected))


def none_pass(snap: Snapshot, filters: Filters) -> str:
    """What to tell a user whose ``filters`` let no paper through: each filter that alone lets none through (a
    year range, an author, a phrase), else that they do so together."""
    alone = []
    if filters.years and passing(snap, Filters(years=filters.years)).count == 0:
        lo, hi = filters.years
        shown = str(lo) if lo == hi else f"{'' if lo is None else lo}-{'' if hi is None else hi}"
        alone.append(f"no paper is of the years {shown}")
    for name in filters.authors:
        if passing(snap, Filters(authors=(name,))).count == 0:
            alone.append(f"no paper is by {quoted(name)}")
    phrases = [phrase for phrase in filters.phrases if any(phrase)]
    shown_phrases = filters.to_dict()["phrases"]  # as written, where they were kept
    if len(shown_phrases) != len(phrases):
        shown_phrases = [" ".join(p) for p in phrases]
    for phrase, shown in zip(phrases, shown_phrases, strict=True):
        if passing(snap, Filters(phrases=(phrase,))).count == 0:
            alone.append(f'no paper holds the phrase "{shown}"')
    if alone:
        return f"no paper passes the filters: {'; '.join(alone)}"
    return "no paper passes all the filters together (each lets some through): loosen one of them"


def every_doc(snap: Snapshot) -> list[int]:
    """Every doc id of the snapshot, in order."""
    return [row[0] for row in snap.rows("filter: every paper", ALL_DOCS_SQL, {})]


CANDIDATE_DOCS_SQL = statement(
    lambda d: (
        f"""\
SELECT dl.paper_id,
       dl.doc_id
FROM {d.numbered_rows("paper_ids", "j")}
{d.cross_join} doc_len AS dl ON dl.paper_id = j.value{d.in_list_order("j")}"""
    )
)


def failing(snap: Snapshot, paper_ids: list[str], allowed: Passing) -> list[str]:
    """Those of ``paper_ids`` that do not pass (the graph pass's candidates, checked before the blend)."""
    if not paper_ids:
        return []
    rows = snap.rows("filter: the candidates that pass", CANDIDATE_DOCS_SQL, {"paper_ids": json.dumps(paper_ids)})
    if allowed.allowed is not None:
        ok = set(allowed.allowed)
        return [pid for pid, doc in rows if doc not in ok]
    bad = set(allowed.rejected)
    return [pid for pid, doc in rows if doc in bad]


def author_papers(snap: Snapshot, word: str) -> int:
    """How many papers have an author of surname ``word`` (folded)."""
    rows = snap.rows("query: papers by an author of this surname", AUTHOR_PAPERS_SQL, {"surname": word})
    return rows[0][0] if rows else 0
