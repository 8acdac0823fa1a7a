"""Building an index on PostgreSQL: the SQLite build, then ``COPY`` into a new schema swapped in whole.

1. The corpus is indexed by the SQLite build (``retrieval.store.sqlite.build``: the same parsing, tokenising, sorting
   and statistics) into a temporary file, so both backends hold the same rows by construction.
2. A new schema ``retrieval_build_<pid>_<n>`` gets the schema from the Alembic migrations (the same revisions
   as a file), and each table is loaded with ``COPY ... FROM STDIN`` in key order, its secondary indexes
   created after the load.
3. One transaction renames the current ``retrieval`` schema away, renames the new one to ``retrieval`` and
   drops the old: readers see the old index or the new, never a mix (PostgreSQL's DDL is transactional), and a
   build that fails at any step leaves the old schema untouched (the new one is dropped).

The index lives in the schema ``retrieval`` of the database the URL names, and the database's ``search_path``
is set to ``retrieval, public`` so that ``psql`` sessions see its tables by their names.

**After a killed build.** A build killed outright (SIGKILL, a machine gone down) runs no cleanup of its own: it
leaves its local folder (``retrieval-pgbuild-XXXXXXXX`` in the system's temporary folder, the SQLite phase's
file) and, once it got that far, its schema on the server. Each has an owner that a later build can ask after:

- the folder is ``flock``'ed by its build for as long as the build lives, and the kernel drops that lock when the
  process dies, however it dies: a later build of the same user removes the folders whose lock it can take;
- the schema is created (with a comment marking it a build's) by a session that holds a session-level advisory
  lock keyed on its name, and the server releases that lock when the session ends, which it does when its client
  dies: a later build, on any machine, drops the marked schemas whose lock it can take. The pid in the name is
  not asked after (other machines build into the same server, and pids are reused); schemas without the mark
  (a build's from before the mark) are never touched. A sharded build's coordinator schema is marked and locked
  the same way, so either kind of build drops it; its foreign servers and its shards' schemas are for a later
  sharded build to remove (``retrieval.store.postgres.shards``, "After a killed build").

A build killed during the swap leaves no ``retrieval_old_*`` schema: the renames and the drop are one
transaction, which the server rolls back when the session ends (the build's schema is left, and dropped as above).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ... import stop
from ...config import DatabaseURL
from ...corpus.paper import Paper
from ...errors import NotAnIndexError, StoreError
from ...text import DEFAULT_STEM, DEFAULT_STOPWORDS
from ..schema.catalogue import BOOLEANS, BY_NAME, COPIED, LOCKED
from .connection import SCHEMA, driver, open_raw, server_error

#: Tables of whole numbers only, copied as text blocks (no per-row conversion): the postings.
INTEGER_TABLES = ("term_freq",)

#: The local folders of builds' SQLite phase, in the system's temporary folder (``tempfile``'s names after it).
FOLDER_PREFIX = "retrieval-pgbuild-"
#: What ``tempfile`` puts after the prefix: the only names taken for a killed build's folder.
_FOLDER_SUFFIX = r"[a-z0-9_]+"
#: A build's schema, as ``build_postgres`` names it: nothing else is ever dropped as a killed build's.
_BUILD_SCHEMA = re.compile(re.escape(SCHEMA) + r"_build_[0-9]+_[0-9]+")
#: The comment that marks a schema as a build's whose owner holds its advisory lock (``claim_schema``).
BUILD_MARK = "retrieval: a build's schema, dropped by a later build once the session holding its lock is gone"
#: The first key of the advisory lock a build's session holds on its schema (b"rbld"; the second key is the
#: name's ``hashtext``). Two keys: apart from the writers' lock, a single bigint (``retrieval.store.postgres.write``).
BUILD_LOCK_CLASS = 0x72626C64
#: Seconds the drop of a killed build's schema waits for a lock before it leaves the schema to a later build.
DROP_LOCK_TIMEOUT = 10


def migrate_schema(conn, schema: str) -> None:
    """Create the index's tables in ``schema`` with the Alembic migrations (on ``conn``'s server)."""
    from alembic import command
    from sqlalchemy import create_engine, pool, text

    from ..schema.migrate import alembic_config

    url = conn.url
    engine = create_engine("postgresql+psycopg://" + str(url).split("://", 1)[1], poolclass=pool.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text(f'SET search_path TO "{schema}"'))
            cfg = alembic_config()
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
    finally:
        engine.dispose()


def _fingerprint(raw, url: DatabaseURL | None = None) -> tuple | None:
    """What the index at the connection holds now, as its writers leave it (None: there is none yet). A schema
    of the index's name that holds relations but no index is refused (``NotAnIndexError``): a build replaces the
    schema whole, and it is not this package's to drop."""
    exists = raw.execute("SELECT to_regclass(%s)", (f'"{SCHEMA}".index_info',)).fetchone()[0]
    if exists is None:
        held = raw.execute(
            "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s ORDER BY c.relname LIMIT 3",
            (SCHEMA,),
        ).fetchall()
        if held:
            where = url.shown if url is not None else "this database"
            names = ", ".join(row[0] for row in held)
            raise NotAnIndexError(
                f"the schema {SCHEMA!r} of {where} holds tables that are not a retrieval index ({names}, ...): "
                "nothing was changed; build into another database (`createdb`, then --db with its name), or drop "
                f"that schema first if nothing in it is needed (`DROP SCHEMA {SCHEMA} CASCADE`)"
            )
        return None
    rows = raw.execute(
        f'SELECT key, value FROM "{SCHEMA}".index_info WHERE key IN (%s, %s, %s) ORDER BY key',
        ("n_papers", "total_tokens", "updated_at"),
    ).fetchall()
    return tuple(tuple(row) for row in rows)


def _secondary_indexes(raw, schema: str) -> list[tuple[str, str]]:
    """The secondary indexes of ``schema`` (name, definition), to drop before the load and create after it."""
    rows = raw.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes AS i "
        "WHERE i.schemaname = %s AND i.indexname NOT IN "
        "(SELECT c.conname FROM pg_constraint AS c JOIN pg_namespace AS n ON n.oid = c.connamespace "
        "WHERE n.nspname = %s)",
        (schema, schema),
    ).fetchall()
    return [(name, definition) for name, definition in rows]


def _constraints(raw, schema: str) -> list[tuple[str, str, str, str]]:
    """The keys of ``schema``'s tables (table, name, kind, definition): foreign keys first, as they are dropped
    before the load (a key checked row by row is most of a load's time) and added back after it, checked once."""
    rows = raw.execute(
        "SELECT t.relname, c.conname, c.contype, pg_get_constraintdef(c.oid) FROM pg_constraint AS c "
        "JOIN pg_class AS t ON t.oid = c.conrelid JOIN pg_namespace AS n ON n.oid = t.relnamespace "
        "WHERE n.nspname = %s AND c.contype IN ('f', 'p', 'u') ORDER BY c.contype = 'f' DESC, t.relname, c.conname",
        (schema,),
    ).fetchall()
    return [tuple(row) for row in rows]


def copy_table(lite: sqlite3.Connection, raw, schema: str, table: str, keep: tuple[str, set] | None = None) -> int:
    """Copy ``table`` of the SQLite index ``lite`` into ``schema`` with ``COPY`` (rows copied); with ``keep``,
    ``(column, values)``, only the rows whose column holds one of the values (a shard's:
    ``retrieval.store.postgres.shards``)."""
    columns = BY_NAME[table].columns
    cols = ", ".join(f'"{c}"' for c in columns)
    at, wanted = (columns.index(keep[0]), keep[1]) if keep else (None, None)
    flags = [(table, c) in BOOLEANS for c in columns]
    n = 0
    with raw.cursor().copy(f'COPY "{schema}"."{table}" ({cols}) FROM STDIN') as copy:
        cursor = lite.execute(f'SELECT {cols} FROM "{table}"')
        if table in INTEGER_TABLES:  # the postings: whole numbers only, sent as text blocks
            while rows := cursor.fetchmany(50_000):
                if at is not None:
                    rows = [row for row in rows if row[at] in wanted]
                copy.write("".join("\t".join(map(str, row)) + "\n" for row in rows))
                n += len(rows)
        else:
            for row in cursor:
                if at is not None and row[at] not in wanted:
                    continue
                if any(flags):
                    row = tuple(bool(v) if f and v is not None else v for v, f in zip(row, flags, strict=True))
                copy.write_row(row)
                n += 1
    return n


def copy_tables(source: Path, raw, schema: str) -> dict[str, int]:
    """Copy every table of the SQLite index ``source`` into ``schema`` with ``COPY`` (rows per table)."""
    counts = {}
    lite = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        for table in COPIED:
            raw.execute(f'DELETE FROM "{schema}"."{table.name}"')  # the migrations' own rows (alembic_version)
            counts[table.name] = copy_table(lite, raw, schema, table.name)
    finally:
        lite.close()
    return counts


def build_postgres(
    papers: Iterable[Paper],
    url: DatabaseURL,
    *,
    source: str = "",
    progress=None,
    workers: int | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
    semantic: str | None = None,
):
    """Build the index of ``papers`` at ``url`` (see the module docstring); returns the build's summary."""
    from ..sqlite.build import build_index

    psycopg = driver()
    started = time.perf_counter()
    try:
        raw = open_raw(str(url))  # first: a server that is not there fails before the build
    except psycopg.Error as exc:
        raise server_error(exc, url, "open") from None
    try:
        before = _fingerprint(raw, url)
        _, leftovers = remove_stale_schemas(raw)
    except BaseException as exc:
        raw.close()
        if isinstance(exc, psycopg.Error):
            raise server_error(exc, url, "open") from None
        raise
    remove_stale_folders()
    with build_folder() as tmp:
        file = tmp / "index.db"
        try:
            summary = build_index(papers, file, source=source, progress=progress, workers=workers, stem=stem,
                                  stopwords=stopwords, semantic=semantic)  # fmt: skip
            stop.staged()  # the file is the copy's source, not the index: a stop from here on stops the build
        except BaseException:
            raw.close()
            raise
        schema = f"{SCHEMA}_build_{os.getpid()}_{int(time.time() * 1000)}"
        try:
            claim_schema(raw, schema)
            try:
                from .connection import PgConnection

                migrate_schema(PgConnection(raw, url), schema)
                indexes = _secondary_indexes(raw, schema)
                keys = _constraints(raw, schema)
                with raw.transaction():
                    for name, _ in indexes:
                        raw.execute(f'DROP INDEX "{schema}"."{name}"')
                    for table, name, _, _ in keys:  # foreign keys first (the list's order)
                        raw.execute(f'ALTER TABLE "{schema}"."{table}" DROP CONSTRAINT "{name}"')
                    copy_tables(file, raw, schema)
                    for table, name, _, definition in reversed(keys):  # primary and unique keys, then foreign
                        raw.execute(f'ALTER TABLE "{schema}"."{table}" ADD CONSTRAINT "{name}" {definition}')
                    for _, definition in indexes:
                        raw.execute(definition)
                    # PostgreSQL checks term_freq's foreign key to doc_len on every removed paper: without an index
                    # led by doc_id that is a scan of every posting (a remove of 1% of hepth: 8.8 s, 0.8 s with it).
                    # SQLite does not enforce the key, and its files go without (the schema's own indexes).
                    raw.execute(f'CREATE INDEX ix_term_freq_doc_id ON "{schema}".term_freq (doc_id)')
                    for table, column in (("doc_len", "doc_id"), ("doc_freq", "term_id")):  # later adds go on
                        raw.execute(
                            f"SELECT setval(pg_get_serial_sequence('\"{schema}\".{table}', '{column}'), "
                            f'coalesce((SELECT max({column}) FROM "{schema}".{table}), 0) + 1, false)'
                        )
                settle(raw, schema)
                swap_schema(raw, url, schema, before)
            except BaseException:
                with contextlib.suppress(psycopg.Error):  # the failure itself is what to report
                    raw.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                raise
        except psycopg.Error as exc:
            raise server_error(exc, url, "write to") from None
        finally:
            raw.close()
    summary.path = url.shown
    summary.seconds = time.perf_counter() - started
    summary.warnings.extend(leftovers)
    return summary


def settle(raw, schema: str) -> None:
    """``VACUUM (ANALYZE)`` each table of ``schema``, a build's, before its first reader: the visibility map it
    sets lets index-only scans answer from the index alone (until a table is vacuumed, each row they read is
    fetched from the table as well), and the planner gets the tables' statistics. Autovacuum would, later."""
    tables = raw.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,))
    for (table,) in tables.fetchall():
        raw.execute(f'VACUUM (ANALYZE) "{schema}"."{table}"')


def claim_schema(raw, schema: str, mark: str | None = BUILD_MARK) -> None:
    """Create the build's schema ``schema``, marked as a build's (``mark``), with this session holding its
    advisory lock until the session ends: while it does, no later build takes the schema for a killed one's. The
    lock comes first and the schema and its mark are one transaction, so no one ever sees the schema unowned.
    ``mark=None``: the lock only (a shard's schema, whose mark is its foreign server's on the coordinator)."""
    from psycopg import sql

    raw.execute("SELECT pg_advisory_lock(%s::integer, hashtext(%s))", (BUILD_LOCK_CLASS, schema))
    with raw.transaction():
        raw.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        if mark is not None:
            raw.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(schema), sql.Literal(mark)))


@contextlib.contextmanager
def build_lock(raw, name: str) -> Iterator[bool]:
    """Whether this session took the advisory lock that the build of the schema ``name`` holds for its life
    (``claim_schema``) — False: that build is running, or another cleanup has it — released when the block ends.
    A session's own locks are taken again (they nest): a build asks before it claims its own schema."""
    row = raw.execute("SELECT pg_try_advisory_lock(%s::integer, hashtext(%s))", (BUILD_LOCK_CLASS, name)).fetchone()
    taken = row[0]
    try:
        yield taken
    finally:
        if taken:
            raw.execute("SELECT pg_advisory_unlock(%s::integer, hashtext(%s))", (BUILD_LOCK_CLASS, name))


def remove_stale_schemas(raw) -> tuple[list[str], list[str]]:
    """Drop the schemas of builds whose session is gone (killed, or its machine went down): the schemas marked as
    a build's (``claim_schema``) whose advisory lock this session can take, as a running build holds its own.
    Returns (the schemas dropped, a warning for each that could not be: another role's, or its tables locked)."""
    psycopg = driver()
    rows = raw.execute(
        "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s AND obj_description(oid, 'pg_namespace') = %s "
        "ORDER BY nspname",
        (SCHEMA + r"\_build\_%", BUILD_MARK),
    ).fetchall()
    dropped, failed = [], []
    for (name,) in rows:
        if not _BUILD_SCHEMA.fullmatch(name):
            continue
        with build_lock(raw, name) as taken:
            if not taken:
                continue  # its build is running
            try:
                if _drop_marked(raw, name):
                    dropped.append(name)
            except psycopg.Error as exc:
                failed.append(
                    f"a killed build's schema {name} could not be dropped ({first_line(exc)}): drop it by hand "
                    "(nothing reads it)"
                )
    return dropped, failed


def first_line(exc: BaseException) -> str:
    """The first line of a server's message (the rest is context and hints), for a warning."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _drop_marked(raw, name: str) -> bool:
    """Drop the schema ``name`` if it is still there and still marked (its build may have swapped it in, or dropped
    it, since it was listed); whether it was dropped. The caller holds its lock."""
    from psycopg import sql

    with raw.transaction():
        raw.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{DROP_LOCK_TIMEOUT}s")))
        still = raw.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s AND obj_description(oid, 'pg_namespace') = %s",
            (name, BUILD_MARK),
        ).fetchone()
        if still:
            raw.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    return still is not None


@contextlib.contextmanager
def build_folder(prefix: str = FOLDER_PREFIX) -> Iterator[Path]:
    """A new folder ``retrieval-pgbuild-XXXXXXXX`` (``prefix``, then ``tempfile``'s letters) in the system's
    temporary folder for the SQLite phase, removed when the block ends, and ``flock``'ed for as long as the build
    lives: the kernel drops the lock when the process dies, however it dies, so a later build tells a killed
    build's folder from a running one's (``remove_stale_folders``)."""
    while True:
        path = Path(tempfile.mkdtemp(prefix=prefix))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        with contextlib.suppress(OSError):  # a filesystem without flock: no later build can take it either
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(path, fd):
            break
        os.close(fd)  # a later build took the lock between mkdtemp and flock, and removed the folder: another
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


def remove_stale_folders(parent: str | os.PathLike[str] | None = None, prefix: str = FOLDER_PREFIX) -> list[Path]:
    """Remove the folders of builds that are gone from ``parent`` (default: the system's temporary folder):
    this user's folders named as ``build_folder(prefix)`` names them whose lock can be taken. Returns them."""
    parent = Path(tempfile.gettempdir() if parent is None else parent)
    pattern = re.compile(re.escape(prefix) + _FOLDER_SUFFIX)
    try:
        entries = sorted(os.scandir(parent), key=lambda e: e.name)
    except OSError:
        return []
    removed = []
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue  # a symlink, a file, or another user's
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if _same_file(entry.path, fd) and _try_flock(fd):  # its build would hold the lock: it is gone
                shutil.rmtree(entry.path, ignore_errors=True)
                if not os.path.lexists(entry.path):
                    removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed


def _same_file(path: str | os.PathLike[str], fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, nor replaced, since it was opened)."""
    try:
        named, held = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _try_flock(fd: int) -> bool:
    """Whether this process took ``fd``'s exclusive ``flock`` now (False: another holds it, or it cannot be had)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


#: The tables of a schema (plain, partitioned or foreign), by name.
_RELATIONS_SQL = (
    "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'f')"
)


def swap_schema(raw, url: DatabaseURL, schema: str, before: tuple | None, also=None) -> None:
    """Make the built schema ``schema`` the index: in one transaction under the writers' lock, refused when a
    writer changed the index since the build read its fingerprint ``before``; the old schema is dropped.
    ``also(raw)`` runs in the same transaction once the check has passed, the old index still in place: what must
    change hands with the index exactly when it does (a sharded build's foreign servers)."""
    from .write import WRITER_LOCK_KEY

    stop.check()  # a stop a garbage collector's callback dropped (``retrieval.stop``): nothing swapped in
    with raw.transaction():
        # Under the writers' lock: an add that committed since the build began would be lost.
        raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
        if _fingerprint(raw) != before:
            raise StoreError(
                f"another writer changed the index at {url.shown} while this build ran: nothing was "
                "replaced; run the build again (or add those papers to its corpus)"
            )
        if also is not None:
            also(raw)
        old = f"{SCHEMA}_old_{os.getpid()}_{int(time.time() * 1000)}"
        exists = raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (SCHEMA,)).fetchone()
        if exists and before is not None:
            # The tables in the order every search locks them (retrieval.store.sql.executor), so a search
            # that begins meanwhile waits for the swap instead of deadlocking with it.
            # Those the replaced index has: an older revision's lacks the tables added since.
            present = {row[0] for row in raw.execute(_RELATIONS_SQL, (SCHEMA,))}
            tables = ", ".join(f'"{SCHEMA}"."{t}"' for t in LOCKED if t in present)
            raw.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        if exists:
            raw.execute(f'ALTER SCHEMA "{SCHEMA}" RENAME TO "{old}"')
        raw.execute(f'ALTER SCHEMA "{schema}" RENAME TO "{SCHEMA}"')
        raw.execute(f'COMMENT ON SCHEMA "{SCHEMA}" IS NULL')  # a build's mark (claim_schema): the index's now
        if exists:
            raw.execute(f'DROP SCHEMA "{old}" CASCADE')
        database = raw.execute("SELECT current_database()").fetchone()[0]
        raw.execute(f'ALTER DATABASE "{database}" SET search_path = "{SCHEMA}", public')
    stop.saved()  # committed: a stop from here on lets the command finish


__all__ = [
    "SCHEMA",
    "StoreError",
    "build_folder",
    "build_lock",
    "build_postgres",
    "claim_schema",
    "copy_table",
    "copy_tables",
    "migrate_schema",
    "remove_stale_folders",
    "remove_stale_schemas",
    "swap_schema",
]


def upgrade_server(url: DatabaseURL):
    """``retrieval upgrade`` on a server: the index's schema brought to this version's revision by the Alembic
    migrations, in one transaction under the writers' lock (PostgreSQL's DDL is transactional: a failure leaves
    it as it was). An index of an older tokeniser is refused with a rebuild as the way forward (its text is
    re-indexed by building again)."""
    from alembic import command
    from sqlalchemy import create_engine, pool, text
    from sqlalchemy.exc import DBAPIError

    from ..database import (
        HEAD_REVISION,
        KNOWN_REVISIONS,
        _read_revision_and_info,
        build_command,
        check_index,
        tokeniser_outdated,
    )
    from ..schema.migrate import Upgrade, alembic_config
    from .write import WRITER_LOCK_KEY

    before, info = _read_revision_and_info(url)
    if "shards" in info and before != HEAD_REVISION and before in KNOWN_REVISIONS:
        raise StoreError(  # its tables live on the shards, which the migrations do not reach
            f"the index at {url.shown} is sharded, at schema revision {before!r}: a sharded index is brought to "
            f"{HEAD_REVISION!r} by building it again: `{build_command(url, info)}` (it keeps the recorded shards)"
        )
    if tokeniser_outdated(info):
        raise StoreError(
            f"the index at {url.shown} was tokenised by an older tokeniser: rebuild it with "
            f"`{build_command(url, info)}` (re-indexing in place works on files only)"
        )
    if before == HEAD_REVISION:
        check_index(url)
        return Upgrade(before, before)
    if before not in KNOWN_REVISIONS:
        check_index(url)  # the unknown-revision message
    engine = create_engine("postgresql+psycopg://" + str(url).split("://", 1)[1], poolclass=pool.NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITER_LOCK_KEY})
            connection.execute(text(f'SET LOCAL search_path TO "{SCHEMA}"'))
            cfg = alembic_config()
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
    except driver().Error as exc:
        raise _upgrade_error(exc, url) from None
    except DBAPIError as exc:  # SQLAlchemy's wrapping of the server's error
        raise _upgrade_error(exc.orig, url) from None
    finally:
        engine.dispose()
    check_index(url)
    return Upgrade(before, HEAD_REVISION)


def _upgrade_error(exc, url: DatabaseURL) -> Exception:
    """The message of an upgrade the server refused. A table the migrations replace may have the user's own
    views over it (made with psql): the server names them in its detail, which is what the user needs."""
    if isinstance(exc, driver().errors.DependentObjectsStillExist):
        detail = " ".join((exc.diag.message_detail or "").split())
        return StoreError(
            f"cannot upgrade the index at {url.shown}: objects of yours depend on a table the upgrade replaces "
            f"({detail or first_line(exc)}); nothing was changed. Save their definitions, drop them, run "
            "`retrieval upgrade` again and make them again (the view citations keeps the columns the table had)"
        )
    return server_error(exc, url, "upgrade")
