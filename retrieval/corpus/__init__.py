"""Paper records and where they come from: the built-in mock corpus, its clients, the JSONL reader.

Names are imported on first use (PEP 562), so a process that only searches does not pay for the build's
imports."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


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
