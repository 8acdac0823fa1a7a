"""An index on a PostgreSQL server: connections (psycopg 3) that the executor uses as it uses SQLite's.

``connect(url)`` returns a ``PgConnection`` in autocommit mode (the executor opens and ends its own
transactions: ``BEGIN`` is a repeatable-read, read-only transaction there, one snapshot per search). Statements
keep SQLite's named placeholders (``:name``); ``execute`` rewrites them to psycopg's (``%(name)s``) once per
text. Server failures become ``StoreError`` messages that name the server (password hidden) and what to do.
"""

from __future__ import annotations

import itertools
import re
import select

from ...config import DatabaseURL
from ...errors import IndexNotFoundError, StoreError

# ``:name`` but not ``::type`` (a cast) nor inside ``'...'``; ``%`` doubled, as psycopg reads it.
_PLACEHOLDER = re.compile(r"'[^']*'|(?<![:\w]):([A-Za-z_]\w*)")
_CONVERTED: dict[str, str] = {}

DIALECT = "postgresql"
#: The schema an index lives in, in the database its URL names.
SCHEMA = "retrieval"
#: The start of the schema name a sharded build gives its tables on every shard (``retrieval_shard_<tag>``).
SHARD_SCHEMA_PREFIX = f"{SCHEMA}_shard_"


def convert(sql: str) -> str:
    """``sql`` with ``:name`` placeholders as ``%(name)s`` (and ``%`` as ``%%``)."""
    out = _CONVERTED.get(sql)
    if out is None:
        escaped = sql.replace("%", "%%")
        out = _PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1) is None else f"%({m.group(1)})s", escaped)
        _CONVERTED[sql] = out
    return out


def numbered(sql: str) -> tuple[str, list[str]]:
    """``sql`` with ``:name`` placeholders as libpq's ``$1``, ``$2``, ... and the names in that order."""
    names: list[str] = []

    def number(m: re.Match) -> str:
        if m.group(1) is None:
            return m.group(0)
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return _PLACEHOLDER.sub(number, sql), names


_NUMBERED: dict[str, tuple[str, list[str]]] = {}


def numbered_once(sql: str) -> tuple[str, list[str]]:
    """``numbered(sql)``, worked out once per text."""
    out = _NUMBERED.get(sql)
    if out is None:
        out = _NUMBERED[sql] = numbered(sql)
    return out


def several(sql: str) -> bool:
    """Whether ``sql`` holds more than one statement (the project's statements have no ``;`` in a literal)."""
    return ";" in sql.strip().rstrip(";")


def driver():
    """The psycopg module, or a ``StoreError`` saying what to install (the driver is an optional extra)."""
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "an index on PostgreSQL needs the psycopg driver: pip install 'retrieval[postgresql]'"
        ) from None
    return psycopg


#: postgres_fdw's words for a shard it cannot reach, naming the foreign server a sharded build made for it
#: (``retrieval.store.postgres.shards``: ``..._s<shard number>``).
_FDW_SERVER = re.compile(r'could not connect to server "[^"]*_s(\d+)"')


def server_error(exc: BaseException, url: DatabaseURL, doing: str) -> StoreError:
    """The message for a server failure while ``doing`` (open, read, write to) the index at ``url``."""
    # The driver's first line, with the URL's password hidden: a malformed URL is quoted whole.
    first = url.hide(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    shard = _FDW_SERVER.search(first)
    if shard:  # postgres_fdw names its foreign server, a build's internal name; the cause is on a DETAIL line
        detail = [line.split(":", 1)[1].strip() for line in str(exc).splitlines() if line.startswith("DETAIL:")]
        cause = url.hide(detail[0]) if detail else first
        return StoreError(
            f"cannot {doing} the index at {url.shown}: its shard {shard.group(1)} cannot be reached ({cause}): check "
            "that the shard's server runs and still holds its database"
        )
    if "does not exist" in first and "remote SQL command" in str(exc) and f'"{SHARD_SCHEMA_PREFIX}' in first:
        # A shard answered that its schema is gone (dropped by hand, or its database replaced); postgres_fdw does
        # not say which shard, and every shard's schema has the same name.
        return StoreError(
            f"cannot {doing} the index at {url.shown}: a shard no longer holds its tables ({first}): its schema "
            f"was dropped or its database replaced; rebuild the index (`retrieval build --db {url.shown}`, on "
            "the shards it records, or with --shards URL,URL,...)"
        )
    if "lock timeout" in first:  # a session's wait past LOCK_WAIT (a build's, a writer's) outside the executor
        return StoreError(
            f"cannot {doing} the index at {url.shown}: another session held a lock on its tables for too long "
            f"({first}): {LOCK_ADVICE}"
        )
    if "does not exist" in first and "database" in first:
        return IndexNotFoundError(
            f"no database at {url.shown} ({first}): create it (`createdb`), then `retrieval build --db {url.shown}`"
        )
    if first.startswith("permission denied"):
        return StoreError(
            f"cannot {doing} the index at {url.shown}: {first}: connect as a role that may (the one that built the "
            "index), or have it grant this one what it lacks"
        )
    if "connection" in first.lower() or "could not" in first.lower():
        return StoreError(f"cannot {doing} the index at {url.shown}: {first}; check that the server runs and the URL")
    return StoreError(f"cannot {doing} the index at {url.shown}: {first}")


#: The share (percent) of a read's time budget it may wait for a table lock (``lock_timeout``): less than the whole,
#: so that the wait ends as a lock's, whose message differs from a slow query's.
LOCK_SHARE = 90
#: Seconds a session waits for a lock before its statement stops with a message, unless it sets its own: a read
#: without a time budget (``stats``, ``check``), a build's reads of the index it replaces and its swap (the
#: writers' lock, the tables). As long as a writer waits for another writer. Only a session that locks the index's
#: tables whole (an upgrade's, a build's swap, for moments; or another program's ``LOCK TABLE``) makes a read wait.
LOCK_WAIT = 120.0
#: What a message of a lock held too long says to do.
LOCK_ADVICE = (
    "a rebuild or an upgrade holds the index's tables for moments, so a longer hold is another program's "
    "(pg_stat_activity shows which session waits and which holds); try again once it is done"
)

#: The most texts a ``PgConnection`` keeps prepared in a session (a search runs a few dozen); a text past them is
#: parsed and planned at each run.
PREPARED_MAX = 128

#: Seconds a connection waits for the server to answer (libpq's ``connect_timeout``; its least is 2), unless the
#: URL says otherwise: a host that accepts connections and never answers would otherwise hold a search for minutes.
CONNECT_TIMEOUT = 10


def open_raw(url: str, **options):
    """A psycopg connection to ``url`` (autocommit), giving up after ``CONNECT_TIMEOUT`` seconds unless the URL
    sets its own ``connect_timeout``."""
    psycopg = driver()
    if "connect_timeout=" not in url:
        options.setdefault("connect_timeout", CONNECT_TIMEOUT)
    raw = psycopg.connect(url, autocommit=True, **options)
    try:
        raw.execute(f"SET lock_timeout = {max(1, int(LOCK_WAIT * 1000))}")  # never a wait without end (LOCK_WAIT)
    except BaseException:
        raw.close()
        raise
    return raw


class _Rows:
    """A statement's rows (and libpq's result, ``pgresult``) with the part of a cursor's interface the executor
    and the index checks use."""

    def __init__(self, ran: tuple[list[tuple] | None, object]) -> None:
        rows, self.pgresult = ran
        self._returns_rows = rows is not None
        self._rows = iter(rows or ())

    @property
    def description(self) -> list[tuple] | None:
        """The columns' names (in DB-API's 7-tuples, the rest None), or None for a statement that returns no rows."""
        if not self._returns_rows:
            return None
        result = self.pgresult
        return [(result.fname(i).decode(), *(None,) * 6) for i in range(result.nfields)]

    def fetchall(self) -> list[tuple]:
        return list(self._rows)

    def fetchone(self) -> tuple | None:
        return next(self._rows, None)

    def __iter__(self):
        return self._rows


class PgConnection:
    """A psycopg connection with the part of sqlite3's interface the executor and the index checks use."""

    dialect = DIALECT

    def __init__(
        self, raw, url: DatabaseURL, readonly: bool = True, schema: str = SCHEMA, timeout: float | None = None
    ) -> None:
        self.raw = raw
        self.url = url
        self.readonly, self.schema, self.timeout = readonly, schema, timeout  # to open it again the same way
        self._unsettled = False  # a COMMIT sent by ``end_read`` whose answer is not read yet
        self._prepared: dict[tuple[str, tuple[int, ...]], tuple[bytes, list[str]]] = {}  # ``execute_together``'s
        self._serial = itertools.count()  # the prepared statements' names, never used twice in a session
        self._transformer = None  # psycopg's adapter of values to and from the server's formats, made when needed

    @property
    def lost(self) -> bool:
        """Whether the connection is gone (the server restarted, or ended the session): a new one is needed."""
        return self.raw.closed or self.raw.broken

    def reopen(self) -> None:
        """Replace a lost connection with a new one to the same index, set up the same way (``connect``)."""
        import contextlib

        with contextlib.suppress(Exception):  # closing what is already broken: nothing to report
            self.raw.close()
        self.raw = connect(self.url, self.readonly, self.schema, self.timeout).raw
        self._unsettled = False
        self._prepared.clear()  # a session's prepared statements end with it
        self._transformer = None

    def execute(self, sql: str, params=None):
        """Run ``sql`` (``:name`` placeholders) with ``params`` and return its rows as a cursor does: one statement
        through ``_pipeline`` (prepared, rows in binary); a text of several statements (``BEGIN_READ_SQL``) through
        psycopg's simple protocol, the only one that takes them (it answers in text), the rows the last one's."""
        if not several(sql):
            return _Rows(self._pipeline([(sql, params)])[0])
        self._settle()
        cursor = self.raw.cursor()
        cursor.execute(convert(sql), params or {})
        while cursor.nextset():
            pass
        return cursor

    def execute_together(self, statements: list[tuple[str, dict]]) -> list[list[tuple]]:
        """Each of ``statements`` (``(sql, params)``, one statement each) in one round trip, in order, and each
        one's rows (none for a statement that returns no rows)."""
        return [rows or [] for rows, _ in self._pipeline(statements)]

    def _pipeline(self, statements: list[tuple[str, dict | None]]) -> list[tuple[list[tuple] | None, object]]:
        """Each of ``statements`` run in one round trip, in order: per statement its rows (None for a statement
        that returns none) and libpq's result.

        libpq's pipeline mode, driven here rather than through psycopg's cursors: a search's statements are short,
        and psycopg's cursors and its waits between them cost the client more time than the server takes to run
        them. Each text is prepared on the server at its first run on this connection (in the same round trip;
        again if its parameters' types change; past ``PREPARED_MAX`` texts, parsed at each run) and run by name,
        its rows in binary (a BLOB as its bytes, not as hex text twice its size); values are adapted both ways by
        psycopg's own adapters, so the rows are those its cursors return."""
        self._settle()
        psycopg = driver()
        from psycopg import pq
        from psycopg.adapt import PyFormat, Transformer

        if self._transformer is None:
            self._transformer = Transformer(self.raw)
        tx = self._transformer
        planned = []  # (text, name or None to parse it at this run, whether to prepare it, values, types, formats)
        for sql, params in statements:
            text, names = numbered_once(sql)
            values = [(params or {})[name] for name in names]
            dumped = tx.dump_sequence(values, [PyFormat.AUTO] * len(values))
            key = (sql, tuple(tx.types))
            name = self._prepared.get(key)
            fresh = name is None and len(self._prepared) < PREPARED_MAX
            if fresh:
                name = self._prepared[key] = f"retrieval_{next(self._serial)}".encode()
            planned.append((text.encode(), name, key if fresh else None, dumped, tx.types, tx.formats))
        pgconn = self.raw.pgconn
        sent: list[tuple | None] = []  # per result to read: the key of a text prepared, or None for a statement
        try:
            pgconn.enter_pipeline_mode()
            for text, name, prepare, dumped, types, formats in planned:
                if prepare is not None:
                    pgconn.send_prepare(name, text, param_types=types)
                    sent.append(prepare)
                if name is None:
                    pgconn.send_query_params(text, dumped, types, formats, result_format=pq.Format.BINARY)
                else:
                    pgconn.send_query_prepared(name, dumped, param_formats=formats, result_format=pq.Format.BINARY)
                sent.append(None)
            pgconn.pipeline_sync()
            while pgconn.flush():  # the connection is non-blocking: what the socket did not take yet
                self._wait(pgconn, write=True, timeout=None)
            results = []
            for _ in sent:
                results.append(self._result(pgconn))
                if self._result(pgconn) is not None:  # a statement's results end with None
                    raise psycopg.OperationalError("the server answered statements sent together out of turn")
            if self._result(pgconn).status != pq.ExecStatus.PIPELINE_SYNC:
                raise psycopg.OperationalError("the server did not end the statements sent together")
            pgconn.exit_pipeline_mode()
        except BaseException:
            # A connection left halfway through a pipeline cannot be used again: dropped (``lost``), the next
            # snapshot opens a new one. An interrupted wait (Ctrl-C) ends here too.
            self._prepared.clear()
            self._drop()
            raise
        failed = next((r for r in results if r.status == pq.ExecStatus.FATAL_ERROR), None)
        if failed is not None:  # the server refused one (a timeout, a lock): its error; those after it did not run
            for key, result in zip(sent, results, strict=True):
                if key is not None and result.status != pq.ExecStatus.COMMAND_OK:
                    del self._prepared[key]  # not prepared: prepared again at its next run
            raise psycopg.errors.error_from_result(failed, encoding=self.raw.info.encoding)
        out = []
        for key, result in zip(sent, results, strict=True):
            if key is not None:
                continue
            if result.status == pq.ExecStatus.TUPLES_OK:
                tx.set_pgresult(result)
                out.append((tx.load_rows(0, result.ntuples, tuple), result))
            else:
                out.append((None, result))
        return out

    def _result(self, pgconn):
        """libpq's next result on ``pgconn``, waited for (as long as the server takes: ``statement_timeout``)."""
        while pgconn.is_busy():
            self._wait(pgconn, write=False, timeout=None)
            pgconn.consume_input()
        return pgconn.get_result()

    def end_read(self) -> None:
        """End a read transaction without waiting for the server's answer: COMMIT is sent now (the server ends the
        transaction and releases its locks as it reads it) and its answer is read at the connection's next use.
        A read-only transaction has nothing to lose, and a search does not wait one more round trip."""
        self._settle()
        pgconn = self.raw.pgconn
        try:
            pgconn.send_query(b"COMMIT")
            while pgconn.flush():  # the connection is non-blocking: what the socket did not take yet
                self._wait(pgconn, write=True)
        except Exception:  # noqa: BLE001 - a connection gone: the next snapshot opens a new one (``lost``)
            self._drop()
            return
        self._unsettled = True

    def _settle(self) -> None:
        """Read the answer of the COMMIT ``end_read`` sent, if any, so the connection is idle again. A connection
        that fails to answer it is dropped (``lost``): the next snapshot opens a new one."""
        if not self._unsettled:
            return
        self._unsettled = False
        pgconn = self.raw.pgconn
        try:
            while True:
                while pgconn.is_busy():
                    self._wait(pgconn, write=False)
                    pgconn.consume_input()
                if pgconn.get_result() is None:
                    return
        except Exception:  # noqa: BLE001 - as above
            self._drop()

    @staticmethod
    def _wait(pgconn, write: bool, timeout: float | None = CONNECT_TIMEOUT) -> None:
        """Wait until ``pgconn``'s socket can be written (``write``) or read; past ``timeout`` seconds (None: no
        limit) a ``TimeoutError``."""
        sockets = [pgconn.socket]
        reading, writing = ([], sockets) if write else (sockets, [])
        if not any(select.select(reading, writing, [], timeout)):
            raise TimeoutError("the server did not answer the end of a read")

    def _drop(self) -> None:
        import contextlib

        with contextlib.suppress(Exception):
            self.raw.close()

    @property
    def in_transaction(self) -> bool:
        self._settle()
        psycopg = driver()
        return not self.lost and self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def interrupt(self) -> None:
        """Cancel the statement running on this connection (sqlite3's ``interrupt``), from any thread."""
        if not self.lost:
            self.raw.cancel_safe(timeout=2.0)

    def close(self) -> None:
        self.raw.close()


def connect(
    url: DatabaseURL, readonly: bool = True, schema: str = SCHEMA, timeout: float | None = None
) -> PgConnection:
    """A connection to the index at ``url`` (autocommit; read-only sessions when ``readonly``), its tables those
    of ``schema`` (a shard's schema is named by its coordinator: ``retrieval.store.postgres.shards``). ``timeout``:
    seconds a read statement may take (``statement_timeout``; a writer's have none)."""
    psycopg = driver()
    from psycopg import sql

    try:
        raw = open_raw(str(url))
        raw.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))  # retrieval.store.postgres.build
        # A sharded index's tables are partitioned (retrieval.store.postgres.shards): an aggregate such as
        # max(doc_id) then runs on each shard, not over every row fetched (no effect on a single server's tables).
        raw.execute("SET enable_partitionwise_aggregate = on")
        if readonly:
            raw.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            # A search's statements are short; JIT compiling one (its estimated cost passes jit_above_cost on
            # the JSON parameters' default row estimates) took 85 ms of a 5 ms statement on hepth.
            raw.execute("SET jit = off")
            # The read statements are written for index lookups from a few keys (as SQLite runs them), but the
            # planner assumes a JSON list holds 100 values and then hashes whole tables (doc_len, papers) per
            # query: 20 ms where the lookups take 2 on the 100K corpus. Joins by lookup only, for these sessions.
            raw.execute("SET enable_hashjoin = off")
            raw.execute("SET enable_mergejoin = off")
            if timeout is not None:
                budget = max(1, int(timeout * 1000))
                raw.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(f"{budget}ms")))
                # A lock held past most of the budget is stopped as a lock, not as a slow query, so the message
                # can say which (a read waits only on a session that locks the index's tables whole).
                lock_budget = max(1, budget * LOCK_SHARE // 100)
                raw.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{lock_budget}ms")))
    except psycopg.Error as exc:
        raise server_error(exc, url, "open") from None
    return PgConnection(raw, url, readonly, schema, timeout)


def is_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a server or driver error (psycopg's)."""
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.Error)


# -- a sharded index (retrieval.store.postgres.shards): how the coordinator reaches its shards -------------------
#: The connection settings a shard's user mapping holds rather than its foreign server (postgres_fdw's rule).
MAPPING_OPTIONS = ("user", "password", "sslpassword")
#: The foreign servers' options that are postgres_fdw's own, not settings of the connection to the shard.
FDW_OPTIONS = frozenset(
    ("fetch_size", "async_capable", "use_remote_estimate", "fdw_startup_cost", "fdw_tuple_cost", "extensions",
     "updatable", "truncatable", "keep_connections", "parallel_commit", "batch_size")
)  # fmt: skip


def server_params(coordinator, server: str) -> dict[str, str]:
    """How to reach the shard behind the coordinator's foreign server ``server``: its connection settings and
    the public user mapping's."""
    options = dict(
        coordinator.execute(
            "SELECT split_part(o, '=', 1), substr(o, strpos(o, '=') + 1) "
            "FROM pg_foreign_server AS s, unnest(s.srvoptions) AS o WHERE s.srvname = %s",
            (server,),
        ).fetchall()
    )
    mapping = dict(
        coordinator.execute(
            "SELECT split_part(o, '=', 1), substr(o, strpos(o, '=') + 1) "
            "FROM pg_user_mappings AS m, unnest(m.umoptions) AS o WHERE m.srvname = %s AND m.usename = 'public'",
            (server,),
        ).fetchall()
    )
    mapping = {k: v for k, v in mapping.items() if k in MAPPING_OPTIONS}
    return {**{k: v for k, v in options.items() if k not in FDW_OPTIONS}, **mapping}


def url_of(params: dict[str, str]) -> str:
    """A ``postgresql://`` URL from connection parameters (host, port, dbname, user, password; any others as its
    query, ``?sslmode=require``, in name order)."""
    from urllib.parse import quote, urlencode

    user = quote(params.get("user", ""), safe="")
    password = params.get("password")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    port = f":{params['port']}" if "port" in params else ""
    rest = sorted((k, v) for k, v in params.items() if k not in ("host", "port", "dbname", "user", "password"))
    query = f"?{urlencode(rest)}" if rest else ""
    return f"postgresql://{auth}{params.get('host', '')}{port}/{quote(params.get('dbname', ''), safe='')}{query}"


def connect_shards(coordinator: PgConnection, layout: list[dict]) -> list[PgConnection]:
    """Read-only connections to the shards of a sharded index, each on its shard's schema, reached as the
    coordinator's foreign servers reach them (their options and the public user mapping)."""
    out: list[PgConnection] = []
    try:
        for entry in layout:
            url = DatabaseURL(url_of(server_params(coordinator.raw, entry["server"])))
            # The coordinator's read budget on every shard too (statement_timeout, lock_timeout).
            out.append(connect(url, schema=entry["schema"], timeout=coordinator.timeout))
    except BaseException:
        for conn in out:
            conn.close()
        raise
    return out
