"""retrieval: an embedded literature-retrieval index (BM25 in SQL plus a citation-graph walk) in one SQLite file.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .commands import add, build, remove, search, stats
    from .config import RetrievalConfig, resolve_db_path
    from .corpus.jsonl import read_jsonl, read_papers
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus
    from .corpus.paper import Paper
    from .errors import ConfigError, IndexNotFoundError, InputError, NotAnIndexError, RetrievalError, SchemaVersionError
    from .search.graph import CitationGraph
    from .search.lexical import BM25Index
    from .search.merge import RankedPaper, RetrievalClient, RetrievalResult, build_client
    from .store.writer import WriteSummary, add_papers, build_index, remove_papers
    from .text import tokenise

__version__ = "0.1.0"

_EXPORTS = {
    "ArxivMockClient": ".corpus.mock",
    "BM25Index": ".search.lexical",
    "CitationGraph": ".search.graph",
    "ConfigError": ".errors",
    "IndexNotFoundError": ".errors",
    "InputError": ".errors",
    "NotAnIndexError": ".errors",
    "Paper": ".corpus.paper",
    "RankedPaper": ".search.merge",
    "RetrievalClient": ".search.merge",
    "RetrievalConfig": ".config",
    "RetrievalError": ".errors",
    "RetrievalResult": ".search.merge",
    "SchemaVersionError": ".errors",
    "SemanticScholarMockClient": ".corpus.mock",
    "WriteSummary": ".store.writer",
    "add": ".commands",
    "add_papers": ".store.writer",
    "build": ".commands",
    "build_client": ".search.merge",
    "build_corpus": ".corpus.mock",
    "build_index": ".store.writer",
    "read_jsonl": ".corpus.jsonl",
    "read_papers": ".corpus.jsonl",
    "remove": ".commands",
    "remove_papers": ".store.writer",
    "resolve_db_path": ".config",
    "search": ".commands",
    "stats": ".commands",
    "tokenise": ".text",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "ArxivMockClient",
    "BM25Index",
    "CitationGraph",
    "ConfigError",
    "IndexNotFoundError",
    "InputError",
    "NotAnIndexError",
    "Paper",
    "RankedPaper",
    "RetrievalClient",
    "RetrievalConfig",
    "RetrievalError",
    "RetrievalResult",
    "SchemaVersionError",
    "SemanticScholarMockClient",
    "WriteSummary",
    "add",
    "add_papers",
    "build",
    "build_client",
    "build_corpus",
    "build_index",
    "read_jsonl",
    "read_papers",
    "remove",
    "remove_papers",
    "resolve_db_path",
    "search",
    "stats",
    "tokenise",
]
