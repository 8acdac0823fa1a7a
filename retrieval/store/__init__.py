"""The index file: schema (models, migrations), opening and checking it, writing it."""

from .database import HEAD_REVISION, IndexStats, check_index, connect, migrate
from .writer import IndexWriter, WriteSummary, add_papers, build_index, remove_papers

__all__ = [
    "HEAD_REVISION",
    "IndexWriter",
    "WriteSummary",
    "add_papers",
    "IndexStats",
    "build_index",
    "check_index",
    "connect",
    "migrate",
    "remove_papers",
]
