"""The schema migrations, run in-process: where they are in the installed package, applying them to a new file,
and ``upgrade_index``, which brings an index of an older revision to the head without touching the original
until the upgraded copy is complete.

The scripts live in the repository's top-level ``migrations/`` folder, which the package ships as
``retrieval.migrations``; their location is resolved from the installed package, so an installed wheel finds them.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from ...errors import SchemaVersionError
from ..database import (
    HEAD_REVISION,
    KNOWN_REVISIONS,
    _read_revision_and_info,
    _require_file,
    _uri,
    check_index,
    environment_failure,
    store_error,
    tokeniser_outdated,
)
from ..rows import renew_generation, seal_if_true
from ..sqlite.files import TempIndex, read_fingerprint, remove_stale_temporaries, swap_in


def migrations_dir() -> Path:
    """The folder of the migration scripts inside the installed package."""
    try:
        folder = Path(str(resources.files("retrieval.migrations")))
    except ModuleNotFoundError:
        folder = None
    if folder is None or not (folder / "env.py").is_file():
        raise SchemaVersionError(
            "the schema migrations are missing from this installation of retrieval (retrieval.migrations): "
            "reinstall the package (`pip install --force-reinstall retrieval`)"
        )
    return folder


def alembic_config():
    """An Alembic configuration for the packaged scripts. The target is handed over as a connection
    (``migrate``), never as a URL in the configuration, so a path with ``%`` or ``?`` in it stays a path."""
    from alembic.config import Config

    # Alembic's default stream is sys.stdout as it was when alembic.config was first imported: a stream replaced
    # since (redirected, captured, closed) would take its messages. The stream of the moment instead.
    cfg = Config(stdout=sys.stdout)
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["configure_logging"] = False
    return cfg


def head_revision() -> str:
    """The head of the migration scripts (tests check it equals ``HEAD_REVISION``)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def script_revisions() -> list[str]:
    """Every revision of the scripts, oldest first (tests check it equals ``KNOWN_REVISIONS``)."""
    from alembic.script import ScriptDirectory

    return [
        script.revision for script in reversed(list(ScriptDirectory.from_config(alembic_config()).walk_revisions()))
    ]


def migrate(path: Path, revision: str = "head", sql: bool = False) -> None:
    """Bring the file at ``path`` (created if absent) to ``revision`` with Alembic, in this process; with
    ``sql``, print the SQL instead (offline mode, nothing is opened)."""
    from alembic import command

    if sql:
        cfg = alembic_config()
        cfg.set_main_option("sqlalchemy.url", _url(path).render_as_string().replace("%", "%%"))
        command.upgrade(cfg, revision, sql=True)
        return
    _on_connection(path, lambda cfg: command.upgrade(cfg, revision))


def downgrade(path: Path, revision: str) -> None:
    """Take the file at ``path`` down to ``revision`` (for tests of the migrations)."""
    from alembic import command

    _on_connection(path, lambda cfg: command.downgrade(cfg, revision))


def _url(path: Path):
    from sqlalchemy.engine import URL

    return URL.create("sqlite", database=str(path))  # a path, never parsed: '?', '#' and '%' stay in the name


def _on_connection(path: Path, run) -> None:
    """``run(cfg)`` with an Alembic configuration holding a connection to ``path``, in one transaction."""
    from sqlalchemy import create_engine, event, pool

    from ..database import _register_functions

    cfg = alembic_config()
    engine = create_engine(_url(path), poolclass=pool.NullPool)
    event.listen(engine, "connect", lambda dbapi_conn, _: _register_functions(dbapi_conn))  # ln() for 0004
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            run(cfg)
    finally:
        engine.dispose()


class Upgrade(tuple):
    """``(revision before, revision after)`` of an upgrade, and ``reindexed``: the tokeniser version the index
    was re-indexed from (``retrieval.store.sqlite.reindex``), or None when its text was not touched."""

    reindexed: str | None

    def __new__(cls, before: str, after: str, reindexed: str | None = None) -> Upgrade:
        self = super().__new__(cls, (before, after))
        self.reindexed = reindexed
        return self


def upgrade_index(path: Path) -> Upgrade:
    """Upgrade the index at ``path`` to ``HEAD_REVISION`` and this version's tokeniser; returns
    ``(revision before, revision after)`` (an ``Upgrade``, which also says whether the text was re-indexed).

    The index is copied with SQLite's backup API (a consistent copy, whatever its WAL holds), the copy is
    migrated, an index written by an older tokeniser is re-indexed from its papers' stored text with the stemmer
    and stop words it records (``retrieval.store.sqlite.reindex``), and the copy replaces the original in one swap. If
    anything fails the original is untouched.
    """
    path = Path(path)
    try:
        return _upgrade(path)
    except (OSError, sqlite3.Error) as exc:
        raise store_error(exc, path, "upgrade") from None


def _upgrade(path: Path) -> Upgrade:
    with upgraded_copy(path) as (_, upgrade):
        pass
    return upgrade


@contextmanager
def upgraded_copy(path: Path) -> Iterator[tuple[Path | None, Upgrade]]:
    """``with upgraded_copy(path) as (copy, upgrade)``: the index at ``path`` copied and upgraded (``upgrade_index``
    says how), the copy at ``copy`` for the block to change too (a writer's transaction: the upgrade and the write
    then land together, or neither), swapped in when the block ends and discarded if it raises. ``copy`` is None
    when ``path`` needs no upgrade (``upgrade`` then is ``(revision, revision)``)."""
    _require_file(path)
    before, info = _read_revision_and_info(path)
    outdated = tokeniser_outdated(info)
    if before == HEAD_REVISION and not outdated:
        check_index(path)
        yield None, Upgrade(before, before)
        return
    if before not in KNOWN_REVISIONS:
        check_index(path)  # raises the unknown-revision error
    remove_stale_temporaries(path)
    expected = read_fingerprint(path)
    temp = TempIndex(path, ".upgrading")
    tmp = temp.path
    try:
        source = sqlite3.connect(f"{_uri(path)}?mode=ro", uri=True)
        copy = sqlite3.connect(tmp)
        try:
            source.backup(copy)
        finally:
            source.close()
            copy.close()
        try:
            migrate(tmp)
        except Exception as exc:
            from sqlalchemy.exc import SQLAlchemyError

            if not isinstance(exc, SQLAlchemyError):
                raise
            orig = getattr(exc, "orig", None)
            if isinstance(orig, sqlite3.Error) and environment_failure(orig):
                raise store_error(orig, path, "upgrade") from None  # the disk, not the tables: say so
            # The tables do not look like the revision the file records (edited by hand, or written by something
            # else): the migration's first line, and what to do; the copy is discarded below.
            cause = str(orig or exc).strip().splitlines()[0]
            raise SchemaVersionError(
                f"cannot upgrade {path} from schema revision {before}: its tables are not those of that revision "
                f"({cause}); nothing was changed. Rebuild the index from its corpus (`retrieval build --from FILE "
                f"--db {path}`), or check it (`retrieval check --db {path}`)"
            ) from None
        if outdated:
            from ..sqlite.reindex import reindex

            conn = sqlite3.connect(tmp, isolation_level=None, check_same_thread=False)  # the loader's threads
            try:
                reindex(conn)
            finally:
                conn.close()
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # The migrations may have dropped columns (0008: a few bytes of every posting): the copy is rewritten
            # without the pages they freed, so an upgraded file is as small as a fresh build.
            conn.execute("VACUUM")
        finally:
            conn.close()
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            renew_generation(conn)  # the migrations may have rewritten what readers keep (the postings)
            seal_if_true(conn)  # statistics an older version wrote, sealed once the tables agree with them
            conn.commit()
        finally:
            conn.close()
        check_index(tmp)
        yield tmp, Upgrade(before, HEAD_REVISION, info.get("tokeniser_version") if outdated else None)
        swap_in(tmp, path, expected)
    except BaseException:
        temp.discard()
        raise
    finally:
        temp.close()
