"""postings as BLOBs: each term's postings packed in rows of up to 16,384, derived from ``term_freq``; no head index

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 00:00:00

``postings`` holds what ``term_freq`` holds, packed for NumPy (``retrieval.store.postings`` says how): long and deep
queries are scored from it, short ones still by SQL over ``term_freq``, which stays the table of record. An
existing index's postings are derived here, in the upgrade's transaction. On PostgreSQL the BLOB columns are
stored uncompressed (``STORAGE EXTERNAL``): packed integers do not compress, and a read should not try.
The partial index ``ix_term_freq_head`` goes: the SQL plan no longer reads a common term's head (such queries
are scored from the BLOBs).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("term_id", "first_doc", "last_doc", "df", "max_count", "min_length", "doc_ids", "counts", "lengths")


def upgrade() -> None:
    op.create_table(
        "postings",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("first_doc", sa.Integer(), nullable=False),
        sa.Column("last_doc", sa.Integer(), nullable=False),
        sa.Column("df", sa.Integer(), nullable=False),
        sa.Column("max_count", sa.Integer(), nullable=False),
        sa.Column("min_length", sa.Integer(), nullable=False),
        sa.Column("doc_ids", sa.LargeBinary(), nullable=False),
        sa.Column("counts", sa.LargeBinary(), nullable=False),
        sa.Column("lengths", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("term_id", "first_doc", name=op.f("pk_postings")),
    )
    if op.get_context().dialect.name == "postgresql":
        for column in ("doc_ids", "counts", "lengths"):
            op.execute(f"ALTER TABLE postings ALTER COLUMN {column} SET STORAGE EXTERNAL")
    # Offline (``alembic upgrade --sql``) there are no rows: the script creates the table (a script shows the
    # schema; an index is upgraded online, by ``retrieval upgrade``).
    if not op.get_context().as_sql:
        from retrieval.store.postings import ALL_POSTINGS_SQL, derive

        conn = op.get_bind()
        result = conn.execute(sa.text(ALL_POSTINGS_SQL))
        insert = sa.text(f"INSERT INTO postings ({', '.join(COLUMNS)}) VALUES ({', '.join(':' + c for c in COLUMNS)})")
        for rows in derive(iter(lambda: result.fetchmany(200_000), [])):
            conn.execute(insert, [dict(zip(COLUMNS, row, strict=True)) for row in rows])
    # The partial index of high-impact postings served the SQL plan's reads of a common term's best postings:
    # the queries that read common terms are scored from the BLOBs now, and the index took as much room.
    op.drop_index("ix_term_freq_head", table_name="term_freq")
    op.execute("UPDATE index_info SET value = '0007' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0006' WHERE key = 'schema_revision'")
    op.create_index(
        "ix_term_freq_head",
        "term_freq",
        ["term_id", "impact", "count", "length"],
        unique=False,
        sqlite_where=sa.text("impact >= 1250"),
        postgresql_where=sa.text("impact >= 1250"),
    )
    op.drop_table("postings")
