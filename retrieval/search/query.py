"""A query, made once from its text, and the same query weighed against one snapshot of the index.

``Query`` is the text and its tokens (the index's tokeniser, once per search). ``WeightedQuery`` adds what the
index says of each distinct token at one snapshot: its term id, df, largest impact and weight ``qtf * idf``.
The lexical pass, the gate, the expansion and the blend all take these objects, never the string.
"""

from __future__ import annotations

import json
from collections import Counter, namedtuple

from ..errors import ConfigError
from ..store.database import IndexStats
from ..text import clean, tokenise
from ..validate import LIMITS

#: The longest query text accepted, in characters, and the most distinct terms.
MAX_QUERY_CHARS = LIMITS["query_chars"]
MAX_QUERY_TERMS = LIMITS["query_terms"]


class Query:
    """A query's text and its tokens, in order (a token repeated in the query counts each time); ``qtf`` counts
    each distinct token, ``distinct_json`` is the sorted distinct tokens as the term look-up's parameter."""

    __slots__ = ("text", "tokens", "qtf", "distinct_json")

    def __init__(self, text: str, tokens: tuple[str, ...]) -> None:
        self.text = text
        self.tokens = tokens
        self.qtf = Counter(tokens)
        self.distinct_json = json.dumps(sorted(self.qtf), ensure_ascii=False)

    @classmethod
    def parse(cls, text: str | Query) -> Query:
        """``text`` tokenised by the index's tokeniser (a ``Query`` is returned as it is). Text that is not
        valid Unicode has its bad characters replaced by U+FFFD; a text longer than ``MAX_QUERY_CHARS`` or with
        more than ``MAX_QUERY_TERMS`` distinct terms is refused with ``ConfigError``, so no query runs for
        minutes."""
        if isinstance(text, Query):
            return text
        if not isinstance(text, str):
            raise ConfigError(f"a query is a string, got {type(text).__name__}")
        if len(text) > MAX_QUERY_CHARS:
            raise ConfigError(f"the query has {len(text):,} characters, more than {MAX_QUERY_CHARS:,}: shorten it")
        text = clean(text)
        query = cls(text, tuple(tokenise(text)))
        if len(query.qtf) > MAX_QUERY_TERMS:
            raise ConfigError(
                f"the query has {len(query.qtf):,} distinct terms, more than {MAX_QUERY_TERMS:,}: shorten it"
            )
        return query

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Query) and (self.text, self.tokens) == (other.text, other.tokens)

    def __hash__(self) -> int:
        return hash((self.text, self.tokens))

    def __repr__(self) -> str:
        return f"Query({self.text!r})"


class QueryTerm(namedtuple("QueryTerm", "term term_id df qtf weight max_impact factor")):
    """A query term in the index: its weight (qtf * idf) and how much one posting can contribute (a posting
    contributes at most ``weight * impact * factor``, ``factor = drift * (1 + slack) / IMPACT_SCALE``)."""

    __slots__ = ()


class WeightedQuery:
    """A ``Query`` against one snapshot: the terms the index has, in term-id order, and its statistics.

    ``weights_json`` (``[[term_id, weight], ...]``) is the parameter every scoring statement reads the weights
    from; ``attainable``, the score of a paper that saturated every query token's term-frequency factor (sum of
    ``weight * (k1 + 1)``), is the gate's yardstick, comparable across queries of any length."""

    __slots__ = ("query", "terms", "stats", "weights_json", "attainable")

    def __init__(self, query: Query, terms: tuple[QueryTerm, ...], stats: IndexStats) -> None:
        self.query = query
        self.terms = terms
        self.stats = stats
        self.weights_json = json.dumps([[t.term_id, t.weight] for t in terms])
        self.attainable = sum(t.weight * (stats.k1 + 1.0) for t in terms)

    @property
    def text(self) -> str:
        return self.query.text

    def __repr__(self) -> str:
        return f"WeightedQuery({self.query.text!r}, {len(self.terms)} terms)"
