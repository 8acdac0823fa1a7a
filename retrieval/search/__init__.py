"""Searching an index: the lexical pass, the graph pass, and the merge.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .graph import CitationGraph
    from .lexical import BM25Index
    from .merge import RankedPaper, RetrievalClient, RetrievalResult, build_client

_EXPORTS = {
    "BM25Index": ".lexical",
    "CitationGraph": ".graph",
    "RankedPaper": ".merge",
    "RetrievalClient": ".merge",
    "RetrievalResult": ".merge",
    "build_client": ".merge",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "BM25Index",
    "CitationGraph",
    "RankedPaper",
    "RetrievalClient",
    "RetrievalResult",
    "build_client",
]
