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

_POSTGRESQL: dict[str, str] = {}


def register(sqlite: str, postgresql: str) -> str:
    """Record ``postgresql`` as the PostgreSQL text of the statement whose SQLite text is ``sqlite``; returns
    ``sqlite``."""
    _POSTGRESQL[sqlite] = postgresql
    return sqlite


def text_for(sql: str, dialect: str, name: str = "") -> str:
    """The text of ``sql`` (a SQLite text) to run on ``dialect``."""
    if dialect == SQLITE:
        return sql
    try:
        return _POSTGRESQL[sql]
    except KeyError:
        raise StoreError(
            f"the statement {name or sql[:60]!r} has no PostgreSQL text yet: this operation works on SQLite "
            "index files only for now"
        ) from None


def registered() -> dict[str, str]:
    """Every registered pair (SQLite text -> PostgreSQL text), for tests."""
    return dict(_POSTGRESQL)


register("BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
register("COMMIT", "COMMIT")
