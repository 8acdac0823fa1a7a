"""A query, made once from its text, and the same query weighed against one snapshot of the index.

``Query`` is the text and its terms, made by the index's analyser once per search (``Query.parse(text,
analyser_of(snap))``). ``WeightedQuery`` adds what the index says of each distinct term at one snapshot: its
term id, df, weight ``qtf * idf`` and bound.
The lexical pass, the gate, the expansion and the blend all take these objects, never the string.
"""

from __future__ import annotations

import json
from collections import Counter, namedtuple

from ..errors import ConfigError, TooLargeError
from ..store.database import IndexStats
from ..text import DEFAULT_ANALYSER, Analyser, clean
from ..validate import LIMITS

#: The longest query text accepted, in characters, and the most distinct terms.
MAX_QUERY_CHARS = LIMITS["query_chars"]
MAX_QUERY_TERMS = LIMITS["query_terms"]


def checked_text(text: object) -> str:
    """A query's text, valid Unicode (bad characters replaced by U+FFFD), refused with ``ConfigError`` when it is
    not a string or longer than ``MAX_QUERY_CHARS``; its terms are counted once it is analysed (``Query.parse``),
    as the index it is sent to analyses text."""
    if not isinstance(text, str):
        raise ConfigError(f"a query is a string, got {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise TooLargeError(f"the query has {len(text):,} characters, more than {MAX_QUERY_CHARS:,}: shorten it")
    return clean(text)


class Query:
    """A query's text and its terms, in order (a term repeated in the query counts each time), as ``analyser``
    made them; ``qtf`` counts each distinct term, ``distinct_json`` is the sorted distinct terms as the term
    look-up's parameter, ``stopped`` the query's stop words the analyser dropped (a query made only of stop
    words has no terms, and ``stopped`` says why)."""

    __slots__ = ("text", "tokens", "qtf", "distinct_json", "analyser", "stopped")

    def __init__(
        self,
        text: str,
        tokens: tuple[str, ...],
        analyser: Analyser = DEFAULT_ANALYSER,
        stopped: tuple[str, ...] = (),
    ) -> None:
        self.text = text
        self.tokens = tokens
        self.qtf = Counter(tokens)
        self.distinct_json = json.dumps(sorted(self.qtf), ensure_ascii=False)
        self.analyser = analyser
        self.stopped = stopped

    @classmethod
    def parse(cls, text: str | Query, analyser: Analyser | None = None) -> Query:
        """``text`` analysed by ``analyser``: the index's (``analyser_of(snapshot)``, or ``IndexStats.analyser``);
        None is the default analyser (the tokeniser alone, which an index built without ``--stem`` or
        ``--stopwords`` uses). A ``Query`` is returned as it is, unless ``analyser`` is given and is not the one
        it was made with: then its text is analysed again. Text that is not valid Unicode has its bad characters
        replaced by U+FFFD; a text longer than ``MAX_QUERY_CHARS`` or with more than ``MAX_QUERY_TERMS`` distinct
        terms is refused with ``ConfigError``, so no query runs for minutes."""
        if isinstance(text, Query):
            if analyser is None or analyser == text.analyser:
                return text
            text = text.text
        text = checked_text(text)
        analyser = DEFAULT_ANALYSER if analyser is None else analyser
        query = cls(text, tuple(analyser.analyse(text)), analyser, tuple(analyser.stopped(text)))
        if len(query.qtf) > MAX_QUERY_TERMS:
            raise TooLargeError(
                f"the query has {len(query.qtf):,} distinct terms, more than {MAX_QUERY_TERMS:,}: shorten it"
            )
        return query

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Query) and (self.text, self.tokens, self.analyser) == (
            other.text,
            other.tokens,
            other.analyser,
        )

    def __hash__(self) -> int:
        return hash((self.text, self.tokens))

    def __repr__(self) -> str:
        return f"Query({self.text!r})"


def analyser_of(snap) -> Analyser:
    """The analyser of the index a snapshot reads (``retrieval.store.sql.executor.Snapshot``): a query weighed
    against it must be ``Query.parse(text, analyser_of(snap))``."""
    return snap.stats.analyser


class QueryTerm(namedtuple("QueryTerm", "term term_id df qtf weight bound")):
    """A query term in the index: its weight (qtf * idf) and ``bound``, the most one of its postings can
    contribute (``weight`` times the largest tf_norm its postings chunks allow, with a relative slack)."""

    __slots__ = ()


class WeightedQuery:
    """A ``Query`` against one snapshot: the terms the index has, in term-id order, and its statistics.

    ``weights_json`` (``[[term_id, weight], ...]``) is the parameter every scoring statement reads the weights
    from; ``attainable``, the score of a paper that saturated every query token's term-frequency factor (sum of
    ``weight * (k1 + 1)``), is the gate's yardstick, comparable across queries of any length."""

    __slots__ = ("query", "terms", "stats", "weights_json", "attainable", "found")

    def __init__(
        self, query: Query, terms: tuple[QueryTerm, ...], stats: IndexStats, found: tuple[tuple, ...] | None = None
    ) -> None:
        if query.analyser != stats.analyser:  # its terms would silently miss the index's (stems, stop words)
            raise ConfigError(
                f"the query {query.text[:80]!r} was analysed with {query.analyser!r}, the index with "
                f"{stats.analyser!r}: parse it with Query.parse(text, analyser_of(snapshot))"
            )
        self.query = query
        self.terms = terms
        self.stats = stats
        self.weights_json = json.dumps([[t.term_id, t.weight] for t in terms])
        self.attainable = sum(t.weight * (stats.k1 + 1.0) for t in terms)
        #: The index's rows for the query's terms, ``(term, term_id, df, max_tf)`` in term-id order, when read
        #: by ``lexical.weigh`` (a part of the query is weighed from them: ``weigh(..., within=)``).
        self.found = found

    @property
    def text(self) -> str:
        return self.query.text

    def __repr__(self) -> str:
        return f"WeightedQuery({self.query.text!r}, {len(self.terms)} terms)"
