"""Paper records and where they come from: the built-in mock corpus, its clients, the JSONL reader."""

from .jsonl import FORMATS, read_jsonl, read_papers
from .mock import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients, merge_records
from .paper import Paper

__all__ = [
    "FORMATS",
    "ArxivMockClient",
    "Paper",
    "SemanticScholarMockClient",
    "build_corpus",
    "merge_clients",
    "merge_records",
    "read_jsonl",
    "read_papers",
]
