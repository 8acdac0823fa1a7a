"""the query log: one row per logged search, similar or explain (``retrieval log on``), off by default

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 00:00:00

Only adds a table, which a search never reads (``retrieval log on`` on an index without it says to upgrade).
Whether queries are logged is the ``index_info`` key ``query_log`` (``on`` / ``off``), absent until
``retrieval log on|off`` sets it, which means off; the downgrade removes the key with the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "query_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("logged_at", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("hit_count", sa.Integer(), nullable=False),
        sa.Column("top_score", sa.Float(), nullable=False),
        sa.Column("avg_score", sa.Float(), nullable=False),
        sa.Column("wall_ms", sa.Float(), nullable=False),
        sa.Column("gate_fired", sa.Boolean(), nullable=True),
        sa.Column("result_ids", sa.Text(), nullable=False),
        sa.Column("page_limit", sa.Integer(), nullable=True),
        sa.Column("page_offset", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_query_log")),
    )
    op.create_index("ix_query_log_logged_at", "query_log", ["logged_at"], unique=False)
    op.execute("UPDATE index_info SET value = '0005' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0004' WHERE key = 'schema_revision'")
    op.execute("DELETE FROM index_info WHERE key = 'query_log'")
    op.drop_index("ix_query_log_logged_at", table_name="query_log")
    op.drop_table("query_log")
