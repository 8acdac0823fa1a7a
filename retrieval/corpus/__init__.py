"""Paper records and where they come from: the built-in mock corpus, its clients, the JSONL reader.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .jsonl import FORMATS, read_jsonl, read_papers
    from .mock import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients, merge_records
    from .paper import Paper

_EXPORTS = {
    "ArxivMockClient": ".mock",
    "FORMATS": ".jsonl",
    "Paper": ".paper",
    "SemanticScholarMockClient": ".mock",
    "build_corpus": ".mock",
    "merge_clients": ".mock",
    "merge_records": ".mock",
    "read_jsonl": ".jsonl",
    "read_papers": ".jsonl",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "ArxivMockClient",
    "FORMATS",
    "Paper",
    "SemanticScholarMockClient",
    "build_corpus",
    "merge_clients",
    "merge_records",
    "read_jsonl",
    "read_papers",
]
