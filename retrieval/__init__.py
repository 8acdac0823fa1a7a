"""retrieval: an embedded literature-retrieval index (BM25 in SQL plus a citation-graph walk) in one SQLite file."""

from .commands import add, build, remove, search, stats
from .config import RetrievalConfig, resolve_db_path
from .corpus import ArxivMockClient, Paper, SemanticScholarMockClient, build_corpus, read_jsonl, read_papers
from .errors import (
    ConfigError,
    IndexNotFoundError,
    InputError,
    NotAnIndexError,
    RetrievalError,
    SchemaVersionError,
)
from .search import BM25Index, CitationGraph, RankedPaper, RetrievalClient, RetrievalResult, build_client
from .store import WriteSummary, add_papers, build_index, remove_papers
from .text import tokenise

__version__ = "0.1.0"

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
