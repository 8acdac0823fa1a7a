"""The index file: schema (models, migrations), opening and checking it, writing it."""

from .database import HEAD_REVISION, IndexStats, check_index, connect, migrate
from .writer import BuildSummary, build_index

__all__ = [
    "HEAD_REVISION",
    "BuildSummary",
    "IndexStats",
    "build_index",
    "check_index",
    "connect",
    "migrate",
]
