"""Each statement's text per dialect, side by side under one name.

A module that defines a statement for SQLite (``TOP_K_SQL``) defines its PostgreSQL text beside it
(``TOP_K_SQL_POSTGRESQL``) and registers the pair (``register(TOP_K_SQL, TOP_K_SQL_POSTGRESQL)``). The executor
runs the text of its connection's dialect, so ``--sql`` prints what ran; the parameters are the same dict for
both (JSON text where a statement takes a list, read on PostgreSQL by ``jsonb_array_elements``). A statement
with no PostgreSQL text is refused on PostgreSQL by name, never run as SQLite's.

What differs, and where it is handled: ``json_each(:x)`` against ``jsonb_array_elements(CAST(:x AS jsonb))`` (and
``->>`` giving text there, so values are cast), ``INDEXED BY`` (SQLite only: PostgreSQL's planner picks the partial
index from the predicate), ``round(x, n)`` (numeric on PostgreSQL), ``BEGIN`` (a repeatable-read, read-only
transaction on PostgreSQL: one snapshot, as SQLite's read transaction under WAL), the catalogue
(``sqlite_master`` against ``pg_tables``/``pg_indexes``).
"""

from __future__ import annotations

from ..errors import StoreError

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
#: The coordinator of an index sharded over PostgreSQL servers (``retrieval.store.shards``): PostgreSQL, where a
#: statement may have a third text of its own.
SHARDED = "postgresql, sharded"

_POSTGRESQL: dict[str, str] = {}
_SHARDED: dict[str, str] = {}
#: SQLite texts of the statements a single PostgreSQL server runs with hash joins allowed (``hash_joins``).
HASH_JOINS: set[str] = set()


def register(sqlite: str, postgresql: str) -> str:
    """Record ``postgresql`` as the PostgreSQL text of the statement whose SQLite text is ``sqlite``; returns
    ``sqlite``."""
    _POSTGRESQL[sqlite] = postgresql
    return sqlite


def register_sharded(sqlite: str, sharded: str) -> str:
    """Record ``sharded`` as the text a sharded index's coordinator runs for the statement whose SQLite text is
    ``sqlite`` (instead of its PostgreSQL text); returns ``sqlite``. On a coordinator every table access to a shard
    is a round trip: these texts read each foreign table once per statement, by a key array
    (``= ANY (ARRAY(...))``, which PostgreSQL sends to the shards), where the PostgreSQL text looks up one key per
    row, which on a single server costs nothing."""
    _SHARDED[sqlite] = sharded
    return sqlite


def hash_joins(sqlite: str) -> str:
    """Let PostgreSQL hash-join in the statement whose SQLite text is ``sqlite``: read sessions plan joins as
    lookups (``retrieval.store.postgres``), which a statement joining thousands of rows to thousands (co-citation,
    coupling) pays for with seconds (5.4 s against 0.3 s for coupling on hepth). The executor allows hash joins
    for that statement only (``SET LOCAL`` before it, back after it). Returns ``sqlite``."""
    HASH_JOINS.add(sqlite)
    return sqlite


def text_for(sql: str, dialect: str, name: str = "") -> str:
    """The text of ``sql`` (a SQLite text) to run on ``dialect``."""
    if dialect == SQLITE:
        return sql
    if dialect == SHARDED and sql in _SHARDED:
        return _SHARDED[sql]
    try:
        return _POSTGRESQL[sql]
    except KeyError:
        raise StoreError(
            f"the statement {name or sql[:60]!r} has no PostgreSQL text yet: this operation works on SQLite "
            "index files only for now"
        ) from None


def registered(dialect: str = POSTGRESQL) -> dict[str, str]:
    """Every registered pair (SQLite text -> the dialect's text), for tests."""
    return dict(_SHARDED if dialect == SHARDED else _POSTGRESQL)


register("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
HASH_JOINS_ON_SQL = register("SET LOCAL enable_hashjoin = on", "SET LOCAL enable_hashjoin = on")
HASH_JOINS_OFF_SQL = register("SET LOCAL enable_hashjoin = off", "SET LOCAL enable_hashjoin = off")
register("COMMIT", "COMMIT")
