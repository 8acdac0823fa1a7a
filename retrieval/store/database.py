"""Opening an index file for reading: the revision and tokeniser checks, and the index's statistics.

Opening never writes: an index of an older schema revision is refused with the command that upgrades it
(``retrieval upgrade``, ``retrieval.store.schema.migrate.upgrade_index``). The read path uses the standard library's
``sqlite3`` only; Alembic and SQLAlchemy are imported by the writers, which keeps a fresh process's first
query fast.

Opening checks only what costs nothing beside the rows it reads anyway (a cold open of a 500K-paper index reads no
table whole): the tables and indexes, the type and range of each statistic, avgdl against N and the token total,
N against the last document id, and the seal every writer leaves over the statistics (``check_seal``). The rest
is each query's (``retrieval.search.lexical``) and ``retrieval check``'s (``retrieval.store.integrity``).
"""

from __future__ import annotations

import errno
import math
import os
import sqlite3
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from ..config import DEFAULT_DB, DatabaseURL
from ..errors import IndexNotFoundError, NotAnIndexError, RetrievalError, SchemaVersionError, StoreError
from ..text import DEFAULT_STEM, DEFAULT_STOPWORDS, NONE, TOKENISER_NAME, TOKENISER_VERSION, Analyser
from .schema.catalogue import LOCKED_SINCE, required
from .sql.dialect import POSTGRESQL, statement, text_for

#: The schema revision this version of the package writes and reads (the Alembic head).
HEAD_REVISION = "0011"
#: Every revision of the migration scripts, oldest first (a test checks them against the scripts).
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011")
#: The revisions a search reads as they are. 0005 only adds the query log, which a search never reads; 0006 adds
#: the authors' folded keys, which every search reads (filters, the surname hint), so an older index is upgraded
#: once (``retrieval upgrade``); 0007 adds the postings BLOBs, which every search reads (their bounds); 0008 only
#: drops columns no search reads (a writer upgrades a 0007 index before it writes); 0009 adds the papers' vectors,
#: which only an index built with ``--semantic`` has (and says so in ``index_info``); 0010 numbers the citations'
#: ids, which the reads of the whole graph and of its counts use (``paper_keys``, ``citation_links``): an older
#: index is upgraded once; 0011 packs a wide chunk's doc ids as gaps, which this version reads in either layout.
READABLE_REVISIONS = ("0010", "0011")


#: What a ``file:`` URI must escape for SQLite to read the rest as the path (``%`` first, so it is not doubled).
_URI_ESCAPES = (("%", "%25"), ("?", "%3f"), ("#", "%23"))


def _uri(path: Path) -> str:
    """A ``file:`` URI for ``path`` that SQLite decodes back to exactly that path, whatever characters the
    filesystem allowed in it (``urllib.parse.quote`` would do, but costs a query process its import)."""
    text = str(Path(path).resolve())
    for char, escaped in _URI_ESCAPES:
        text = text.replace(char, escaped)
    return "file:" + text


def _register_functions(dbapi_conn: sqlite3.Connection) -> None:
    # Natural log (migration 0004's impacts): SQLite has ln() only when built with its math functions.
    try:
        dbapi_conn.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        dbapi_conn.create_function("ln", 1, math.log, deterministic=True)


def connect(path: Path, readonly: bool = True) -> sqlite3.Connection:
    """A connection to the index file, read-only (``mode=ro``) unless asked otherwise.

    A reader of an index in a folder or on a medium it may not write to cannot create the ``-shm`` file that
    WAL mode shares between processes; it then opens the file as immutable (no locks, no ``-shm``), which is
    right for a read-only copy: nothing can write to it. Not where a ``-wal`` beside it holds writes: an
    immutable open would read the index as it was before them, silently, so that is a ``StoreError`` saying
    what to do. Statements use named parameters (``:name``) with a dict, so the SQL text is what ``--sql``
    prints.
    """
    if os.path.isdir(path):  # SQLite calls it a disk I/O error
        raise StoreError(
            f"{path} is a folder, not an index file: give the index file's path (such as {Path(path) / DEFAULT_DB})"
        )
    if os.path.exists(path) and not os.path.isfile(path):  # SQLite's open of a pipe waits for a writer, for ever
        raise StoreError(f"{path} is not a regular file (a device, a pipe or a socket): give the index file's path")
    try:
        conn = _open(_uri(path) + ("?mode=ro" if readonly else ""), readonly)
    except sqlite3.DatabaseError as exc:
        if not readonly or not isinstance(exc, sqlite3.OperationalError) or not _cannot_share(exc):
            raise store_error(exc, path, "open") from None
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:  # an immutable open reads the file alone: the WAL's writes unseen
            raise StoreError(
                f"{path} has writes in {wal.name} that only a reader able to create {Path(path).name}-shm beside it "
                "can apply, and this folder is read-only here: open the index once where it can be written (any "
                f"command, such as `retrieval stats --db {path}`, moves the writes into the file), or copy it with "
                f'`sqlite3 {path} ".backup COPY"` and search the copy'
            ) from None
        try:
            conn = _open(_uri(path) + "?mode=ro&immutable=1", readonly)
        except sqlite3.Error:
            raise store_error(exc, path, "open") from None
    _register_functions(conn)
    if readonly:
        # A read's sorts and groupings (a hub paper's co-citations) in memory, not in temporary files of the
        # system's temp folder (about 10 MB a request for `similar` on a hub, written and deleted each time).
        conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _open(uri: str, probe: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    if probe:
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opening is lazy: try it now
        except BaseException:
            conn.close()
            raise
    return conn


def _cannot_share(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


#: What SQLite says of a failure of the machine rather than of the tables (a full disk, a read-only one, ...).
ENVIRONMENT_FAILURES = ("full", "disk i/o", "readonly", "read-only", "locked", "busy", "unable to open", "memory")


def environment_failure(exc: sqlite3.Error) -> bool:
    """Whether SQLite's ``exc`` is the machine's failure (``store_error`` says which), not the tables'."""
    text = str(exc).lower()
    return any(word in text for word in ENVIRONMENT_FAILURES)


def _blocked_by(path: Path | str) -> str | None:
    """Why a write to the index at ``path`` cannot open what it needs, when the cause is not the file's own
    permissions: a file system mounted read-only, or a ``-wal``/``-shm`` file beside the index that this user may
    not write (another user's search leaves them, and SQLite needs both writable)."""
    if not os.path.exists(path):
        return None
    folder = os.path.dirname(os.path.abspath(path)) or "."
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"its file system ({folder}) is mounted read-only: copy the index to a writable disk"
    except OSError:
        return None
    for suffix in ("-wal", "-shm"):
        side = f"{path}{suffix}"
        if os.path.exists(side) and not os.access(side, os.W_OK):
            if os.stat(side).st_uid == os.geteuid():  # this user's: a write to the index while it was read-only
                return (
                    f"{side} is read-only (left by an earlier write to the index while the index was read-only): "
                    "remove it when no one is using the index"
                )
            try:
                import pwd

                owner = f"user {pwd.getpwuid(os.stat(side).st_uid).pw_name}"
            except (ImportError, KeyError, OSError):
                owner = "another user"
            return (
                f"{side} belongs to {owner} and this user may not write it (a search of theirs left it): remove "
                "it when no one is using the index, or let that user write it"
            )
    return None


def store_error(exc: BaseException, path: Path | str, doing: str) -> RetrievalError:
    """The message for an environment failure ``exc`` while ``doing`` (a verb: "open", "read", "write to")
    the index at ``path``: what happened, where, and what to do. The CLI prints it; nothing is a traceback."""
    text = str(exc).lower()
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return StoreError(
                f"cannot {doing} {path} ({reason}): a permissions or read-only problem; check that you may "
                f"{'write to' if doing != 'read' else 'read'} the file and its folder"
            )
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return StoreError(f"the disk is full: cannot {doing} {path} ({reason}); free some space and try again")
        return StoreError(f"cannot {doing} {path} ({reason}): check the path and try again")
    if "locked" in text or "busy" in text:
        return StoreError(
            f"{path} is locked by another process ({exc}): nothing was changed; try again when it has finished"
        )
    if "full" in text:
        return StoreError(f"the disk is full: cannot {doing} {path} ({exc}); nothing was changed, free some space")
    if "readonly" in text or "read-only" in text or "permission" in text or "unable to open" in text:
        blocked = _blocked_by(path)
        if blocked:
            return StoreError(f"cannot {doing} {path} ({exc}): {blocked}")
    if "readonly" in text or "read-only" in text or "permission" in text:
        return StoreError(
            f"cannot {doing} {path}: it is read-only ({exc}); a permissions problem: check that you may write to "
            "the file and its folder"
        )
    if "unable to open" in text and os.path.exists(path) and not os.access(path, os.R_OK):
        return StoreError(
            f"cannot {doing} {path}: permission denied; a permissions problem: check that you may read it"
        )
    if "unable to open" in text:
        return StoreError(
            f"cannot {doing} {path} ({exc}): check that the file and its folder exist and that you may read them"
        )
    if "not a database" in text:
        return NotAnIndexError(
            f"{path} is not a retrieval index ({exc}): choose another --db, or build one there with "
            "`retrieval build --db PATH`"
        )
    if "malformed" in text or "corrupt" in text or "could not decode" in text:
        return NotAnIndexError(f"{path} is damaged ({exc}): rebuild it with `{build_command(path)}`")
    if "disk i/o" in text:
        return StoreError(f"a disk error: cannot {doing} {path} ({exc}); check the disk (full, removed, read-only?)")
    return StoreError(f"cannot {doing} {path} ({exc})")


EDGE_COUNTS_SQL = statement("""\
SELECT count(*) AS references_total,
       count(*) FILTER (WHERE citing.id IS NOT NULL AND cited.id IS NOT NULL) AS edges
FROM citations AS c
LEFT JOIN papers AS citing ON citing.id = c.citing_id
LEFT JOIN papers AS cited ON cited.id = c.cited_id""")

INDEX_INFO_SQL = statement("""\
SELECT key,
       value
FROM index_info""")


def edge_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(live edges, dangling references)``: citation rows with both ends in ``papers``, and the rest."""
    total, edges = conn.execute(EDGE_COUNTS_SQL).fetchone()
    return edges or 0, total - (edges or 0)


_STATS_FIELDS = "n_papers total_tokens min_year max_year k1 b tokeniser tokeniser_version info"


class IndexStats(namedtuple("IndexStats", _STATS_FIELDS)):
    """The statistics a search needs, from ``index_info``, read once per snapshot: N, total tokens, the year
    range, k1, b, the tokeniser, and every ``info`` value.

    The query path's records are named tuples and slotted classes, not dataclasses: a query process does not
    import ``dataclasses`` (and ``inspect`` with it), a third of a fresh search's start (bench/cli_start.py)."""

    __slots__ = ()

    @property
    def avgdl(self) -> float:
        return self.total_tokens / self.n_papers if self.n_papers else 0.0

    @property
    def analyser(self) -> Analyser:
        """How this index analyses text (``retrieval.text.Analyser``): a query must be analysed with it."""
        return Analyser.from_info(self.info)

    @classmethod
    def from_info(cls, info: dict[str, str]) -> IndexStats:
        """The statistics of ``index_info``, each checked for its type and range: a value a writer of this
        package cannot have written means a damaged or hand-edited file, refused with ``NotAnIndexError``
        rather than answered wrongly."""
        n_papers = _number(info, "n_papers", int, 1, 10**12)
        total_tokens = _number(info, "total_tokens", int, 0, 10**15)
        min_year = _number(info, "min_year", int, 0, 9999, optional=True)
        max_year = _number(info, "max_year", int, 0, 9999, optional=True)
        if (min_year is None) != (max_year is None) or (min_year is not None and min_year > max_year):
            raise _damaged(f"index_info gives the years {min_year!r} to {max_year!r}")
        if "avgdl" in info:  # derived (total_tokens / n_papers): no search reads it, but it must say the same
            avgdl = _number(info, "avgdl", float, 0.0, 10.0**15)
            if not math.isclose(avgdl, total_tokens / n_papers, rel_tol=1e-9, abs_tol=1e-9):
                raise _damaged(
                    f"index_info.avgdl is {info['avgdl']!r}, but total_tokens / n_papers is {total_tokens / n_papers!r}"
                )
        check_seal(info)
        return cls(
            n_papers=n_papers,
            total_tokens=total_tokens,
            min_year=min_year,
            max_year=max_year,
            k1=_number(info, "k1", float, 0.0, 10.0),
            b=_number(info, "b", float, 0.0, 1.0),
            tokeniser=info.get("tokeniser", ""),
            tokeniser_version=info.get("tokeniser_version", ""),
            info=info,
        )


def located(exc: NotAnIndexError, path: Path | str, info: dict[str, str] | None = None) -> NotAnIndexError:
    """``exc`` (a message of ``IndexStats.from_info``, which knows no path) naming the index at ``path``, and the
    commands it names told that path (and the build, the analysis of the index ``info`` describes)."""
    text = str(exc).replace("`retrieval check`", f"`retrieval check --db {path}`")
    text = text.replace("`retrieval build`", f"`{build_command(path, info)}`")
    return NotAnIndexError(f"{path}: {text}")


def _damaged(what: str) -> NotAnIndexError:
    return NotAnIndexError(
        f"the index is damaged: {what}; `retrieval check` reports every problem, `retrieval build` rebuilds it"
    )


#: The ``index_info`` values a search computes with (N, the token total and avgdl, the years recency reads, k1,
#: b, and how text is analysed), sealed by every writer: ``SEAL_KEY`` holds a digest of them
#: (``seal``), written in the transaction that writes them (``retrieval.store.rows.write_statistics``: the build,
#: an add, a remove, a re-index). A value edited by hand no longer matches it, and an open refuses the index
#: (``check_seal``) where it could not otherwise tell without reading whole tables: N one too small changes every
#: idf and no bound catches it. An index without a seal (written before seals) is read as it is.
SEALED_KEYS = (
    "n_papers", "total_tokens", "avgdl", "min_year", "max_year", "k1", "b",
    "tokeniser", "tokeniser_version", "stemmer", "stopwords",
)  # fmt: skip
SEAL_KEY = "seal"
SEAL_VERSION = "v1"
_seals: dict[tuple, str] = {}  # the last few digests computed (every snapshot checks the seal: a lookup then)


def seal(info: dict[str, str]) -> str:
    """The seal of ``info``'s ``SEALED_KEYS`` (their values as stored; an absent key differs from an empty one)."""
    values = tuple(info.get(key) for key in SEALED_KEYS)
    digest = _seals.get(values)
    if digest is None:
        import hashlib  # on first use (a search has imported it already)

        fields = zip(SEALED_KEYS, values, strict=True)
        text = "\x1e".join(f"{key}\x1f{'' if v is None else v}\x1f{v is None:d}" for key, v in fields)
        digest = f"{SEAL_VERSION}:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
        if len(_seals) > 64:
            _seals.clear()
        _seals[values] = digest
    return digest


def check_seal(info: dict[str, str]) -> None:
    """Refuse ``info`` whose seal does not match its statistics (one edited by hand, or by a program other than
    this package's writers); an index without a seal passes, as does one sealed otherwise than ``SEAL_VERSION``."""
    stored = info.get(SEAL_KEY)
    if stored is None or not str(stored).startswith(f"{SEAL_VERSION}:") or stored == seal(info):
        return  # none, or a later version's kind of seal (that version says what it needs), or it holds
    shown = ", ".join(f"{key}={info[key]!r}" for key in SEALED_KEYS[:5] if key in info)
    raise NotAnIndexError(
        f"the index is damaged: index_info was changed after the index was written (its statistics, {shown}, ..., "
        "no longer match the seal its writer left): `retrieval check` says which disagrees with the tables; "
        "rebuild it with `retrieval build`"
    )


def _number(info: dict[str, str], key: str, kind: type, low: float, high: float, optional: bool = False):
    """``info[key]`` as a ``kind`` within ``[low, high]`` (None when ``optional`` and empty)."""
    text = info.get(key)
    if text in (None, "") and optional:
        return None
    if text is None:
        raise _damaged(f"index_info has no {key!r}")
    try:
        value = kind(text)
    except (TypeError, ValueError, OverflowError):
        raise _damaged(f"index_info.{key} is {text!r}, not a {'whole number' if kind is int else 'number'}") from None
    if not (low <= value <= high):  # also false for NaN
        raise _damaged(f"index_info.{key} is {text!r}, outside {low:g}..{high:g}")
    return value


# The catalogues differ: on PostgreSQL, the tables, views and indexes of the index's schema (the first of the
# search_path: ``retrieval``, set by ``retrieval.store.postgres.connection.connect``; none when the database has
# no index yet).
TABLES_SQL = statement(
    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view', 'index')",
    postgresql="""\
SELECT t.tablename AS name
FROM pg_tables AS t
WHERE t.schemaname = current_schema()
UNION ALL
SELECT v.viewname AS name
FROM pg_views AS v
WHERE v.schemaname = current_schema()
UNION ALL
SELECT i.indexname AS name
FROM pg_indexes AS i
WHERE i.schemaname = current_schema()""",
)
#: PostgreSQL: whether the index's schema is there and the role may use it (where ``TABLES_SQL`` finds nothing, a
#: role without USAGE on the schema sees no ``current_schema()``).
SCHEMA_USABLE_SQL = statement(
    """\
SELECT has_schema_privilege(n.oid, 'USAGE')
FROM pg_namespace AS n
WHERE n.nspname = 'retrieval'""",
    only=POSTGRESQL,
)
# O(log N), where count(*) reads the whole table: a cold open of a 500K index would pay 180 ms for it.
LAST_DOC_SQL = statement("SELECT coalesce(max(doc_id), 0) FROM doc_len")
ANY_TERM_SQL = statement("SELECT EXISTS (SELECT 1 FROM doc_freq)")
REVISION_SQL = statement("SELECT version_num FROM alembic_version")

#: ``rows(name, sql)``: run a named statement and return its rows (an executor's, so that a trace shows it).
Rows = Callable[[str, str], list]


#: The ``source`` an index of the built-in demo corpus records (``retrieval build`` without ``--from``).
BUILTIN_SOURCE = "built-in demo corpus"


def build_command(where: Path | DatabaseURL | str, info: dict[str, str] | None = None) -> str:
    """``retrieval build --from CORPUS --db WHERE``, with the ``--stem``, ``--stopwords`` and ``--semantic`` that
    rebuild the index ``info`` (its ``index_info``) describes as it was built, where those are not the build's
    defaults. ``CORPUS`` is the corpus file's name as the index records it (``FILE`` where it records none); an
    index of the demo corpus needs no ``--from``. Without ``--from`` a build indexes the demo corpus, so advice
    that left it out would replace the user's papers (``build`` refuses that)."""
    import shlex

    source = "FILE" if info is None else info.get("source") or "FILE"
    options = "" if source == BUILTIN_SOURCE else f" --from {shlex.quote(source)}"
    if info is not None:
        for option, key, default in (
            ("--stem", "stemmer", DEFAULT_STEM),
            ("--stopwords", "stopwords", DEFAULT_STOPWORDS),
        ):
            value = info.get(key) or None
            if value != default:
                options += f" {option} {value or NONE}"
        if info.get("semantic_model"):  # its vectors are built again only when asked for
            options += f" --semantic {info['semantic_model']}"
    return f"retrieval build --db {shown(where)}{options}"


def shown(path: Path | DatabaseURL | str) -> Path | str:
    """``path`` as messages name it: a server URL without its password."""
    return path.shown if isinstance(path, DatabaseURL) else path


def _server_rows(url: DatabaseURL):
    """A connection to the index at ``url`` and a ``Rows`` on it that runs each statement's PostgreSQL text."""
    from .postgres.connection import connect as server_connect
    from .postgres.connection import is_error, server_error

    conn = server_connect(url, readonly=True)

    def rows(name: str, sql: str) -> list:
        try:
            return [tuple(row) for row in conn.execute(text_for(sql, POSTGRESQL, name)).fetchall()]
        except Exception as exc:
            if not is_error(exc):
                raise
            raise server_error(exc, url, "read") from None

    return conn, rows


def _read_revision_and_info(
    path: Path | DatabaseURL, rows: Rows | None = None, contents: bool = True
) -> tuple[str, dict[str, str]]:
    conn = None
    where = shown(path)
    if rows is None and isinstance(path, DatabaseURL):
        conn, rows = _server_rows(path)
    elif rows is None:
        conn = connect(path, readonly=True)
        rows = lambda name, sql: conn.execute(sql).fetchall()  # noqa: E731
    try:
        tables = {row[0] for row in rows("open: the tables and indexes", TABLES_SQL)}
        if isinstance(path, DatabaseURL) and not tables:
            usable = rows("open: the schema's access", SCHEMA_USABLE_SQL)
            if usable and not usable[0][0]:
                raise StoreError(
                    f"cannot open the index at {where}: the role it connects as may not use the schema "
                    f"{_SCHEMA!r} that holds the index: connect as the role that built it, or have that role grant "
                    f"this one access (GRANT USAGE ON SCHEMA {_SCHEMA} TO ...; GRANT SELECT ON ALL TABLES IN SCHEMA "
                    f"{_SCHEMA} TO ...)"
                )
            raise IndexNotFoundError(
                f"no index at {where} (the database has no schema {_SCHEMA!r}): build one with "
                f"`retrieval build --db {where}` (or point --db / $RETRIEVAL_DB at an existing index)"
            )
        if {"index_info", "papers"} <= tables and "alembic_version" not in tables:  # dropped by hand
            raise NotAnIndexError(
                f"{where} is damaged: it has an index's tables but no alembic_version table, which records its "
                f"schema revision; rebuild it with `retrieval build --db {where} --from FILE`"
            )
        if not {"alembic_version", "index_info", "papers"} <= tables:
            if isinstance(path, DatabaseURL):
                raise NotAnIndexError(
                    f"the schema {_SCHEMA!r} of {where} holds tables but is not a retrieval index (no index_info/"
                    "papers tables): choose another --db (a database of its own for the index)"
                )
            raise NotAnIndexError(
                f"{where} is a SQLite file but not a retrieval index (no index_info/papers tables): "
                "choose another --db, or build one with `retrieval build --db PATH`"
            )
        revision = rows("open: the schema revision", REVISION_SQL)
        info = dict(rows("open: the statistics", INDEX_INFO_SQL))
        if contents and revision and revision[0][0] in READABLE_REVISIONS:
            _check_contents(where, tables, info, rows, revision[0][0])
    except sqlite3.DatabaseError as exc:
        error = store_error(exc, path, "read")
        if isinstance(error, StoreError):  # locked, unreadable: not a question of what the file holds
            raise error from None
        raise NotAnIndexError(
            f"{path} is not a retrieval index ({exc}): choose another --db, or build one there with "
            "`retrieval build --db PATH`"
        ) from None
    finally:
        if conn is not None:
            conn.close()
    if not revision:
        raise NotAnIndexError(f"{where} has no schema revision: rebuild it with `retrieval build --db {where}`")
    return revision[0][0], info


#: The schema an index on PostgreSQL lives in (``retrieval.store.postgres.connection.SCHEMA``, not imported: a SQLite
#: reader does not load the PostgreSQL module).
_SCHEMA = "retrieval"


def _check_contents(path: Path | str, names: set[str], info: dict[str, str], rows: Rows, revision: str) -> None:
    """The tables and indexes an index at ``revision`` has (``retrieval.store.schema.catalogue.required``) are
    there, and the statistics agree with the tables."""
    missing = [name for name in required(revision) if name not in names]
    if missing:
        raise NotAnIndexError(
            f"{path} is damaged: it lacks {', '.join(missing)}; rebuild it with `retrieval build --db {path}`"
        )
    if "n_papers" not in info:
        return  # an unfinished index: check_index says so
    if tokeniser_outdated(info):
        return  # an older tokeniser's index: check_index names `retrieval upgrade`, which re-indexes and seals it
    check_analyser(path, info)  # another version's tokeniser says so (and what to do) before the seal is read
    try:
        stats = IndexStats.from_info(info)
    except NotAnIndexError as exc:
        raise located(exc, path, info) from None
    # Document ids only grow, so N can never exceed the last one; a too small N shows in each query's df (lexical).
    (last,) = rows("open: the last document id", LAST_DOC_SQL)[0]
    if stats.n_papers > last:
        raise NotAnIndexError(
            f"{path} is damaged: index_info.n_papers says {stats.n_papers:,} papers, doc_len numbers {last:,}; "
            f"rebuild it with `{build_command(path, info)}`"
        )
    if stats.total_tokens == 0 and rows("open: any term", ANY_TERM_SQL)[0][0]:
        raise NotAnIndexError(
            f"{path} is damaged: index_info.total_tokens is 0 but doc_freq holds terms; rebuild it with "
            f"`{build_command(path, info)}`"
        )


def recorded_info(path: Path | DatabaseURL) -> dict[str, str] | None:
    """What ``index_info`` at ``path`` records, whatever the index's revision or state (damaged, of an older
    revision): whose corpus an index is, for a build that would replace it. None where no index can be read."""
    try:
        _require_file(path)
        return _read_revision_and_info(path, contents=False)[1]
    except RetrievalError:
        return None


def index_revision(path: Path) -> str:
    """The schema revision of the index file at ``path`` (``IndexNotFoundError`` when there is none)."""
    _require_file(path)
    return _read_revision_and_info(path)[0]


def _require_file(path: Path | DatabaseURL) -> None:
    if isinstance(path, DatabaseURL):
        return  # a server: opening it says whether the database and the index are there
    if not path.exists():
        if path.is_symlink():  # a link to nothing, or round in a loop: the link is what to mend
            raise IndexNotFoundError(
                f"{path} is a symbolic link to {os.readlink(path)}, which leads to no file (it is gone, or the "
                "links go round in a loop): point the link at the index, or give the index's own path as --db"
            )
        raise IndexNotFoundError(
            f"no index at {path}: build one with `retrieval build --db {path}` "
            f"(or point --db / $RETRIEVAL_DB at an existing index)"
        )


def check_index(path: Path | DatabaseURL, rows: Rows | None = None) -> IndexStats:
    """Check that ``path`` is a complete index this version can read, without changing it (through ``rows``,
    an executor's, when the caller has a connection open on it; else on a connection of its own).

    Raises ``IndexNotFoundError``, ``NotAnIndexError`` or ``SchemaVersionError`` (an older revision names
    ``retrieval upgrade``; an unknown one says to upgrade the package or rebuild).
    """
    _require_file(path)
    revision, info = _read_revision_and_info(path, rows)
    server = isinstance(path, DatabaseURL)
    path = shown(path)  # for the messages: a server URL without its password
    if revision not in KNOWN_REVISIONS:
        raise SchemaVersionError(
            f"{path} has schema revision {revision!r}, which this version of retrieval does not know "
            f"(it writes {HEAD_REVISION!r}): upgrade retrieval, or rebuild the index with `retrieval build`"
        )
    if revision not in READABLE_REVISIONS and not server:
        raise SchemaVersionError(
            f"{path} has schema revision {revision!r}, older than this version's {HEAD_REVISION!r}: "
            f"upgrade it once with `retrieval upgrade --db {path}` (the old file stays intact if that fails)"
        )
    if server and (revision < LOCKED_SINCE or revision not in READABLE_REVISIONS):
        # A snapshot on a server locks every table a search may read as it begins, those of later revisions too.
        if "shards" in info:
            raise SchemaVersionError(
                f"{path} has schema revision {revision!r}, older than this version's {HEAD_REVISION!r}: a "
                f"sharded index is brought up to date by building it again: `{build_command(path, info)}` (it "
                "keeps the recorded shards; the old index stays in place if that fails)"
            )
        raise SchemaVersionError(
            f"{path} has schema revision {revision!r}, older than this version's {HEAD_REVISION!r}: upgrade it "
            f"once with `retrieval upgrade --db {path}` (the index stays as it was if that fails)"
        )
    if "n_papers" not in info:
        raise NotAnIndexError(f"{path} is an unfinished index (no statistics): rebuild it with `retrieval build`")
    check_analyser(path, info)
    try:
        return IndexStats.from_info(info)
    except NotAnIndexError as exc:
        raise located(exc, path, info) from None


#: Tokeniser versions older than ``TOKENISER_VERSION`` that ``retrieval upgrade`` re-indexes (the papers' text
#: is in the index): 1 lowercased only, 2 also folds accents and TeX escapes.
OLD_TOKENISER_VERSIONS = ("1",)


def tokeniser_outdated(info: dict[str, str]) -> bool:
    """True when ``index_info`` names this package's tokeniser at a version ``retrieval upgrade`` re-indexes."""
    return info.get("tokeniser") == TOKENISER_NAME and info.get("tokeniser_version") in OLD_TOKENISER_VERSIONS


def check_analyser(path: Path, info: dict[str, str]) -> Analyser:
    """The analyser ``index_info`` names, if this version can analyse queries exactly as the index was
    written: an older tokeniser names ``retrieval upgrade``, an unknown one or an unknown stemmer says what to do."""
    name, version = info.get("tokeniser"), info.get("tokeniser_version")
    if (name, version) != (TOKENISER_NAME, TOKENISER_VERSION):
        if tokeniser_outdated(info):
            raise SchemaVersionError(
                f"{path} was tokenised by {name} v{version}, older than this version's v{TOKENISER_VERSION} "
                f"(which folds accents and TeX escapes, so queries would miss terms): re-index it once with "
                f"`retrieval upgrade --db {path}` (the old file stays intact if that fails), or rebuild it with "
                "`retrieval build`"
            )
        raise SchemaVersionError(
            f"{path} was tokenised by {name} v{version}, this version uses {TOKENISER_NAME} v{TOKENISER_VERSION}: "
            "upgrade retrieval, or rebuild the index with `retrieval build`"
        )
    try:
        return Analyser.from_info(info)
    except RetrievalError as exc:
        raise SchemaVersionError(
            f"{path} was analysed with stemmer {info.get('stemmer')!r} and stop words {info.get('stopwords')!r}, "
            f"which this installation cannot reproduce ({exc}); install what it names, or rebuild the index"
        ) from None
