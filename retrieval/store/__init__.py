"""The index file: schema (models, migrations), opening and checking it, writing it.

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .database import HEAD_REVISION, IndexStats, check_index, connect, migrate
    from .writer import IndexWriter, WriteSummary, add_papers, build_index, remove_papers

_EXPORTS = {
    "HEAD_REVISION": ".database",
    "IndexStats": ".database",
    "IndexWriter": ".writer",
    "WriteSummary": ".writer",
    "add_papers": ".writer",
    "build_index": ".writer",
    "check_index": ".database",
    "connect": ".database",
    "migrate": ".database",
    "remove_papers": ".writer",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "HEAD_REVISION",
    "IndexStats",
    "IndexWriter",
    "WriteSummary",
    "add_papers",
    "build_index",
    "check_index",
    "connect",
    "migrate",
    "remove_papers",
]
