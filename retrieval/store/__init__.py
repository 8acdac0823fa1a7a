"""The index file: schema (models, migrations), opening and checking it, writing it.

Names are imported on first use (PEP 562), so a process that only searches does not pay for the build's
imports."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


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
