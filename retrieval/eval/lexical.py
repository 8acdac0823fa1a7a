"""The evaluation's shared BM25 pass: how deep it goes and the list it gives a query, shared by the runner and
the training (``retrieval.eval.train``), which computes a query's features from the same list."""

from __future__ import annotations

from ..search import cutoff, prf
from ..search.client import RetrievalClient
from ..search.lexical import weigh
from ..search.query import Query

#: The deepest cutoff of the metrics, and so the length of every ranking and of the shared BM25 list.
LEXICAL_DEPTH = 100


def bm25_list(
    client: RetrievalClient, parsed: Query, depth: int, exclusion: cutoff.Exclusion | None
) -> list[tuple[str, float]]:
    """The query's exact BM25 top ``depth``, among the papers ``exclusion`` lets pass when there is one."""
    if exclusion is None:
        return client.lexical.search(parsed, depth)
    with client.snapshot() as snap:
        return prf.top(snap, weigh(snap, parsed), depth, exclusion.passing)


__all__ = ["LEXICAL_DEPTH", "bm25_list"]
