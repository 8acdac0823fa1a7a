"""A query, made once from its text, and the same query weighed against one snapshot of the index.

``Query`` is the text and its tokens (the index's tokeniser, once per search). ``WeightedQuery`` adds what the
index says of each distinct token at one snapshot: its term id, df, largest impact and weight ``qtf * idf``.
The lexical pass, the gate, the expansion and the blend all take these objects, never the string.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from ..store.database import IndexStats
from ..text import tokenise


@dataclass(frozen=True)
class Query:
    """A query's text and its tokens, in order (a token repeated in the query counts each time)."""

    text: str
    tokens: tuple[str, ...] = field(repr=False)

    @classmethod
    def parse(cls, text: str | Query) -> Query:
        """``text`` tokenised by the index's tokeniser (a ``Query`` is returned as it is)."""
        if isinstance(text, Query):
            return text
        return cls(text, tuple(tokenise(text)))

    @cached_property
    def qtf(self) -> Counter[str]:
        """How many times each distinct token occurs in the query."""
        return Counter(self.tokens)

    @cached_property
    def distinct_json(self) -> str:
        """The distinct tokens as a JSON array, sorted: the parameter of the term look-up."""
        return json.dumps(sorted(self.qtf), ensure_ascii=False)

    def __bool__(self) -> bool:
        return bool(self.tokens)


@dataclass(frozen=True)
class QueryTerm:
    """A query term in the index: its weight (qtf * idf) and how much one posting can contribute."""

    term: str
    term_id: int
    df: int
    qtf: int
    weight: float
    max_impact: int
    factor: float  # drift * (1 + slack) / IMPACT_SCALE: a posting contributes at most weight * impact * factor


@dataclass(frozen=True)
class WeightedQuery:
    """A ``Query`` against one snapshot: the terms the index has, in term-id order, and its statistics."""

    query: Query
    terms: tuple[QueryTerm, ...]
    stats: IndexStats

    @property
    def text(self) -> str:
        return self.query.text

    @cached_property
    def weights_json(self) -> str:
        """``[[term_id, weight], ...]``: the parameter every scoring statement reads the weights from."""
        return json.dumps([[t.term_id, t.weight] for t in self.terms])

    @cached_property
    def attainable(self) -> float:
        """The score of a paper that saturated every query token's term-frequency factor:
        sum of ``weight * (k1 + 1)``; the gate's yardstick, comparable across queries of any length."""
        return sum(t.weight * (self.stats.k1 + 1.0) for t in self.terms)
