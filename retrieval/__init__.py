"""retrieval: an embedded literature-retrieval index (BM25 in SQL plus a citation-graph walk) in one SQLite file.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from ._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .commands import (
        add,
        add_papers,
        build,
        build_client,
        build_from_clients,
        build_index,
        remove,
        remove_papers,
        search,
        stats,
        upgrade,
        upgrade_index,
    )
    from .config import RetrievalConfig, resolve_db_path
    from .corpus.jsonl import read_jsonl, read_papers
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus
    from .corpus.paper import Paper
    from .errors import (
        ConfigError,
        IndexNotFoundError,
        InputError,
        NotAnIndexError,
        RetrievalError,
        SchemaVersionError,
        StoreError,
    )
    from .search.blend import RankedPaper, RetrievalResult
    from .search.client import RetrievalClient
    from .search.graph import CitationGraph
    from .search.lexical import BM25Index
    from .search.query import Query
    from .store.rows import WriteSummary
    from .store.sql.executor import Statement, Trace
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
    "Query": ".search.query",
    "RankedPaper": ".search.blend",
    "RetrievalClient": ".search.client",
    "RetrievalConfig": ".config",
    "RetrievalError": ".errors",
    "RetrievalResult": ".search.blend",
    "SchemaVersionError": ".errors",
    "SemanticScholarMockClient": ".corpus.mock",
    "Statement": ".store.sql.executor",
    "StoreError": ".errors",
    "Trace": ".store.sql.executor",
    "WriteSummary": ".store.rows",
    "add": ".commands",
    "add_papers": ".commands",  # deprecated: add
    "build": ".commands",
    "build_client": ".commands",
    "build_corpus": ".corpus.mock",
    "build_from_clients": ".commands",
    "build_index": ".commands",  # deprecated: build
    "read_jsonl": ".corpus.jsonl",
    "read_papers": ".corpus.jsonl",
    "remove": ".commands",
    "remove_papers": ".commands",  # deprecated: remove
    "resolve_db_path": ".config",
    "search": ".commands",
    "stats": ".commands",
    "tokenise": ".text",
    "upgrade": ".commands",
    "upgrade_index": ".commands",  # deprecated: upgrade
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
    "Query",
    "RankedPaper",
    "RetrievalClient",
    "RetrievalConfig",
    "RetrievalError",
    "RetrievalResult",
    "SchemaVersionError",
    "SemanticScholarMockClient",
    "Statement",
    "StoreError",
    "Trace",
    "WriteSummary",
    "add",
    "add_papers",
    "build",
    "build_client",
    "build_corpus",
    "build_from_clients",
    "build_index",
    "read_jsonl",
    "read_papers",
    "remove",
    "remove_papers",
    "resolve_db_path",
    "search",
    "stats",
    "tokenise",
    "upgrade",
    "upgrade_index",
]
