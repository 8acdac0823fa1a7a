"""The index file: schema (models, migrations), opening and checking it, the executor reads run through, and
the writers (the full build, incremental add and remove).

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .build import build_index
    from .database import HEAD_REVISION, IndexStats, check_index, connect
    from .executor import Executor, Snapshot, Statement, Trace
    from .migrate import migrate, upgrade_index
    from .rows import WriteSummary
    from .writer import IndexWriter, add_papers, remove_papers

_EXPORTS = {
    "Executor": ".executor",
    "HEAD_REVISION": ".database",
    "IndexStats": ".database",
    "IndexWriter": ".writer",
    "Snapshot": ".executor",
    "Statement": ".executor",
    "Trace": ".executor",
    "WriteSummary": ".rows",
    "add_papers": ".writer",
    "build_index": ".build",
    "check_index": ".database",
    "connect": ".database",
    "migrate": ".migrate",
    "remove_papers": ".writer",
    "upgrade_index": ".migrate",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "Executor",
    "HEAD_REVISION",
    "IndexStats",
    "IndexWriter",
    "Snapshot",
    "Statement",
    "Trace",
    "WriteSummary",
    "add_papers",
    "build_index",
    "check_index",
    "connect",
    "migrate",
    "remove_papers",
    "upgrade_index",
]
