"""Opening an index file: migrations in-process, revision and tokeniser checks, the index's statistics.

The read path uses the standard library's ``sqlite3`` only; Alembic (and with it SQLAlchemy) is imported when a
file has to be migrated, which keeps a fresh process's first query fast.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ..errors import IndexNotFoundError, NotAnIndexError, SchemaVersionError
from ..text import TOKENISER_NAME, TOKENISER_VERSION

#: The schema revision this version of the package writes and reads (the Alembic head).
HEAD_REVISION = "0004"
MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(path: Path):
    """An Alembic configuration aimed at the index file ``path``, independent of the working directory."""
    from alembic.config import Config

    if not (MIGRATIONS_DIR / "env.py").exists():
        raise SchemaVersionError(
            f"the schema migrations are missing (looked in {MIGRATIONS_DIR}): "
            "install retrieval from its source tree with `pip install -e .`"
        )
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", f"sqlite:///{path}")
    cfg.attributes["configure_logging"] = False
    return cfg


def head_revision() -> str:
    """The head of the migration scripts (tests check it equals ``HEAD_REVISION``)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(Path("unused.db"))).get_current_head()


def migrate(path: Path, revision: str = "head") -> None:
    """Bring the file at ``path`` (created if absent) to ``revision`` with Alembic, in this process."""
    from alembic import command

    command.upgrade(alembic_config(path), revision)


def _uri(path: Path) -> str:
    """A ``file:`` URI for ``path`` (``urllib.request.pathname2url`` on POSIX, without importing urllib.request,
    which costs a query process tens of milliseconds)."""
    return "file:" + quote(str(Path(path).resolve()))


def _register_functions(dbapi_conn: sqlite3.Connection) -> None:
    # Natural log for the idf: SQLite has ln() only when built with its math functions.
    try:
        dbapi_conn.execute("SELECT ln(1.0)")
    except sqlite3.OperationalError:
        dbapi_conn.create_function("ln", 1, math.log, deterministic=True)


def connect(path: Path, readonly: bool = True) -> sqlite3.Connection:
    """A connection to the index file, read-only (``mode=ro``) unless asked otherwise.

    Queries use named parameters (``:name``) with a dict, so the SQL text is what ``--sql`` prints.
    """
    uri = _uri(path) + ("?mode=ro" if readonly else "")
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    _register_functions(conn)
    return conn


@contextmanager
def read_snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the enclosed statements in one read transaction, so they all see the same state of the file even
    while another process adds papers (WAL mode). Nested use joins the outer transaction."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


EDGE_COUNTS_SQL = """\
SELECT count(*) AS references_total,
       sum(citing.id IS NOT NULL AND cited.id IS NOT NULL) AS edges
FROM citations AS c
LEFT JOIN papers AS citing ON citing.id = c.citing_id
LEFT JOIN papers AS cited ON cited.id = c.cited_id"""


def edge_counts(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(live edges, dangling references)``: citation rows with both ends in ``papers``, and the rest."""
    total, edges = conn.execute(EDGE_COUNTS_SQL).fetchone()
    return edges or 0, total - (edges or 0)


@dataclass(frozen=True)
class IndexStats:
    """The statistics a search needs, from ``index_info``."""

    n_papers: int
    total_tokens: int
    min_year: int | None
    max_year: int | None
    k1: float
    b: float
    tokeniser: str
    tokeniser_version: str
    info: dict[str, str]

    @property
    def avgdl(self) -> float:
        return self.total_tokens / self.n_papers if self.n_papers else 0.0

    @classmethod
    def from_info(cls, info: dict[str, str]) -> IndexStats:
        def _year(key: str) -> int | None:
            return int(info[key]) if info.get(key) not in (None, "") else None

        return cls(
            n_papers=int(info["n_papers"]),
            total_tokens=int(info["total_tokens"]),
            min_year=_year("min_year"),
            max_year=_year("max_year"),
            k1=float(info["k1"]),
            b=float(info["b"]),
            tokeniser=info["tokeniser"],
            tokeniser_version=info["tokeniser_version"],
            info=info,
        )


def read_stats(conn: sqlite3.Connection) -> IndexStats:
    """The index's statistics as this connection's current transaction sees them."""
    return IndexStats.from_info(dict(conn.execute("SELECT key, value FROM index_info")))


def _read_revision_and_info(path: Path) -> tuple[str, dict[str, str]]:
    try:
        conn = sqlite3.connect(f"{_uri(path)}?mode=ro", uri=True)
    except sqlite3.Error as exc:  # pragma: no cover - unreadable file
        raise NotAnIndexError(f"{path} cannot be opened as SQLite ({exc})") from None
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"alembic_version", "index_info", "papers"} <= tables:
            raise NotAnIndexError(
                f"{path} is a SQLite file but not a retrieval index (no index_info/papers tables): "
                "choose another --db, or build one with `retrieval build --db PATH`"
            )
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        info = dict(conn.execute("SELECT key, value FROM index_info"))
    except sqlite3.DatabaseError as exc:
        raise NotAnIndexError(
            f"{path} is not a retrieval index ({exc}): choose another --db, or build one there with "
            "`retrieval build --db PATH`"
        ) from None
    finally:
        conn.close()
    if row is None:
        raise NotAnIndexError(f"{path} has no schema revision: rebuild it with `retrieval build --db {path}`")
    return row[0], info


def check_index(path: Path) -> IndexStats:
    """Check that ``path`` is a complete index this version can read, upgrading an older known schema.

    Raises ``IndexNotFoundError``, ``NotAnIndexError`` or ``SchemaVersionError`` with what to do next.
    """
    if not path.exists():
        raise IndexNotFoundError(
            f"no index at {path}: build one with `retrieval build --db {path}` "
            f"(or point --db / $RETRIEVAL_DB at an existing index)"
        )
    revision, info = _read_revision_and_info(path)
    if revision != HEAD_REVISION:
        from alembic.script import ScriptDirectory

        known = {script.revision for script in ScriptDirectory.from_config(alembic_config(path)).walk_revisions()}
        if revision not in known:
            raise SchemaVersionError(
                f"{path} has schema revision {revision!r}, which this version of retrieval does not know "
                f"(it writes {HEAD_REVISION!r}): upgrade retrieval, or rebuild the index with `retrieval build`"
            )
        migrate(path)  # an older revision this version knows: upgrade the file in place
        revision, info = _read_revision_and_info(path)
    if "n_papers" not in info:
        raise NotAnIndexError(f"{path} is an unfinished index (no statistics): rebuild it with `retrieval build`")
    if (info.get("tokeniser"), info.get("tokeniser_version")) != (TOKENISER_NAME, TOKENISER_VERSION):
        raise SchemaVersionError(
            f"{path} was tokenised by {info.get('tokeniser')} v{info.get('tokeniser_version')}, "
            f"this version uses {TOKENISER_NAME} v{TOKENISER_VERSION}: rebuild it with `retrieval build`"
        )
    return IndexStats.from_info(info)
