"""Alembic environment for the index schema: offline (SQL script) and online (live file) modes."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

from retrieval.config import resolve_db_path
from retrieval.store.schema.models import Base

config = context.config
target_metadata = Base.metadata

# The CLI passes its own configuration (no ini file) and keeps its logging as it is.
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name)


def _url() -> str:
    """The target: ``sqlalchemy.url`` if set (the CLI sets it), else ``-x db=PATH``, else the resolver."""
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    db = context.get_x_argument(as_dictionary=True).get("db")
    return f"sqlite:///{resolve_db_path(db)}"


def run_migrations_offline() -> None:
    """Emit the migration as SQL text, without a database."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Apply the migration to the index file (or to a connection the caller handed over)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things: batch mode copies the table instead
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
