"""The index, on any backend: where it lives (``backend``), its schema (``schema/``: models, catalogue,
migrations), the statements and the executor they run through (``sql/``), opening and checking it
(``database``), the writers both backends share (``writer``, ``rows``, ``postings``), the query log, and what is
one backend's own (``sqlite/``: the file build, its bulk load, swaps and locks, re-indexing; ``postgres/``: the
connection, the server build, the writers' transaction, the sharded layout).

Names are imported on first use (``retrieval._lazy``)."""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .database import HEAD_REVISION, IndexStats, check_index, connect
    from .rows import WriteSummary
    from .schema.migrate import migrate, upgrade_index
    from .sql.executor import Executor, Snapshot, Statement, Trace
    from .sqlite.build import build_index
    from .writer import IndexWriter, add_papers, remove_papers

_EXPORTS = {
    "Executor": ".sql.executor",
    "HEAD_REVISION": ".database",
    "IndexStats": ".database",
    "IndexWriter": ".writer",
    "Snapshot": ".sql.executor",
    "Statement": ".sql.executor",
    "Trace": ".sql.executor",
    "WriteSummary": ".rows",
    "add_papers": ".writer",
    "build_index": ".sqlite.build",
    "check_index": ".database",
    "connect": ".database",
    "migrate": ".schema.migrate",
    "remove_papers": ".writer",
    "upgrade_index": ".schema.migrate",
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
