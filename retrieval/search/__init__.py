"""Searching an index: the lexical pass, the graph pass, and the merge."""

from .graph import CitationGraph
from .lexical import BM25Index
from .merge import RankedPaper, RetrievalClient, RetrievalResult, build_client

__all__ = ["BM25Index", "CitationGraph", "RankedPaper", "RetrievalClient", "RetrievalResult", "build_client"]
