"""Work that the modes of one query's evaluation share: the BM25 scores of candidate papers, and for the evidence
modes the sub-queries' BM25 lists, the papers' claims, each edge's best supports, Delta and the weighed edges,
computed once for the query and reused by every mode that asks for the same thing.

A memo is for one query against one unchanging index (the evaluation's cached index); the values it holds are
exactly what a mode would compute itself, so sharing changes no ranking. It changes timings, so it keeps the
seconds each reuse saved (``take_charge``): the evaluation adds them back to the reusing mode's latency, which stays
the latency that mode would have had alone (for BM25 scores, at the query's average cost per paper scored).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from ..store.sql.executor import StatementCache

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class QueryMemo:
    """Shared work of one query: ``bm25`` (paper id -> score), values computed once for a key (``shared``) or
    once per item (``each``: the papers' claims, each edge's best supports), ``statements`` (the read statements'
    rows, for ``RetrievalClient.cache_statements``) and the seconds reuses saved since the last ``take_charge``."""

    __slots__ = ("bm25", "_bm25_seconds", "_bm25_papers", "statements", "_shared", "_each", "_charged")

    def __init__(self) -> None:
        self.statements = StatementCache()
        self.bm25: dict[str, float] = {}
        self._bm25_seconds = 0.0
        self._bm25_papers = 0
        self._shared: dict = {}
        self._each: dict = {}
        self._charged = 0.0

    def scored(self, scores: dict[str, float], seconds: float) -> None:
        """Keep BM25 ``scores`` computed in ``seconds``."""
        self.bm25.update(scores)
        self._bm25_seconds += seconds
        self._bm25_papers += len(scores)

    def reused_bm25(self, papers: int) -> None:
        """``papers`` scores were taken from the memo: charge them at the average cost per paper so far."""
        if papers and self._bm25_papers:
            self._charged += papers * self._bm25_seconds / self._bm25_papers

    def shared(self, key: tuple, compute: Callable[[], T]) -> T:
        """``compute()``, run once per ``key`` for the query (the caller names in ``key`` everything the value
        depends on); a later call with the same key returns the same value and is charged its seconds."""
        found = self._shared.get(key)
        if found is None:
            began = time.perf_counter()
            value = compute()
            self._shared[key] = (value, time.perf_counter() - began)
            return value
        value, seconds = found
        self._charged += seconds
        return value

    def each(self, kind: tuple, keys: Sequence[K], compute: Callable[[list[K]], dict[K, T]]) -> dict[K, T]:
        """The value of every key of ``keys`` under ``kind`` (which names what the values depend on besides their
        key), in ``keys``' order: ``compute(missing)`` runs once for the keys no earlier call computed, and those
        an earlier call did are charged at the average seconds per key ``kind`` has cost so far."""
        store, cost = self._each.setdefault(kind, ({}, [0.0, 0]))
        missing = [key for key in keys if key not in store]
        if missing:
            began = time.perf_counter()
            store.update(compute(missing))
            cost[0] += time.perf_counter() - began
            cost[1] += len(missing)
        reused = len(keys) - len(missing)
        if reused and cost[1]:
            self._charged += reused * cost[0] / cost[1]
        return {key: store[key] for key in keys}

    def held(self, kind: tuple) -> int:
        """How many values ``each`` has computed under ``kind`` for the query."""
        found = self._each.get(kind)
        return len(found[0]) if found else 0

    def take_charge(self) -> float:
        """The seconds saved since the last call (and start again from 0)."""
        charged, self._charged = self._charged + self.statements.saved, 0.0
        self.statements.saved = 0.0
        return charged
