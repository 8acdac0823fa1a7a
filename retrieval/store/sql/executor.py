"""One executor for every statement a read runs, and the read snapshot it runs them in.

A tracer given to the executor (sqlite-utils' ``Database(tracer=...)`` is the model) sees each statement, with
its name and parameters, just before it runs, so a trace of a search is complete by construction: it is what
``retrieval search --sql`` prints.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import namedtuple
from collections.abc import Callable, Mapping

from ...errors import QueryTimeoutError, StoreError
from ..database import INDEX_INFO_SQL, IndexStats, store_error
from ..postgres import connection as server
from ..postgres.connection import is_error as is_server_error
from ..postgres.connection import server_error
from ..schema.catalogue import LOCKED
from .dialect import (
    HASH_JOINS,
    HASH_JOINS_OFF_SQL,
    HASH_JOINS_ON_SQL,
    POSTGRESQL,
    SCATTERED,
    SHARDED,
    SQLITE,
    statement,
    text_for,
)

#: PostgreSQL: the tables a read snapshot reads, locked (ACCESS SHARE: writers' row changes never wait for it) as a
#: snapshot begins, all at once and in this order. A rebuild's swap (``retrieval.store.postgres.build``) drops the old
#: tables: with every lock taken up front, a search in flight never asks for a lock the swap holds (no deadlock),
#: and one that begins during the swap waits for it, then reads the new tables from one snapshot, never a mix.
#: A swap that locks the same tables in the same order first cannot deadlock with any reader.
#: SQLite virtual-machine steps between two looks at a read's deadline (a look costs a Python call).
BUDGET_STEPS = 20_000

READ_LOCKS_SQL = statement(f"LOCK TABLE {', '.join(LOCKED)} IN ACCESS SHARE MODE", only=POSTGRESQL)
#: PostgreSQL: a snapshot's beginning, its locks and the statistics in one round trip (three statements in one
#: message, run in order; the rows are the last one's).
BEGIN_READ_PARTS = tuple(text_for(part, POSTGRESQL) for part in ("BEGIN", READ_LOCKS_SQL, INDEX_INFO_SQL))
BEGIN_READ_SQL = statement(";\n".join(BEGIN_READ_PARTS), only=POSTGRESQL)


def merge(rule: str, parts: list[list[tuple]], params: Mapping[str, object]) -> list[tuple]:
    """The rows of a scattered statement from each shard's ``parts``, merged by ``rule`` (see ``SCATTERED``)."""
    from ...bm25 import SCORE_DECIMALS

    if rule == "concat":
        return [row for part in parts for row in part]
    if rule == "sum":
        return [(sum(part[0][0] or 0 for part in parts if part),)]
    if rule == "max":
        values = [part[0][0] for part in parts if part and part[0][0] is not None]
        return [(max(values),)] if values else []
    rows = [row for part in parts for row in part]
    # The order of each shard's statement: rounded score descending, then id by its bytes (COLLATE "C").
    rows.sort(key=lambda row: (-round(row[1], SCORE_DECIMALS), row[0].encode()))
    best = rows[: int(params["k"])]
    if rule == "top_k_counted":  # each shard's third column counts its own papers: the corpus's is their sum
        total = sum(part[0][2] for part in parts if part)
        return [(row[0], row[1], total, *row[3:]) for row in best]
    return best


class Statement(namedtuple("Statement", "name sql params")):
    """One statement as it ran: a name saying what it is for, the SQL text and its parameters."""

    __slots__ = ()


Tracer = Callable[[Statement], None]
#: What ``Executor.snapshot(ahead=...)`` takes: the statistics of an index to the statements to send with the
#: snapshot's beginning, ``(name, sql, params)`` each.
Ahead = Callable[[IndexStats], "list[tuple[str, str, dict]]"]


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

    def __init__(
        self, conn: sqlite3.Connection, tracer: Tracer | None = None, path: object = "the index",
        timeout: float | None = None, before_snapshot: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self.conn = conn
        # Called as each outermost snapshot begins, before its BEGIN: the client follows an index file replaced
        # under it (``RetrievalClient._follow_file``).
        self.before_snapshot = before_snapshot
        # Seconds a read snapshot may take on SQLite (a progress handler stops it; PostgreSQL's connection has its
        # own statement_timeout, set by retrieval.store.postgres.connection.connect); None: no budget.
        self.timeout = timeout
        self._deadline = 0.0
        self._timed_out = False
        self._stopped = False  # ``interrupt`` was called: an "interrupted" statement is not a Ctrl-C
        # A PostgreSQL connection says so (retrieval.store.postgres.connection).
        self.dialect = getattr(conn, "dialect", SQLITE)
        self.tracer = tracer
        self.path = path  # for messages
        self.cache: StatementCache | None = None
        self._snapshot: Snapshot | None = None
        self._turn = threading.RLock()  # held by the thread whose snapshot is open (``snapshot``)
        self.closed = False  # set by the client that closed the connection: a read then says so
        self.last_stats: IndexStats | None = None  # what the latest snapshot read (its ``info`` too)
        # A sharded index: one executor per shard (retrieval.store.postgres.shards).
        self.shards: list[Executor] | None = None
        self._layout: str | None = None  # the layout the shard executors were opened for
        self._pool = None  # the threads that run a statement on every shard at once
        # Where a sharded search's time went (bench/shards.py): seconds of scattered statements per shard, and
        # the wall time the coordinator waited for them.
        self.shard_seconds: dict[int, float] = {}
        self.scatter_seconds = 0.0

    def run(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> sqlite3.Cursor:
        """Run ``sql`` with ``params`` (named placeholders) and return its cursor. An environment failure
        (locked, damaged, unreadable) becomes a ``RetrievalError`` that names the file and what to do."""
        params = {} if params is None else params
        if sql in HASH_JOINS and self.dialect != SQLITE and not self.shards and self.conn.in_transaction:
            # A single server's lookups-only sessions, for this statement only (its rows are fetched by execute).
            # (A failing statement ends the transaction, and SET LOCAL with it.)
            self.run("planner: hash joins for the next statement", HASH_JOINS_ON_SQL)
            cursor = self._run(name, sql, params)
            self.run("planner: lookups again", HASH_JOINS_OFF_SQL)
            return cursor
        return self._run(name, sql, params)

    def _run(self, name: str, sql: str, params: Mapping[str, object]) -> sqlite3.Cursor:
        # The statement's text in this dialect (retrieval.store.sql.dialect); a sharded coordinator may have its own.
        sql = text_for(sql, SHARDED if self.shards else self.dialect, name)
        if self.tracer is not None:
            self.tracer(Statement(name, sql, dict(params)))
        try:
            return self.conn.execute(sql, params)
        except Exception as exc:
            raise self._translated(exc) from None

    def _translated(self, exc: Exception) -> BaseException:
        """What a read's failure becomes: an environment failure (locked, damaged, unreadable, a server gone) a
        ``RetrievalError`` that names the index and what to do, a Ctrl-C the ``KeyboardInterrupt`` it was;
        anything else itself, unchanged."""
        if isinstance(exc, sqlite3.DatabaseError):
            if str(exc) == "interrupted" and self._timed_out:
                return self._timeout_error()
            if str(exc) == "interrupted" and not self._stopped:
                # Neither the deadline nor ``interrupt``: a Ctrl-C that arrived as SQLite called back into Python
                # (the deadline's progress handler), which the sqlite3 module turned into this error.
                return KeyboardInterrupt()
            return store_error(exc, self.path, "read")
        if self.dialect != SQLITE and is_server_error(exc):
            if "statement timeout" in str(exc):
                return self._timeout_error()
            if "lock timeout" in str(exc):
                return self._locked_error()
            return server_error(exc, self.path, "read")
        return exc

    def _timeout_error(self) -> QueryTimeoutError:
        where = getattr(self.path, "shown", self.path)
        return QueryTimeoutError(
            f"reading {where} took longer than its {self.timeout:g} s budget and was stopped: narrow the query (fewer "
            "words, a filter), or give it more time (retrieval serve --query-timeout SECONDS)"
        )

    def _locked_error(self) -> QueryTimeoutError:
        where = getattr(self.path, "shown", self.path)
        waited = (
            f"most of the read's {self.timeout:g} s budget" if self.timeout is not None else f"{server.LOCK_WAIT:g} s"
        )
        return QueryTimeoutError(
            f"{where} stayed locked by another session for {waited} and the read was stopped: {server.LOCK_ADVICE}"
        )

    def _over_budget(self) -> int:
        """SQLite's progress handler during a snapshot: nonzero (stop the statement) past the deadline."""
        if time.monotonic() > self._deadline:
            self._timed_out = True
            return 1
        return 0

    def rows(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> list[tuple]:
        snapshot = self._snapshot
        if snapshot is not None and sql in snapshot.ahead:
            ran, rows = snapshot.ahead.pop(sql)
            if ran == dict(params or {}):  # what ran with the snapshot's beginning: its rows, in this snapshot
                return list(rows)
        if self.shards and sql in SCATTERED:
            return self._scattered(name, sql, params or {})
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
        except Exception as exc:
            raise self._translated(exc) from None
        if cache is not None:
            cache.results[key] = (rows, time.perf_counter() - began)
            return list(rows)
        return rows

    def _scattered(self, name: str, sql: str, params: Mapping[str, object]) -> list[tuple]:
        """``sql`` on every shard at once (a thread each: the shards work in parallel, the query waits for the
        slowest), traced in shard order before any runs, the results merged by its rule."""
        shards = self.shards
        assert shards is not None
        if self.tracer is not None:
            text = text_for(sql, shards[0].dialect, name)
            for i in range(len(shards)):
                self.tracer(Statement(f"{name} (shard {i})", text, dict(params)))
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(max_workers=len(shards), thread_name_prefix="retrieval-shard")
        began = time.perf_counter()
        futures = [self._pool.submit(_timed, shard, sql, params) for shard in shards]
        parts = []
        for i, future in enumerate(futures):
            rows, seconds = future.result()
            parts.append(rows)
            self.shard_seconds[i] = self.shard_seconds.get(i, 0.0) + seconds
        self.scatter_seconds += time.perf_counter() - began
        return merge(SCATTERED[sql], parts, params)

    def begin_shards(self, info: Mapping[str, str]) -> None:
        """A read snapshot of a sharded index (``retrieval.store.postgres.shards``) has begun here: begin one on every
        shard, opening the shard executors on first use (or again when a rebuild changed the layout). A shard's
        snapshot is its own: an add that commits between two shards' snapshots is seen on one and not the other
        (docs/scale-out.md)."""
        import json

        from ..postgres.connection import connect_shards

        text = info.get("shards")  # retrieval.store.postgres.shards.LAYOUT_KEY
        if self.shards and any(shard.conn.lost for shard in self.shards):
            # A shard's server restarted (or ended the session) since the last snapshot: open them all again, as
            # the coordinator's own connection is (``_SnapshotScope._begin_on_server``).
            self._layout = None
        if self._layout != text:
            self.close_shards()
            if text:
                layout = json.loads(text)
                conns = connect_shards(self.conn, layout)
                # No tracer of their own: this executor traces each shard's statements, in shard order. Messages
                # name the shard's server (its URL), the time budget is the coordinator's.
                self.shards = [Executor(conn, None, path=conn.url, timeout=self.timeout) for conn in conns]
                # The coordinator's own joins are of the few rows each statement fetched from the shards (the
                # texts of ``register_sharded``): hashed, not looked up row by row
                # (retrieval.store.postgres.connection turns hash joins off for a single server's lookups).
                self.conn.raw.execute("SET enable_hashjoin = on")
            self._layout = text
        for i, shard in enumerate(self.shards or ()):
            if self.tracer is not None:
                self.tracer(Statement(f"begin the read snapshot (shard {i})", text_for("BEGIN", shard.dialect), {}))
            shard.run("", "BEGIN")

    def interrupt(self) -> None:
        """Stop the statement running on this executor's connections now, from another thread (SQLite's
        ``interrupt``, PostgreSQL's cancel request): it raises in the thread that runs it."""
        for executor in (self, *(self.shards or ())):
            executor._stopped = True
            executor.conn.interrupt()

    def close_shards(self) -> None:
        """Close the shard executors' connections (if any), and the threads that ran statements on them."""
        if not self.shards and self._pool is None:
            return
        import contextlib

        for shard in self.shards or ():
            with contextlib.suppress(Exception):  # closing what may already be broken: nothing to report
                shard.conn.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        self.shards = None
        self._layout = None

    def one(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> tuple | None:
        if self.shards and sql in SCATTERED:
            rows = self._scattered(name, sql, params or {})
            return rows[0] if rows else None
        cursor = self.run(name, sql, params)
        try:
            row = cursor.fetchone()
        except Exception as exc:
            raise self._translated(exc) from None
        return row

    def snapshot(self, ahead: Ahead | None = None) -> _SnapshotScope:
        """``with executor.snapshot() as snap``: one read transaction and the statistics as it sees them (read
        once). Every statement inside sees the same state of the file, even while another process adds papers
        (WAL mode); nested use joins the outer snapshot.

        ``ahead``: the statements the reader will run first, as a function of the index's statistics. On a server
        they are sent with the snapshot's beginning, in the same round trip, made from the statistics the last
        snapshot read; a statement's rows answer the reader's ``rows`` only if it has the same text and parameters
        (so a change to the index in between costs the round trip saved, never a wrong answer), or are taken by
        a reader that knows what they hold (``Snapshot.take``)."""
        return _SnapshotScope(self, ahead)


def _timed(executor: Executor, sql: str, params: Mapping[str, object]) -> tuple[list[tuple], float]:
    began = time.perf_counter()
    rows = executor.rows("", sql, params)
    return rows, time.perf_counter() - began


class _SnapshotScope:
    """The context manager of ``Executor.snapshot`` (a class rather than ``contextlib``, whose import a query
    process would pay for)."""

    def __init__(self, executor: Executor, ahead: Ahead | None = None) -> None:
        self.executor = executor
        self.ahead = ahead
        self.outer = False

    def __enter__(self) -> Snapshot:
        # One snapshot at a time per connection: a client shared by threads takes turns (its connection, its
        # snapshot and the SQLite progress handler's deadline are one thread's at a time); nested scopes of the
        # same thread join the open snapshot.
        self.executor._turn.acquire()
        try:
            return self._enter()
        except BaseException:
            self.executor._turn.release()
            raise

    def _enter(self) -> Snapshot:
        executor = self.executor
        if executor.closed:
            where = getattr(executor.path, "shown", executor.path)
            raise StoreError(f"this client of {where} is closed: open a new one (RetrievalClient) to read the index")
        if executor._snapshot is not None:
            self.outer = True
            return executor._snapshot
        if executor.dialect == SQLITE:
            if executor.before_snapshot is not None:
                executor.before_snapshot()
            if executor.timeout is not None:
                executor._deadline = time.monotonic() + executor.timeout
                executor._timed_out = executor._stopped = False
                executor.conn.set_progress_handler(executor._over_budget, BUDGET_STEPS)
            executor.run("begin the read snapshot", "BEGIN")
        try:
            ahead: dict = {}
            if executor.dialect == SQLITE:
                info = dict(executor.rows("index statistics", INDEX_INFO_SQL))
            else:  # the locks before the snapshot is taken (at the first read), all in one round trip
                executor._stopped = False  # an ``interrupt`` of an earlier read is not this one's
                rows, ahead = self._begin_on_server()
                info = dict(rows)
            stats = IndexStats.from_info(info)
            if executor.dialect != SQLITE and (executor.shards or "shards" in info):
                executor.begin_shards(info)  # a sharded index: each shard's own snapshot, begun now
        except BaseException:
            self._end()
            raise
        executor._snapshot = Snapshot(executor, stats, ahead)
        executor.last_stats = stats
        return executor._snapshot

    def __exit__(self, *exc: object) -> None:
        try:
            if not self.outer:
                self._end()
        finally:
            self.executor._turn.release()

    def _begin_on_server(self) -> tuple[list[tuple], dict]:
        """``BEGIN_READ_SQL``'s rows, and the ahead statements as they ran with them (``sql: (params, rows)``);
        on a connection the server has dropped since the last snapshot (a restart, a terminated session) a
        new connection is opened and the snapshot begun on it: nothing was read yet, so a long-lived client or
        server recovers at its next search."""
        executor = self.executor
        guess = self._guess()
        try:
            return self._begin_with(guess)
        except QueryTimeoutError:
            raise  # the read's budget was spent waiting (a lock, a slow statement): not begun again to wait anew
        except Exception:
            if executor._stopped:
                raise  # ``interrupt`` cancelled it: the reader is to stop, not to begin again
            lost = getattr(executor.conn, "lost", False)
            if not lost and not guess:
                raise
        if lost:
            executor.conn.reopen()  # an error here (the server still down) is the message to give
        elif executor.conn.in_transaction:  # the guess failed: begin again without it (its error, if any, is then
            executor.run("end the read snapshot whose guess failed", "ROLLBACK")  # the reader's own statement's)
        return self._begin_with([])

    def _guess(self) -> list[tuple[str, str, dict]]:
        """The ahead statements made from the last snapshot's statistics: not on a sharded index (its statements
        are the shards'), nor before any snapshot."""
        executor, last = self.executor, self.executor.last_stats
        if self.ahead is None or last is None or executor.shards or "shards" in last.info:
            return []
        return self.ahead(last)

    def _begin_with(self, guess: list[tuple[str, str, dict]]) -> tuple[list[tuple], dict]:
        executor = self.executor
        if not guess:
            return executor.rows("begin the read snapshot", BEGIN_READ_SQL), {}
        texts = [text_for(sql, executor.dialect, name) for name, sql, _ in guess]
        if executor.tracer is not None:
            executor.tracer(Statement("begin the read snapshot", BEGIN_READ_SQL, {}))
            for (name, _, params), text in zip(guess, texts, strict=True):
                executor.tracer(Statement(name, text, dict(params)))
        statements = [(part, {}) for part in BEGIN_READ_PARTS]
        statements += [(text, params) for (_, _, params), text in zip(guess, texts, strict=True)]
        try:
            results = executor.conn.execute_together(statements)
        except Exception as exc:
            raise executor._translated(exc) from None
        info = results[len(BEGIN_READ_PARTS) - 1]
        ran = results[len(BEGIN_READ_PARTS) :]
        return info, {sql: (dict(params), rows) for (_, sql, params), rows in zip(guess, ran, strict=True)}

    def _end(self) -> None:
        executor = self.executor
        executor._snapshot = None
        for i, shard in enumerate(executor.shards or ()):
            if shard.conn.in_transaction:
                if executor.tracer is not None:
                    executor.tracer(Statement(f"end the read snapshot (shard {i})", "COMMIT", {}))
                shard.conn.end_read()  # not waited for: the shards end theirs side by side
        if executor.conn.in_transaction:  # an error inside may already have ended it
            if executor.dialect == SQLITE:
                executor.run("end the read snapshot", "COMMIT")
            else:  # not waited for (``PgConnection.end_read``): the next statement reads its answer
                if executor.tracer is not None:
                    executor.tracer(Statement("end the read snapshot", "COMMIT", {}))
                executor.conn.end_read()
        if executor.dialect == SQLITE and executor.timeout is not None:
            executor.conn.set_progress_handler(None, 0)


class Snapshot:
    """A read transaction: the executor to run statements with, the index's statistics as of its start, and
    ``kept``, what one reader of the snapshot keeps for another (the postings BLOBs a search read, which the
    scoring of its graph candidates reads again), gone with the snapshot."""

    __slots__ = ("executor", "stats", "kept", "ahead")

    def __init__(self, executor: Executor, stats: IndexStats, ahead: dict | None = None) -> None:
        self.executor = executor
        self.stats = stats
        self.kept: dict = {}
        # The statements sent with the beginning (``sql: (params, rows)``), each until a reader asks for it.
        self.ahead = {} if ahead is None else ahead

    def take(self, sql: str) -> tuple[dict, list[tuple]] | None:
        """The parameters and rows of ``sql`` as it ran with the snapshot's beginning (once), or None: for a
        reader that can use rows of the same statement with other parameters (what they cover, it reads)."""
        return self.ahead.pop(sql, None)

    def run(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> sqlite3.Cursor:
        return self.executor.run(name, sql, params)

    def rows(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> list[tuple]:
        return self.executor.rows(name, sql, params)

    def one(self, name: str, sql: str, params: Mapping[str, object] | None = None) -> tuple | None:
        return self.executor.one(name, sql, params)
