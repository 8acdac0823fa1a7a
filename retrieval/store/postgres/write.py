"""Writing to an index on PostgreSQL: the incremental writer's transaction, its lock and its connection.

The writer (``retrieval.store.writer``) runs the same Python logic on both backends; here is what is
PostgreSQL's own:

- **One transaction per add or remove**, at READ COMMITTED, whose first statement takes a transaction-level
  advisory lock (``pg_advisory_xact_lock(WRITER_LOCK_KEY)``, per database). Writers therefore run one at a
  time: a second writer waits (at most ``LOCK_TIMEOUT`` seconds) and then goes on from what the first
  committed. READ COMMITTED matters: each statement after the lock sees every commit made before it, so the
  vocabulary, the next ids, N and the in-degrees a writer reads are the current ones and no update is lost
  (under REPEATABLE READ the snapshot would be taken before the wait). The lock is released when the
  transaction ends, however it ends (a commit, a rollback, a killed client's dropped connection).
- **Readers never wait**: a search is one REPEATABLE READ, read-only transaction (``retrieval.store.sql.dialect``),
  one snapshot, which sees the index before an add or after it, never a part of it, and takes no lock a writer
  holds.
- **Statements**: each SQLite text the writer runs has its PostgreSQL text registered beside it (``register``
  in ``writer.py`` and ``rows.py``); ``WriteConnection`` runs that text (a statement without one is refused
  by name). Placeholders stay SQLite's (``?`` and ``:name``) and are rewritten here for psycopg. A plain
  ``INSERT INTO t (columns) VALUES (?, ...)`` given many rows is sent as one ``COPY``: the same rows, the same
  constraint checks, a fraction of the round trips.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from ... import stop
from ...config import DatabaseURL
from ...errors import IndexNotFoundError, NotAnIndexError, SchemaVersionError, StoreError
from ..sql.dialect import POSTGRESQL, statement, text_for
from .connection import connect, convert, driver, server_error

#: The advisory lock every writer of an index on PostgreSQL holds for its transaction (a fixed 64-bit key,
#: ``retrieval``'s writers' lock; advisory locks are per database, so indexes in other databases never share it).
WRITER_LOCK_KEY = 0x7265747269657631  # b"retriev1"
#: Seconds a writer waits for another writer's transaction before it gives up with a message.
LOCK_TIMEOUT = 120.0

_QUESTION = re.compile(r"'[^']*'|\?")
_PSYCOPG_TEXT: dict[str, str] = {}
_COPY = re.compile(r"^INSERT INTO (\w+) \(([\w, ]+)\) VALUES \((\?(?:, \?)*)\)$")

REVISION_SQL = statement("SELECT version_num FROM alembic_version")
INFO_SQL = statement("SELECT key, value FROM index_info")
# Ids are assigned by the writer (the largest plus one, under the lock); the sequences follow, so that a row
# inserted by hand with the column's default gets a fresh id too.
SEQUENCES_SQL = """\
SELECT setval(pg_get_serial_sequence('doc_len', 'doc_id'), (SELECT coalesce(max(doc_id), 0) + 1 FROM doc_len), false),
       setval(pg_get_serial_sequence('doc_freq', 'term_id'), (SELECT coalesce(max(term_id), 0) + 1 FROM doc_freq),
              false)"""


def psycopg_text(sql: str) -> str:
    """The PostgreSQL text of the SQLite statement ``sql`` with psycopg's placeholders (``%s``, ``%(name)s``)."""
    out = _PSYCOPG_TEXT.get(sql)
    if out is None:
        named = convert(text_for(sql, POSTGRESQL))  # ``:name`` -> ``%(name)s``, ``%`` -> ``%%``
        out = _QUESTION.sub(lambda m: "%s" if m.group(0) == "?" else m.group(0), named)
        _PSYCOPG_TEXT[sql] = out
    return out


class WriteConnection:
    """What the writer uses of a ``sqlite3.Connection`` (``execute``, ``executemany``), on a psycopg connection
    inside the writers' transaction: each statement runs as its registered PostgreSQL text."""

    dialect = POSTGRESQL

    def __init__(self, raw) -> None:
        self.raw = raw

    def execute(self, sql: str, params=None):
        cursor = self.raw.cursor()
        cursor.execute(psycopg_text(sql), {} if params is None else params, prepare=False)
        return cursor

    def executemany(self, sql: str, rows: Iterable) -> None:
        text = text_for(sql, POSTGRESQL)
        copy = _COPY.match(text)
        if copy is None:
            rows = list(rows)
            if rows:
                self.raw.cursor().executemany(psycopg_text(sql), rows)
            return
        table, columns = copy.group(1), copy.group(2)
        if len(columns.split(",")) != copy.group(3).count("?"):
            raise StoreError(f"the statement {sql[:60]!r} names {columns} but has other placeholders")
        with self.raw.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as out:  # names from the code only
            for row in rows:
                out.write_row(row)


def _check(conn: WriteConnection, url: DatabaseURL) -> dict[str, str]:
    """The index at ``url`` is one this version writes to: its revision is the head and it is finished; returns
    its ``index_info``. An older revision names ``retrieval upgrade`` (a sharded index: the rebuild)."""
    from ..database import HEAD_REVISION, KNOWN_REVISIONS, IndexStats, build_command, check_analyser, located

    psycopg = driver()
    try:
        revision = conn.execute(REVISION_SQL).fetchone()
    except psycopg.errors.UndefinedTable:
        raise IndexNotFoundError(
            f"no index at {url.shown}: build one with `retrieval build --db {url.shown}` (or point --db / "
            "$RETRIEVAL_DB at an existing index)"
        ) from None
    if revision is None:
        raise NotAnIndexError(f"{url.shown} has no schema revision: rebuild it with `{build_command(url)}`")
    info = dict(conn.execute(INFO_SQL).fetchall())
    if revision[0] != HEAD_REVISION:
        if revision[0] not in KNOWN_REVISIONS:
            raise SchemaVersionError(
                f"{url.shown} has schema revision {revision[0]!r}, which this version does not know: upgrade "
                f"retrieval, or rebuild it with `{build_command(url, info)}`"
            )
        older = f"{url.shown} has schema revision {revision[0]!r}, older than this version's {HEAD_REVISION!r}"
        if "shards" in info:  # its tables live on the shards, which the migrations do not reach
            raise SchemaVersionError(
                f"{older}: a sharded index is brought up to date by building it again: `{build_command(url, info)}`"
                " (it keeps the recorded shards); nothing was changed"
            )
        raise SchemaVersionError(
            f"{older}: upgrade it once with `retrieval upgrade --db {url.shown}`, then write again; nothing was changed"
        )
    if "n_papers" not in info:
        raise NotAnIndexError(
            f"{url.shown} is an unfinished index (no statistics): rebuild it with `{build_command(url, info)}`"
        )
    check_analyser(url.shown, info)
    try:
        IndexStats.from_info(info)  # types, ranges and the seal: a writer carries N and the totals forward
    except NotAnIndexError as exc:
        raise located(exc, url.shown, info) from None
    return info


@contextmanager
def write_transaction(url: DatabaseURL, timeout: float | None = None, doing: str = "write to") -> Iterator:
    """``with write_transaction(url) as conn``: one write transaction on the index at ``url`` under the writers'
    advisory lock (see the module), its index checked; committed when the block ends, rolled back on any error.
    Server failures become messages that name the server (password hidden)."""
    psycopg = driver()
    wait = LOCK_TIMEOUT if timeout is None else timeout
    pg = connect(url, readonly=False)  # autocommit: the transaction is begun and ended here
    raw = pg.raw
    try:
        raw.execute("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
        try:
            raw.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(wait * 1000)}ms",))
            try:
                raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
            except psycopg.errors.LockNotAvailable:
                raise StoreError(
                    f"another process has been writing to {url.shown} for {wait:.0f} s (an add or remove): "
                    "nothing was changed; try again when it has finished"
                ) from None
            conn = WriteConnection(raw)
            _check(conn, url)
            yield conn
            raw.execute(SEQUENCES_SQL)
            raw.execute("COMMIT")
            stop.saved()  # a stop from here on lets the command finish: the change is made
        except BaseException:
            with contextlib.suppress(Exception):  # the failure itself is what to report; the server rolls back
                if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raw.execute("ROLLBACK")
            raise
    except psycopg.Error as exc:
        raise server_error(exc, url, doing) from None
    finally:
        pg.close()


@contextmanager
def log_transaction(url: DatabaseURL, busy_ms: int) -> Iterator:
    """``with log_transaction(url, busy_ms) as conn``: one short write transaction on the index at ``url`` (a
    query log row) that waits at most ``busy_ms`` for a row lock and never for the writers' advisory lock."""
    psycopg = driver()
    pg = connect(url, readonly=False)
    raw = pg.raw
    try:
        with raw.transaction():
            raw.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(busy_ms)}ms",))
            yield WriteConnection(raw)
    except psycopg.Error as exc:
        raise server_error(exc, url, "write the query log to") from None
    finally:
        pg.close()
