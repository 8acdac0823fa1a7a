"""Paper records and where they come from: the built-in mock corpus, its clients, the JSONL reader."""

from .jsonl import read_jsonl
from .mock import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients
from .paper import Paper

__all__ = [
    "ArxivMockClient",
    "Paper",
    "SemanticScholarMockClient",
    "build_corpus",
    "merge_clients",
    "read_jsonl",
]
