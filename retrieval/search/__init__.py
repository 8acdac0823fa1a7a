"""Searching an index: the client (read-only), the query, the lexical pass, the graph pass and the blend.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from .._lazy import callable_as, lazy_exports

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


# ``retrieval.search`` is also the function ``retrieval.commands.search``: importing this package (as a
# ``RetrievalClient`` does) sets the attribute ``search`` of ``retrieval`` to the package, which then stood where the
# function had been ("'module' object is not callable"). Called, the package is the function.
callable_as(__name__, "retrieval.commands", "search")
