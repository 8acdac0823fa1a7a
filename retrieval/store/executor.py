"""One executor for every statement a read runs, and the read snapshot it runs them in.

A tracer given to the executor (sqlite-utils' ``Database(tracer=...)`` is the model) sees each statement, with
its name and parameters, just before it runs, so a trace of a search is complete by construction: it is what
``retrieval search --sql`` prints.
"""

from __future__ import annotations

import sqlite3
import time
from collections import namedtuple
from collections.abc import Callable, Mapping

from .database import INDEX_INFO_SQL, IndexStats, store_error
from .dialect import SQLITE, register, text_for
from .postgres import is_error as is_server_error
from .postgres import server_error

#: PostgreSQL: the tables a read snapshot reads, locked (ACCESS SHARE: writers' row changes never wait for it) as a
#: snapshot begins, all at once and in this order. A rebuild's swap (``retrieval.store.pgbuild``) drops the old
#: tables: with every lock taken up front, a search in flight never asks for a lock the swap holds (no deadlock),
#: and one that begins during the swap waits for it, then reads the new tables from one snapshot, never a mix.
#: A swap that locks the same tables in the same order first cannot deadlock with any reader.
READ_LOCK_TABLES = (
    "index_info", "papers", "paper_authors", "citations", "cited_counts", "doc_freq", "doc_len", "term_freq",
)  # fmt: skip
READ_LOCKS_SQL = f"LOCK TABLE {', '.join(READ_LOCK_TABLES)} IN ACCESS SHARE MODE"
register(READ_LOCKS_SQL, READ_LOCKS_SQL)  # PostgreSQL only


class Statement(namedtuple("Statement", "name sql params")):
    """One statement as it ran: a name saying what it is for, the SQL text and its parameters."""

    __slots__ = ()


Tracer = Callable[[Statement], None]


class Trace:
    """A tracer that keeps every statement, in order."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def __call__(self, statement: Statement) -> None:
        self.statements.append(statement)


class StatementCache:
    """The rows of read statements, keyed by their text and parameters, for an index that does not change while
    the cache is in use (an evaluation's cached index, one query at a time); ``saved`` adds up the seconds the
    statements answered from the cache took when they ran."""

    __slots__ = ("results", "saved")

    def __init__(self) -> None:
        self.results: dict[tuple, tuple[list[tuple], float]] = {}
        self.saved = 0.0


class Executor:
    """Runs named, parameterised statements on one connection, telling the tracer of each. With ``cache`` set,
    ``rows`` answers a statement it has run before from the cache (and the tracer is not told: it did not run)."""

    def __init__(self, conn: sqlite3.Connection, tracer: Tracer | None = None, path: object = "the index") -> None:
        self.conn = conn
        self.dialect = getattr(conn, "dialect", SQLITE)  # a PostgreSQL connection says so (retrieval.store.postgres)
        self.tracer = tracer
        self.path = path  # for messages
        self.cache: StatementCache | None = None
        self._snapshot: Snapshot | None = None
        self.last_stats: IndexStats | None = None  # what the latest snapshot read (its ``info`` too)

    def run(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> sqlite3.Cursor:
        """Run ``sql`` with ``params`` (named placeholders) and return its cursor. An environment failure
        (locked, damaged, unreadable) becomes a ``RetrievalError`` that names the file and what to do."""
        params = {} if params is None else params
        if self.dialect != SQLITE:
            sql = text_for(sql, self.dialect, name)  # the statement's own text there (retrieval.store.dialect)
        if self.tracer is not None:
            self.tracer(Statement(name, sql, dict(params)))
        try:
            return self.conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise store_error(exc, self.path, "read") from None
        except Exception as exc:
            if self.dialect == SQLITE or not is_server_error(exc):
                raise
            raise server_error(exc, self.path, "read") from None

    def rows(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> list[tuple]:
        cache = self.cache
        if cache is not None:
            key = (sql, tuple(sorted(params.items())) if params else ())
            hit = cache.results.get(key)
            if hit is not None:
                cache.saved += hit[1]
                return list(hit[0])
            began = time.perf_counter()
        cursor = self.run(name, sql, params)
        try:
            rows = cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            raise store_error(exc, self.path, "read") from None
        except Exception as exc:
            if self.dialect == SQLITE or not is_server_error(exc):
                raise
            raise server_error(exc, self.path, "read") from None
        if self.dialect != SQLITE:
            rows = [tuple(row) for row in rows]
        if cache is not None:
            cache.results[key] = (rows, time.perf_counter() - began)
            return list(rows)
        return rows

    def one(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> tuple | None:
        cursor = self.run(name, sql, params)
        try:
            row = cursor.fetchone()
        except sqlite3.DatabaseError as exc:
            raise store_error(exc, self.path, "read") from None
        except Exception as exc:
            if self.dialect == SQLITE or not is_server_error(exc):
                raise
            raise server_error(exc, self.path, "read") from None
        return row if row is None or self.dialect == SQLITE else tuple(row)

    def snapshot(self) -> _SnapshotScope:
        """``with executor.snapshot() as snap``: one read transaction and the statistics as it sees them (read
        once). Every statement inside sees the same state of the file, even while another process adds papers
        (WAL mode); nested use joins the outer snapshot."""
        return _SnapshotScope(self)


class _SnapshotScope:
    """The context manager of ``Executor.snapshot`` (a class rather than ``contextlib``, whose import a query
    process would pay for)."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.outer = False

    def __enter__(self) -> Snapshot:
        executor = self.executor
        if executor._snapshot is not None:
            self.outer = True
            return executor._snapshot
        executor.run("begin the read snapshot", "BEGIN")
        try:
            if executor.dialect != SQLITE:  # before the snapshot is taken (at the first read)
                executor.run("lock the index's tables for the snapshot", READ_LOCKS_SQL)
            stats = IndexStats.from_info(dict(executor.rows("index statistics", INDEX_INFO_SQL)))
        except BaseException:
            self._end()
            raise
        executor._snapshot = Snapshot(executor, stats)
        executor.last_stats = stats
        return executor._snapshot

    def __exit__(self, *exc: object) -> None:
        if not self.outer:
            self._end()

    def _end(self) -> None:
        executor = self.executor
        executor._snapshot = None
        if executor.conn.in_transaction:  # an error inside may already have ended it
            executor.run("end the read snapshot", "COMMIT")


class Snapshot:
    """A read transaction: the executor to run statements with and the index's statistics as of its start."""

    __slots__ = ("executor", "stats")

    def __init__(self, executor: Executor, stats: IndexStats) -> None:
        self.executor = executor
        self.stats = stats

    def run(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> sqlite3.Cursor:
        return self.executor.run(name, sql, params)

    def rows(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> list[tuple]:
        return self.executor.rows(name, sql, params)

    def one(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> tuple | None:
        return self.executor.one(name, sql, params)
