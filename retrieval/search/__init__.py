"""Searching an index: the lexical pass, the graph pass, and the merge.

Names are imported on first use (PEP 562), so a process that only searches does not pay for the build's
imports."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BM25Index",
    "CitationGraph",
    "RankedPaper",
    "RetrievalClient",
    "RetrievalResult",
    "build_client",
]
