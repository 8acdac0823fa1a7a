"""Where an index lives, decided once: a SQLite file (``IndexFile``) or a schema on a PostgreSQL server
(``IndexServer``, which is also the coordinator of an index sharded over several servers).

``backend_of(where)`` reads the location (a path, ``sqlite:///PATH``, ``postgresql://...``, ``$RETRIEVAL_DB``)
once; everything that differs between the two kinds of index is a method here: opening for reading, the
writers' transaction, the query log's short transaction, building, upgrading, the size on disk, and which
exceptions are the store's (turned into messages that name the index). The modules above (the writer, the query
log, the client, the commands) call these and never ask which kind of index they have; the statements they run
are the same texts on both (``retrieval.store.sql.dialect`` gives each dialect's).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..config import DatabaseURL, resolve_db
from ..errors import ConfigError, RetrievalError, StoreError
from .database import KNOWN_REVISIONS, IndexStats, check_index, connect, index_revision, store_error
from .sql.dialect import POSTGRESQL, SQLITE, statement


class Backend:
    """An index's location and what reaching it takes (see the module). ``location`` is a ``Path`` or a
    ``DatabaseURL``; ``shown`` names it in messages (a server URL without its password)."""

    dialect = ""

    def __init__(self, location: Path | DatabaseURL) -> None:
        self.location = location

    @property
    def shown(self) -> str:
        return str(self.location)

    @property
    def name(self) -> str:
        """A short name for titles: the file's name, or the server's URL (without its password)."""
        return self.shown

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shown!r})"

    def check(self, rows=None) -> IndexStats:
        """The index's statistics, once it is checked to be an index this version reads
        (``retrieval.store.database.check_index``; through ``rows`` when a connection is open on it)."""
        return check_index(self.location, rows)

    # -- what differs ------------------------------------------------------------------------------------------
    def identity(self) -> tuple | None:
        """Which index is at the location now, where another can be put in its place under an open connection
        (an index file: its device and inode, None when there is no file); None on a server."""
        return None

    def connect(self, timeout: float | None = None):
        """A read-only connection (``execute``, ``close``, ``in_transaction``); a missing index is an
        ``IndexNotFoundError`` that says how to build one. ``timeout``: seconds a statement may take, where the
        server enforces it (PostgreSQL); a SQLite read's budget is the executor's."""
        raise NotImplementedError

    def write_transaction(self, busy_ms: int, doing: str = "write to", writer: bool = False, upgraded=None):
        """``with backend.write_transaction(...) as conn``: one write transaction under the writers' lock,
        committed when the block ends, rolled back on any error; ``conn.execute`` takes SQLite's texts and named
        parameters. ``writer``: an add or a remove, which brings an index of an older revision up in the same
        swap as its write (the upgrade, ``(before, after)``, appended to the list ``upgraded`` when given)."""
        raise NotImplementedError

    def log_transaction(self, busy_ms: int):
        """``with backend.log_transaction(...) as conn``: one short write transaction that waits at most
        ``busy_ms`` for a lock and not for the writers' lock (a query log row: dropped, not waited for)."""
        raise NotImplementedError

    def is_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this store's (a database or driver error), which ``error`` turns into a message."""
        raise NotImplementedError

    def error(self, exc: BaseException, doing: str) -> RetrievalError:
        """The message for the store's failure ``exc`` while ``doing`` ("read", "write to", ...)."""
        raise NotImplementedError

    def build(self, papers: Iterable, *, shards=None, **options):
        """A new index of ``papers`` here, swapped in whole when it is complete (``retrieval build``)."""
        raise NotImplementedError

    def upgrade(self):
        """The index brought to this version's schema revision (``retrieval upgrade``): ``(before, after)``."""
        raise NotImplementedError

    def size(self, rows) -> int:
        """The bytes the index takes (``rows``: a reader's, inside its snapshot)."""
        raise NotImplementedError

    def has_table(self, rows, name: str) -> bool:
        """Whether the index has the table ``name`` (an older revision may lack one); ``HAS_TABLE_SQL`` reads each
        dialect's catalogue."""
        return bool(rows("open: is there a table", HAS_TABLE_SQL, {"name": name})[0][0])


class IndexFile(Backend):
    """An index in one SQLite file (WAL mode: readers never wait for the writer)."""

    dialect = SQLITE

    @property
    def name(self) -> str:
        return self.location.name

    def identity(self) -> tuple | None:
        try:
            st = os.stat(self.location)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def connect(self, timeout: float | None = None):
        if not self.location.exists():
            check_index(self.location)  # the message that says how to build one
        return connect(self.location, readonly=True)

    @contextmanager
    def write_transaction(self, busy_ms: int, doing: str = "write to", writer: bool = False, upgraded=None) -> Iterator:
        from .sqlite.files import check_writable, refresh_planner_statistics, write_transaction

        check_writable(self.location, doing)  # before any read, whose open would leave read-only side files
        if writer and index_revision(self.location) in KNOWN_REVISIONS[:-1]:
            from .schema.migrate import upgraded_copy

            # A writer upgrades what it writes to: the upgrade and the write on one copy, swapped in together when
            # the write succeeds, so a failed write leaves the index at its old revision (readable by the version
            # that wrote it).
            try:
                with (
                    upgraded_copy(self.location) as (copy, upgrade),
                    write_transaction(copy, busy_ms, doing, lock=False, named=self.location) as conn,
                ):
                    yield conn
                    refresh_planner_statistics(conn)
            except (OSError, sqlite3.Error) as exc:
                raise store_error(exc, self.location, "upgrade") from None
            if upgraded is not None:
                upgraded.append(tuple(upgrade))
            return
        if writer:
            check_index(self.location)
        with write_transaction(self.location, busy_ms, doing) as conn:
            yield conn
            if writer:
                refresh_planner_statistics(conn)

    def log_transaction(self, busy_ms: int):
        from .sqlite.files import log_transaction

        return log_transaction(self.location, busy_ms)

    def is_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (sqlite3.Error, OSError))

    def error(self, exc: BaseException, doing: str) -> RetrievalError:
        return store_error(exc, self.location, doing)

    def build(self, papers: Iterable, *, shards=None, **options):
        from .sqlite.build import build_index

        if shards is not None:
            raise ConfigError(f"--shards needs a PostgreSQL coordinator: --db postgresql://..., not {self.shown}")
        return build_index(papers, self.location, **options)

    def upgrade(self):
        from .schema.migrate import upgrade_index
        from .sqlite.files import check_writable

        check_writable(self.location, "upgrade")  # before its revision is read (which leaves side files behind)
        return upgrade_index(self.location)

    def size(self, rows) -> int:
        return self.location.stat().st_size


class IndexServer(Backend):
    """An index in the schema ``retrieval`` of a PostgreSQL database (psycopg 3), or the coordinator of an index
    sharded over several (``retrieval.store.postgres.shards``: its ``index_info`` names the shards)."""

    dialect = POSTGRESQL

    def __init__(self, location: DatabaseURL) -> None:
        from .postgres.connection import driver

        driver()  # the optional driver, asked for once here: without it, every server command says what to install
        super().__init__(location)

    @property
    def shown(self) -> str:
        return self.location.shown

    def connect(self, timeout: float | None = None):
        from .postgres.connection import connect as server_connect  # psycopg: imported for a server only

        # A missing database says how to create one.
        return server_connect(self.location, readonly=True, timeout=timeout)

    def write_transaction(self, busy_ms: int, doing: str = "write to", writer: bool = False, upgraded=None):
        from .postgres.write import write_transaction

        # On a server the transaction checks the index itself (under the lock); an older revision is refused.
        return write_transaction(self.location, None if writer else busy_ms / 1000, doing)

    def log_transaction(self, busy_ms: int):
        from .postgres.write import log_transaction

        return log_transaction(self.location, busy_ms)

    def is_error(self, exc: BaseException) -> bool:
        from .postgres.connection import is_error

        return is_error(exc)

    def error(self, exc: BaseException, doing: str) -> RetrievalError:
        from .postgres.connection import server_error

        return server_error(exc, self.location, doing)

    def build(self, papers: Iterable, *, shards=None, **options):
        from .postgres.build import build_postgres
        from .postgres.shards import build_sharded, parse_shards, recorded_shards

        urls = parse_shards(shards) if shards is not None else recorded_shards(self.location)
        if urls:  # sharded: the coordinator here and its shards (a rebuild without --shards keeps them)
            named = "--shards" if shards is not None else "the shards the index records"
            return build_sharded(papers, self.location, urls, named=named, **options)
        return build_postgres(papers, self.location, **options)

    def upgrade(self):
        from .postgres.build import upgrade_server

        return upgrade_server(self.location)

    def size(self, rows) -> int:
        return int(rows("stats: the schema's size", SCHEMA_BYTES_SQL)[0][0])


# The catalogues differ; on PostgreSQL, the index's own schema (the search path a connection sets).
HAS_TABLE_SQL = statement(
    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name)",
    postgresql="""\
SELECT EXISTS (
    SELECT 1
    FROM pg_tables
    WHERE schemaname = current_schema()
      AND tablename = :name
)""",
)

#: PostgreSQL: the bytes of the index's schema (tables, indexes, TOAST); of a coordinator, its own tables.
SCHEMA_BYTES_SQL = statement(
    """\
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema()
  AND c.relkind IN ('r', 'p', 'm')""",
    only=POSTGRESQL,
)


def backend_of(where: str | os.PathLike[str] | Backend | None = None) -> Backend:
    """The backend of the index at ``where`` (a path, ``sqlite:///PATH``, ``postgresql://...``; None:
    ``$RETRIEVAL_DB``, else ``./retrieval.db``), decided here once (``retrieval.config.resolve_db``)."""
    if isinstance(where, Backend):
        return where
    location = resolve_db(where)
    return IndexServer(location) if isinstance(location, DatabaseURL) else IndexFile(location)


def file_only(where: str | os.PathLike[str] | Backend | None, what: str) -> Path:
    """The index file at ``where``, for ``what`` (an operation that works on SQLite files only): a server is
    refused with a ``StoreError`` that says so and what to do."""
    location = where.location if isinstance(where, Backend) else resolve_db(where)
    if isinstance(location, DatabaseURL):  # said as it is, whether or not the server driver is installed
        raise StoreError(
            f"{what} works on an index file; on PostgreSQL ({location.shown}) it is not supported yet: "
            "give a file path with --db"
        )
    return location
