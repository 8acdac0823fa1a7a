"""retrieval: an embedded literature-retrieval index (BM25 in SQL plus a citation-graph walk) in one SQLite file."""

from .commands import build, search, stats
from .config import RetrievalConfig, resolve_db_path
from .corpus import ArxivMockClient, Paper, SemanticScholarMockClient, build_corpus, read_jsonl
from .errors import (
    ConfigError,
    IndexNotFoundError,
    InputError,
    NotAnIndexError,
    RetrievalError,
    SchemaVersionError,
)
from .search import BM25Index, CitationGraph, RankedPaper, RetrievalClient, RetrievalResult, build_client
from .store import BuildSummary, build_index
from .text import tokenise

__version__ = "0.1.0"

__all__ = [
    "ArxivMockClient",
    "BM25Index",
    "BuildSummary",
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
    "build",
    "build_client",
    "build_corpus",
    "build_index",
    "read_jsonl",
    "resolve_db_path",
    "search",
    "stats",
    "tokenise",
]
