"""Work that the modes of one query's evaluation share: the BM25 scores of candidate papers and the evidence
graph's edge support, computed once for the query and reused by every mode that asks for the same thing.

A memo is for one query against one unchanging index (the evaluation's cached index); the values it holds are
exactly what a mode would compute itself, so sharing changes no ranking. It changes timings, so it keeps the
seconds each reuse saved (``charge``): the evaluation adds them back to the reusing mode's latency, which stays
the latency that mode would have had alone (for BM25 scores, at the query's average cost per paper scored).
"""

from __future__ import annotations

from ..store.sql.executor import StatementCache


class QueryMemo:
    """Shared work of one query: ``bm25`` (paper id -> score), ``support`` (key -> (edge support, scorer calls,
    seconds)), ``statements`` (the read statements' rows, for ``RetrievalClient.cache_statements``) and the
    seconds reuses saved since the last ``take_charge``."""

    __slots__ = ("bm25", "_bm25_seconds", "_bm25_papers", "support", "statements", "_charged")

    def __init__(self) -> None:
        self.statements = StatementCache()
        self.bm25: dict[str, float] = {}
        self._bm25_seconds = 0.0
        self._bm25_papers = 0
        self.support: dict = {}
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

    def charge(self, seconds: float) -> None:
        """A reuse saved ``seconds`` of work."""
        self._charged += seconds

    def take_charge(self) -> float:
        """The seconds saved since the last call (and start again from 0)."""
        charged, self._charged = self._charged + self.statements.saved, 0.0
        self.statements.saved = 0.0
        return charged
