"""Searching an index: the client (read-only), the query, the lexical pass, the graph pass and the blend.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

import sys

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .blend import RankedPaper, RetrievalResult
    from .client import RetrievalClient
    from .graph import CitationGraph
    from .lexical import BM25Index
    from .query import Query

_EXPORTS = {
    "BM25Index": ".lexical",
    "CitationGraph": ".graph",
    "Query": ".query",
    "RankedPaper": ".blend",
    "RetrievalClient": ".client",
    "RetrievalResult": ".blend",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "BM25Index",
    "CitationGraph",
    "Query",
    "RankedPaper",
    "RetrievalClient",
    "RetrievalResult",
]


class _Package(type(sys.modules[__name__])):
    """This package, callable as ``retrieval.search``, the function, is: importing a module of the package (as a
    ``RetrievalClient`` does) sets the attribute ``search`` of ``retrieval`` to the package, which then stood where
    the function had been (``retrieval.search("black hole")`` was "'module' object is not callable")."""

    def __call__(self, *args, **kwargs):
        from ..commands import search

        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
